// A KV cache with a real memory bound: per (layer, sequence, KV head) a variable number of live
// entries in buffers of capacity budget + buffer + chunk, compacted in place when a policy evicts
// (no full-length cache hidden behind a mask). Every entry carries its key, value, absolute
// position and the policy's statistic (log beta, attention votes, key norm or a seeded random
// score). The policy (eval/policies/) says what the statistic is and how entries score; the cache
// stores, computes the attention votes a policy asks for, compacts and keeps the budget.
//
// Eviction runs after each forward step (a prefill chunk or a decoded token): a per-head policy
// cuts a head that exceeds budget + buffer back to its top-`budget` entries; dbtrimkv cuts a
// sequence whose entries over all layers and heads exceed L Hk (budget + buffer) back to the
// global top L Hk budget.
//
// Each sequence of a batch may have its own budget (a fractional budget resolves per prompt): the
// cache holds one policy per distinct budget (budget-dependent defaults such as h2o's recent
// window differ), and every count, cut and peak is per sequence, so a row of a batch keeps what
// it would keep alone.
//
// The cache orchestrates four parts (eval/cache/): CacheStorage (buffers, append, compaction,
// bytes), PolicyRows (the per-budget policies and per-row budgets), QueryState (the queries the
// policy votes with, and their statistics) and an EvictionPlanner chosen once from the policy
// (per-head, pooled, global, threshold); static decode adds StaticDecodeCounts.
//
// Shapes: B sequences, Hk KV heads, C capacity, D head dim, S = longest live head.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "eval/cache/cache_storage.h"
#include "eval/cache/eviction_planner.h"
#include "eval/cache/policy_rows.h"
#include "eval/cache/query_state.h"
#include "eval/cache/static_decode_counts.h"
#include "eval/policies/policy_registry.h"
#include "gates/gate_bank.h"
#include "model/kv_cache.h"
#include "model/model_config.h"

namespace retain {

class BudgetedKvCache : public KvCache {
 public:
  // `learned` holds the gates trimkv / dbtrimkv need or the scorer locret / kvzap need (they must
  // outlive the cache). `chunk` is the largest number of tokens one forward appends (the prefill
  // chunk).
  BudgetedKvCache(const ModelConfig& model, const PolicySpec& policy, int64_t budget, int64_t chunk,
                  LearnedModules learned = {});
  // One budget per sequence of the batch (the batch size must then match), or one for all.
  BudgetedKvCache(const ModelConfig& model, const PolicySpec& policy, std::vector<int64_t> budgets,
                  int64_t chunk, LearnedModules learned = {});

  void observe(const LayerTensors& tensors) override;
  KvEntries append(int64_t layer, const at::Tensor& keys, const at::Tensor& values,
                   const at::Tensor& positions) override;
  // One decoded token per sequence on CUDA: the decode kernel over each head's live length
  // (kernels/decode_attention.h); anything else: the model's attention over the entries.
  at::Tensor attend(int64_t layer, const at::Tensor& q, const at::Tensor& q_positions,
                    const KvEntries& entries, double scale, int64_t window) const override;
  void end_step() override;
  void set_identical_rows(int64_t rows, const std::shared_ptr<SharedVotes>& votes) override {
    identical_rows_ = rows;
    shared_votes_ = votes;
  }
  int64_t live_bytes() const override;
  std::unique_ptr<KvCache> clone() const override;

  // Static decode (see KvCache): steps append into the fixed buffers and return every slot (empty
  // ones masked by position -1); eviction waits for end_static_step, which runs it exactly when
  // an eager step would have (a host-side count of each layer's longest head and of each
  // sequence's total says when, without reading the device). Not for random (it hashes on the
  // host) or threshold eviction (data-dependent every step).
  bool begin_static_decode() override;
  bool end_static_step() override;
  void end_static_decode() override;

  // Continuous batching (serve/slot_batch.h): a cache of `rows` fixed rows in static decode that
  // requests move into once their own cache (one row, the same policy, budget and learned
  // modules) has read their prompt, so every decode step of the batch has the same shapes and
  // buffers. Between steps only.
  // open_rows: allocates the rows empty and enters static decode; false where this policy cannot
  // decode statically (random, threshold eviction), leaving the cache as it was.
  bool open_rows(int64_t rows, const at::Device& device, at::ScalarType dtype);
  // Row `row` becomes `source`'s only row: its entries, lengths, query statistics, next position
  // and peak. True when buffers were reallocated (a captured step must be captured again).
  bool load_row(int64_t row, const BudgetedKvCache& source);
  // Row `row` holds nothing; its steps until the next load are padding (position -1).
  void clear_row(int64_t row);
  // Bytes of the key and value buffers as allocated (every slot of every row, live or not).
  int64_t allocated_bytes() const;

  // Cuts back to the budget before the prompt's last token is read: per-head policies in each
  // layer once that token's entry is in (and the one-time policies have voted with it), so every
  // head holds budget + 1 entries, the token's own included; dbtrimkv globally before the step,
  // to L Hk budget (the step then adds L Hk). Decoded tokens then read at most budget + buffer + 1.
  void begin_generating_step() override;
  AttendedEntries attended_entries() const override;

  // --question-mode keep: the one-time policies vote with the context's last queries, every head
  // (dbtrimkv: the global pool) is cut back to the budget, and nothing is evicted afterwards: the
  // question and the generated tokens stay on top of the compressed context.
  void compress_context() override;
  bool frozen() const { return frozen_; }

  void end_prefill() override { protect_.clear(); }
  // Under tensor parallelism each rank's cache holds its slice of the KV heads: per-head policies
  // need nothing more, dbtrimkv ranks its pool over the group (identical survivors to one process:
  // the gathered scores are ordered as one process orders them), adakv and learned scorers are
  // refused.
  void bind_tensor_parallel(Collectives* group) override;
  void protect_from(const std::vector<int64_t>& positions) override { protect_ = positions; }

  // Measured before each eviction, and now.
  int64_t peak_bytes() const override { return std::max(peak_bytes_, live_bytes()); }
  // With buffer 0, what the cache holds after every step.
  int64_t budget_bytes() const override;
  std::vector<RowBytes> row_bytes() const override;
  // Live entries per (sequence, KV head) of `layer`: (B, Hk) int64.
  at::Tensor lengths(int64_t layer) const { return storage_.layer(layer).length; }
  // Positions of the live entries of (layer, b, head), in insertion order.
  std::vector<int64_t> live_positions(int64_t layer, int64_t b, int64_t head) const {
    return storage_.live_positions(layer, b, head);
  }
  // The policy's score of every slot (empty slots -inf): (B, Hk, S). Exposed for tests.
  at::Tensor scores(int64_t layer) const;

 private:
  void bind_rows(int64_t batch, const at::Device& device);
  // What the planner cuts and ranks.
  EvictionScope scope();
  // The eager end of a step: drop padding, record the peak, evict what the policy says.
  void evict_now();

  ModelConfig model_;  // this rank's shapes (a tensor-parallel slice of the KV heads)
  PolicySpec spec_;
  int64_t chunk_;
  LearnedModules learned_;
  Collectives* tp_ = nullptr;  // the tensor-parallel group, bound by the model
  PolicyRows rows_;
  CacheStorage storage_;
  QueryState queries_;
  std::shared_ptr<const EvictionPlanner> planner_;
  StaticDecodeCounts static_counts_;
  std::vector<at::Tensor> step_stat_;  // per layer this step's per-token statistic (B, Hk, T)
  std::vector<int64_t> protect_;       // per sequence (or one for all) the first protected position
  // Per sequence, the next token's position (last position seen + 1): rows of a padded batch
  // differ. (B,) int64, undefined until the first step.
  at::Tensor seen_;
  at::Tensor step_positions_;  // the last append's positions (B, T)
  int64_t peak_bytes_ = 0;
  std::vector<int64_t> row_peaks_;  // per sequence, measured before each eviction
  bool static_ = false;
  bool frozen_ = false;      // compress_context ran: no policy eviction from then on
  bool final_step_ = false;  // the running step's last token generates (begin_generating_step)
  bool generating_ = false;  // steps record what their queries read (until a new prompt chunk)
  int64_t static_step_count_ = 0;  // static steps since the last eviction
  int64_t identical_rows_ = 1;     // this step's runs of identical rows (set_identical_rows)
  std::shared_ptr<SharedVotes> shared_votes_;  // this step's votes shared with other caches
  // (B,) int64 on the device: per sequence the most entries one generating query read in one
  // head, and in all layers and heads.
  at::Tensor attended_max_, attended_total_max_;
};

}  // namespace retain
