// One read of a context for several cache rows: the cells of a sweep share the prefill.
//
// Under --question-mode keep with the context read in one step (kvpress's semantics), the hidden
// states of that step do not depend on the policy or the budget (every layer attends over the
// whole context: eviction first acts at the step's end), and neither do the votes a policy casts
// during it on its budget. So the sweep reads each context once and lets several caches (parts,
// one per policy), each with `copies` rows per input row (one per budget), receive it: for the
// first step every input row's hidden states, queries, keys and values are repeated to its
// `copies` consecutive rows of every part, the model attends over the first of them (they are
// equal), and the step's end evicts each row to its own policy and budget. Each row then predicts
// what it predicts alone (tests/benchmarks_test.cpp checks it for every policy).
//
// After that step a single part is the cache itself: the wrapper forwards to it. Several parts
// are taken out (take_parts) and each decodes its own rows.
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

  void begin_generating_step() override { only().begin_generating_step(); }
  AttendedEntries attended_entries() const override { return only().attended_entries(); }
  void end_prefill() override { only().end_prefill(); }
  void bind_tensor_parallel(Collectives* group) override;
  bool begin_static_decode() override;
  bool end_static_step() override { return only().end_static_step(); }
  void end_static_decode() override { only().end_static_decode(); }
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
  // Once the shared step has ended: the parts' caches, each to decode its own rows.
  std::vector<std::unique_ptr<KvCache>> take_parts();

 private:
  // Each input row's `copies` rows, consecutive: (B, ...) -> (B copies, ...).
  static at::Tensor repeated(const at::Tensor& t, int64_t copies);
  // After the shared step, the one part the wrapper stands for (several must be taken out).
  KvCache& only() const;

  std::vector<Part> parts_;
  bool sharing_ = true;  // until the first step ends
};

}  // namespace retain
