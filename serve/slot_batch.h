// Static decode for the serving engine: a batch of fixed rows that requests move into once their
// prompt is read, so every decode step has the same shapes and buffers and, on a GPU, is replayed
// as a CUDA graph (model/decode_graph.h) instead of launching every kernel from the host.
//
// A request reads its prompt in a cache of its own (one row, exactly as `retain generate` reads
// it); after its first token that cache moves into a free row (BudgetedKvCache::load_row) and is
// freed. When the request ends its row is emptied and decodes padding (position -1, which nothing
// attends to and the next eviction drops) until another request takes it. Rows evict exactly as
// the request's own cache would have (per row, per head), so a request's greedy tokens are those
// of `retain generate` alone.
//
// Every row has the server's policy and budget (entries per KV head): requests with another policy
// or budget decode eagerly beside the rows (serve/row_stack_cache.h), as do all requests when the
// server's policy cannot decode statically (full, random, threshold eviction) or its budget is a
// fraction of each prompt.
//
// Shapes: R rows, V vocabulary.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "eval/budgeted_cache.h"
#include "eval/policies/policy_registry.h"
#include "model/decode_graph.h"
#include "model/decoder.h"

namespace retain {

// What every row holds: the server's policy, budget and learned modules.
struct SlotPolicy {
  PolicySpec policy;
  double budget = 0;  // entries per KV head (a fraction cannot be shared by rows)
  LearnedModules learned;
};

class SlotBatch {
 public:
  // Why `slots` cannot decode statically on `model` ("" when they can).
  static std::string unsupported(const Decoder& model, const SlotPolicy& slots);
  // K/V bytes of one row as allocated: budget + buffer + chunk entries per head in every layer
  // (dbtrimkv's heads may widen a layer's rows beyond that; see docs/serving.md).
  static int64_t row_bytes(const Decoder& model, const SlotPolicy& slots, int64_t chunk);

  // `rows` empty rows on the model's device; `unsupported` must be "". `chunk` is the prefill
  // chunk of the requests' own caches (their capacity, and so the rows').
  SlotBatch(const Decoder& model, const SlotPolicy& slots, int64_t rows, int64_t chunk);

  // Whether a request with this policy, budget (resolved for its prompt) and learned modules
  // decodes in the rows.
  bool accepts(const PolicySpec& policy, int64_t budget, const LearnedModules& learned) const;
  // Moves a request's cache (one row, past its first token) into a free row; -1 when none is free.
  int64_t join(const BudgetedKvCache& cache);
  // The request of `row` ended: the row is free.
  void leave(int64_t row);
  int64_t rows() const { return static_cast<int64_t>(occupied_.size()); }
  int64_t occupied() const;

  // One decode step of every row: the token each occupied row reads and its position, indexed by
  // row (free rows' entries are ignored) -> logits (R, V) on the device, valid until the next
  // step.
  at::Tensor step(const std::vector<int64_t>& tokens, const std::vector<int64_t>& positions);

  // The occupied rows' live and budget K/V bytes (one device read).
  int64_t live_bytes() const;
  int64_t budget_bytes() const;
  // K/V bytes of the rows' buffers as allocated now: row_bytes x rows, or more once a dbtrimkv
  // head widened a layer (for every row; rows never shrink: a new SlotBatch starts over).
  int64_t allocated_bytes() const;
  // How many joins reallocated buffers (each makes a captured step capture again).
  int64_t reallocations() const { return reallocations_; }
  // "cuda-graph" or "static".
  std::string mode() const { return graph_ ? "cuda-graph" : "static"; }
  int64_t graph_captures() const { return graph_ ? graph_->captures() : 0; }
  // The rows' cache (tests compare its rows with the requests' own caches).
  const BudgetedKvCache& cache() const { return *cache_; }

 private:
  const Decoder& model_;
  SlotPolicy slots_;
  int64_t budget_;
  std::unique_ptr<BudgetedKvCache> cache_;
  std::unique_ptr<DecodeGraph> graph_;
  std::vector<bool> occupied_;
  int64_t reallocations_ = 0;
};

}  // namespace retain
