// One read of a context for several cache rows: the cells of a sweep share the prefill.
//
// Under --question-mode keep with the context read in one step (kvpress's semantics), and in
// evict mode for the first chunk of the prompt, the hidden states of that step do not depend on
// the policy or the budget (every layer attends over all it holds: eviction first acts at the
// step's end), and neither do the votes a policy casts during it on its budget. So the sweep
// reads that step once and lets several caches (parts, one per policy), each with `copies` rows
// per input row (one per budget), receive it: for the first step every input row's hidden states,
// queries, keys and values are repeated to its `copies` consecutive rows of every part, the model
// attends over the first of them (they are equal), and the step's end evicts each row to its own
// policy and budget. Each row then predicts what it predicts alone (tests/benchmarks_test.cpp
// checks it for every policy, in both question modes).
//
// After that step a single part is the cache itself: the wrapper forwards to it. With several
// parts every later step's rows are split by part, in order (part 0's rows, then part 1's, ...):
// each part observes, appends and attends over its own rows, so all the cells decode as one batch
// (one forward a token for every cell, where a part at a time would read the weights once a cell).
#pragma once

#include <memory>
#include <vector>

#include "model/kv_cache.h"

namespace retain {

class SharedContextCache : public KvCache {
 public:
  struct Part {
    std::unique_ptr<KvCache> cache;
    int64_t copies = 1;  // rows of `cache` per input row
  };
  explicit SharedContextCache(std::vector<Part> parts);
  SharedContextCache(std::unique_ptr<KvCache> inner, int64_t copies);

  void observe(const LayerTensors& tensors) override;
  KvEntries append(int64_t layer, const at::Tensor& keys, const at::Tensor& values,
                   const at::Tensor& positions) override;
  at::Tensor attend(int64_t layer, const at::Tensor& q, const at::Tensor& q_positions,
                    const KvEntries& entries, double scale, int64_t window) const override;
  // Ends the shared step: the rows part here (each evicts to its own policy and budget).
  void end_step() override;

  void begin_generating_step() override;
  // Each part's rows, in order.
  AttendedEntries attended_entries() const override;
  void end_prefill() override;
  // A part whose rows have all finished sits the step out (its own batch would have ended).
  void set_running_rows(const std::vector<bool>& running) override;
  void bind_tensor_parallel(Collectives* group) override;
  // Static decode (CUDA graphs) when every part supports it; otherwise every part stays eager.
  bool begin_static_decode() override;
  bool end_static_step() override;
  void end_static_decode() override;
  void expect_decode_steps(int64_t steps) override;
  // The bytes of every part; row_bytes lists the parts' rows in order.
  int64_t live_bytes() const override;
  int64_t peak_bytes() const override;
  int64_t budget_bytes() const override;
  std::vector<RowBytes> row_bytes() const override;
  // `positions` has one entry per row of every part, in order (or one for all).
  void protect_from(const std::vector<int64_t>& positions) override;
  void compress_context() override;
  std::unique_ptr<KvCache> clone() const override;

  bool sharing() const { return sharing_; }
  // How many times a budget group of a part took the attention votes another group had cast
  // (up to layers times groups, less one group a layer that cast them).
  int64_t votes_reused() const { return votes_reused_; }

 private:
  // Each input row's `copies` rows, consecutive: (B, ...) -> (B copies, ...).
  static at::Tensor repeated(const at::Tensor& t, int64_t copies);
  // After the shared step, the one part the wrapper stands for.
  KvCache& only() const;
  bool routing() const { return !sharing_ && parts_.size() > 1; }
  // Rows [begin, begin + rows) of t: part i's rows of a step after the shared one.
  at::Tensor part_rows(const at::Tensor& t, size_t part) const;
  // Every part's rows: each holds `copies` rows per row of the shared step.
  int64_t sum_rows() const;
  int64_t sum_over(int64_t (KvCache::*bytes)() const) const;

  std::vector<Part> parts_;
  bool sharing_ = true;  // until the first step ends
  // The shared step's attention votes, cast once for the parts with the same votes (h2o and
  // importance cast the same mass).
  std::shared_ptr<SharedVotes> shared_votes_;
  int64_t votes_reused_ = 0;
  int64_t input_rows_ = 0;  // rows of the shared step (each part holds copies of each)
  // While routing: whether each part has a running row this step (empty: all of them).
  std::vector<bool> part_running_;
  bool running(size_t part) const { return part_running_.empty() || part_running_[part]; }
  // While routing: what each part's append returned this layer, for its attend.
  std::vector<KvEntries> appended_;
  int64_t appended_layer_ = -1;
};

}  // namespace retain
