#include "serve/row_stack_cache.h"

#include <algorithm>

#include "core/error.h"

namespace retain {

namespace {

at::Tensor row_of(const at::Tensor& t, int64_t r) { return t.defined() ? t.narrow(0, r, 1) : t; }

}  // namespace

RowStackCache::RowStackCache(std::vector<KvCache*> rows) : rows_(std::move(rows)) {
  RETAIN_CHECK(!rows_.empty(), "RowStackCache: no rows");
}

void RowStackCache::observe(const LayerTensors& t) {
  RETAIN_CHECK(t.q.size(0) == static_cast<int64_t>(rows_.size()), "RowStackCache: a batch of ",
               t.q.size(0), " for ", rows_.size(), " rows");
  for (int64_t r = 0; r < static_cast<int64_t>(rows_.size()); ++r) {
    const at::Tensor hidden = row_of(t.hidden, r), q = row_of(t.q, r), k = row_of(t.k, r),
                     v = row_of(t.v, r), positions = row_of(t.positions, r),
                     q_before_rope = row_of(t.q_before_rope, r);
    rows_[r]->observe({t.layer, hidden, q, k, v, positions, q_before_rope, t.kv_head_offset});
  }
}

KvEntries RowStackCache::append(int64_t layer, const at::Tensor& keys, const at::Tensor& values,
                                const at::Tensor& positions) {
  const auto b = static_cast<int64_t>(rows_.size());
  RETAIN_CHECK(keys.size(0) == b, "RowStackCache: a batch of ", keys.size(0), " for ", b, " rows");
  std::vector<KvEntries> parts;
  int64_t longest = 0;
  for (int64_t r = 0; r < b; ++r) {
    parts.push_back(
        rows_[r]->append(layer, row_of(keys, r), row_of(values, r), row_of(positions, r)));
    longest = std::max(longest, parts.back().keys.size(2));
  }
  // Each row's entries at the front of its row of the stack; the rest empty (position -1). A
  // cache shares its positions across heads (1, 1, S) or keeps them per head (1, Hk, S).
  const int64_t hk = keys.size(1), d = keys.size(3);
  auto k = at::zeros({b, hk, longest, d}, keys.options());
  auto v = at::zeros_like(k);
  auto p = at::full({b, hk, longest}, -1, positions.options());
  for (int64_t r = 0; r < b; ++r) {
    const int64_t n = parts[r].keys.size(2);
    k[r].narrow(1, 0, n).copy_(parts[r].keys[0]);
    v[r].narrow(1, 0, n).copy_(parts[r].values[0]);
    p[r].narrow(1, 0, n).copy_(parts[r].positions[0].expand({hk, n}));
  }
  return {k, v, p};
}

void RowStackCache::end_step() {
  for (KvCache* row : rows_) row->end_step();
}

int64_t RowStackCache::live_bytes() const {
  int64_t bytes = 0;
  for (const KvCache* row : rows_) bytes += row->live_bytes();
  return bytes;
}

int64_t RowStackCache::peak_bytes() const {
  int64_t bytes = 0;
  for (const KvCache* row : rows_) bytes += row->peak_bytes();
  return bytes;
}

int64_t RowStackCache::budget_bytes() const {
  int64_t bytes = 0;
  for (const KvCache* row : rows_) bytes += row->budget_bytes();
  return bytes;
}

std::vector<KvCache::RowBytes> RowStackCache::row_bytes() const {
  std::vector<RowBytes> out;
  for (const KvCache* row : rows_)
    for (const RowBytes& bytes : row->row_bytes()) out.push_back(bytes);
  return out;
}

std::unique_ptr<KvCache> RowStackCache::clone() const {
  RETAIN_CHECK(false, "RowStackCache: a continuous batch is not copied");
  return nullptr;
}

}  // namespace retain
