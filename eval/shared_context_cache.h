// One read of a context for several cache rows: the budgets of a sweep share the prefill.
//
// Under --question-mode keep with the context read in one step (kvpress's semantics), what a
// budgeted cache holds and the votes its policy casts during that step do not depend on the
// budget: eviction first acts at the step's end. So the sweep reads each context once and lets
// `copies` rows of one inner cache (one row per budget, each with its own) receive it: for the
// first step every input row's hidden states, queries, keys and values are repeated to its
// `copies` consecutive inner rows, the model attends over the first of them (they are equal), and
// the step's end evicts each row to its own budget. From then on the wrapper is the inner cache:
// the question and the answer run with one input row per inner row. Each row then predicts what
// it predicts alone (tests/benchmarks_test.cpp checks it for every policy).
#pragma once

#include <memory>

#include "model/kv_cache.h"

namespace retain {

class SharedContextCache : public KvCache {
 public:
  SharedContextCache(std::unique_ptr<KvCache> inner, int64_t copies);

  void observe(const LayerTensors& tensors) override;
  KvEntries append(int64_t layer, const at::Tensor& keys, const at::Tensor& values,
                   const at::Tensor& positions) override;
  at::Tensor attend(int64_t layer, const at::Tensor& q, const at::Tensor& q_positions,
                    const KvEntries& entries, double scale, int64_t window) const override;
  // Ends the shared step: the rows part here (each evicts to its own budget).
  void end_step() override;

  void begin_generating_step() override { inner_->begin_generating_step(); }
  AttendedEntries attended_entries() const override { return inner_->attended_entries(); }
  void end_prefill() override { inner_->end_prefill(); }
  void bind_tensor_parallel(Collectives* group) override { inner_->bind_tensor_parallel(group); }
  bool begin_static_decode() override;
  bool end_static_step() override { return inner_->end_static_step(); }
  void end_static_decode() override { inner_->end_static_decode(); }
  int64_t live_bytes() const override { return inner_->live_bytes(); }
  int64_t peak_bytes() const override { return inner_->peak_bytes(); }
  int64_t budget_bytes() const override { return inner_->budget_bytes(); }
  std::vector<RowBytes> row_bytes() const override { return inner_->row_bytes(); }
  void protect_from(const std::vector<int64_t>& positions) override;
  void compress_context() override;
  std::unique_ptr<KvCache> clone() const override;

  bool sharing() const { return sharing_; }

 private:
  // Each input row's `copies_` inner rows, consecutive: (B, ...) -> (B copies, ...).
  at::Tensor repeated(const at::Tensor& t) const;

  std::unique_ptr<KvCache> inner_;
  int64_t copies_;
  bool sharing_ = true;  // until the first step ends
};

}  // namespace retain
