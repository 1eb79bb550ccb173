// The cache of a continuous batch: row r of each decode step is request r's own cache (a batch of
// one, with its own policy and budget). The requests' entries are stacked for the step, each
// padded to the longest with position -1 (masked), so a request reads exactly the entries its
// cache returns, as it would decoding alone, and requests join and leave between steps without
// touching the others' caches.
//
// Decode steps only (one token per row); prefill runs on the request's own cache. Eager: the
// stacked shapes change with the rows, so there is no static decode here.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "model/kv_cache.h"

namespace retain {

class RowStackCache : public KvCache {
 public:
  // One cache per row of the step's batch, in row order (they must outlive this cache).
  explicit RowStackCache(std::vector<KvCache*> rows);

  void observe(const LayerTensors& tensors) override;
  KvEntries append(int64_t layer, const at::Tensor& keys, const at::Tensor& values,
                   const at::Tensor& positions) override;
  void end_step() override;
  int64_t live_bytes() const override;
  int64_t peak_bytes() const override;
  int64_t budget_bytes() const override;
  std::vector<RowBytes> row_bytes() const override;
  // A continuous batch is not copied: its rows belong to their requests.
  std::unique_ptr<KvCache> clone() const override;

 private:
  std::vector<KvCache*> rows_;
};

}  // namespace retain
