#include "eval/cache/cache_storage.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/cache_append_triton.h"
#include "kernels/cache_cpu.h"
#include "kernels/decode_attention.h"

namespace retain {

bool CacheStorage::all_allocated() const {
  return std::all_of(layers_.begin(), layers_.end(),
                     [](const CacheLayer& l) { return l.allocated(); });
}

namespace {

// The append in one launch on a GPU when the fused append is chosen (RETAIN_CACHE_APPEND=fused)
// and the kernel takes these tensors (kernels/cache_append_triton.h); false leaves it to ATen's
// scatters.
bool append_fused(CacheLayer& l, const at::Tensor& keys, const at::Tensor& values,
                  const at::Tensor& positions, const at::Tensor& stat) {
  if (!keys.is_cuda() || cache_append_choice() != CacheAppend::fused) return false;
  const CacheAppendTensors t{l.keys, l.values, l.positions, l.stat, l.length,
                             keys,   values,   positions,   stat};
  if (std::string why = cache_append_triton_unsupported(t); !why.empty()) {
    log_triton_fallback("cache append", why, "ATen's scatters");
    return false;
  }
  cache_append_triton(t);
  return true;
}

}  // namespace

int64_t CacheStorage::append(int64_t layer, const at::Tensor& keys, const at::Tensor& values,
                             const at::Tensor& positions, const at::Tensor& stat,
                             bool fixed_shape) {
  CacheLayer& l = this->layer(layer);
  const int64_t b = keys.size(0), hk = keys.size(1), n = keys.size(2), d = keys.size(3);
  if (!l.allocated()) allocate(l, b, hk, d, keys.options());
  // Every head gains n entries, so the longest head after the append is known on the host.
  const int64_t longest = fixed_shape ? l.capacity() : l.longest + n;
  if (!fixed_shape && longest > l.capacity()) grow(layer, std::max(longest, 2 * l.capacity()));
  if (!append_fused(l, keys, values, positions, stat)) {
    write_at_lengths(l.keys, l.length, keys);
    write_at_lengths(l.values, l.length, values);
    write_at_lengths(l.positions, l.length, positions.unsqueeze(1).expand({b, hk, n}));
    write_at_lengths(l.stat, l.length, stat.to(at::kFloat));
    l.length += n;
  }
  if (!fixed_shape) l.longest = longest;
  return longest;
}

void CacheStorage::allocate(CacheLayer& l, int64_t batch, int64_t kv_heads, int64_t head_dim,
                            const at::TensorOptions& options) const {
  l.keys = at::zeros({batch, kv_heads, capacity_, head_dim}, options);
  l.values = at::zeros_like(l.keys);
  l.positions = at::full({batch, kv_heads, capacity_}, -1, options.dtype(at::kLong));
  l.stat = at::zeros({batch, kv_heads, capacity_}, options.dtype(at::kFloat));
  l.length = at::zeros({batch, kv_heads}, options.dtype(at::kLong));
  l.longest = 0;
}

void CacheStorage::allocate_rows(int64_t batch, int64_t kv_heads, int64_t head_dim,
                                 const at::TensorOptions& options) {
  RETAIN_CHECK(std::none_of(layers_.begin(), layers_.end(),
                            [](const CacheLayer& l) { return l.allocated(); }),
               "CacheStorage: rows are allocated once, before any step");
  for (auto& l : layers_) allocate(l, batch, kv_heads, head_dim, options);
}

bool CacheStorage::load_row(int64_t row, const CacheStorage& source, int64_t source_row) {
  RETAIN_CHECK(source.num_layers() == num_layers(), "CacheStorage: a cache of ",
               source.num_layers(), " layers cannot load into one of ", num_layers());
  bool grew = false;
  for (int64_t li = 0; li < num_layers(); ++li) {
    CacheLayer& l = layer(li);
    const CacheLayer& s = source.layer(li);
    RETAIN_CHECK(l.allocated() && s.allocated(), "CacheStorage: load_row needs both caches ",
                 "allocated (layer ", li, ")");
    RETAIN_CHECK(s.keys.size(1) == l.keys.size(1) && s.keys.size(3) == l.keys.size(3) &&
                     s.keys.scalar_type() == l.keys.scalar_type() &&
                     s.keys.device() == l.keys.device(),
                 "CacheStorage: layer ", li, " holds ", s.keys.sizes(), " ", s.keys.scalar_type(),
                 " on ", s.keys.device(), ", the rows ", l.keys.sizes(), " ", l.keys.scalar_type(),
                 " on ", l.keys.device());
    // `longest` is exact after every eager step (each adds to every head, compaction re-reads).
    const int64_t n = s.longest;
    if (n > l.capacity()) {
      grow(li, n);
      grew = true;
    }
    auto put = [&](at::Tensor& to, const at::Tensor& from, double empty) {
      auto dst = to.narrow(0, row, 1);
      dst.narrow(2, 0, n).copy_(from.narrow(0, source_row, 1).narrow(2, 0, n));
      dst.narrow(2, n, to.size(2) - n).fill_(empty);
    };
    put(l.keys, s.keys, 0);
    put(l.values, s.values, 0);
    put(l.positions, s.positions, -1);
    put(l.stat, s.stat, 0);
    l.length.narrow(0, row, 1).copy_(s.length.narrow(0, source_row, 1));
    l.longest = std::max(l.longest, n);
  }
  return grew;
}

void CacheStorage::clear_row(int64_t row) {
  for (auto& l : layers_) {
    if (!l.allocated()) continue;
    l.keys.narrow(0, row, 1).zero_();
    l.values.narrow(0, row, 1).zero_();
    l.positions.narrow(0, row, 1).fill_(-1);
    l.stat.narrow(0, row, 1).zero_();
    l.length.narrow(0, row, 1).zero_();
  }
}

void CacheStorage::grow(int64_t layer, int64_t capacity) {
  // dbtrimkv lets one head hold more than budget + buffer while others hold less (the global
  // total stays bounded), so a layer's buffers grow to its longest head when needed.
  CacheLayer& l = this->layer(layer);
  auto widen = [&](const at::Tensor& t, int64_t fill) {
    auto sizes = t.sizes().vec();
    sizes[2] = capacity;
    auto out = at::full(sizes, fill, t.options());
    out.narrow(2, 0, t.size(2)).copy_(t);
    return out;
  };
  l.keys = widen(l.keys, 0);
  l.values = widen(l.values, 0);
  l.positions = widen(l.positions, -1);
  l.stat = widen(l.stat, 0);
}

void CacheStorage::compact(int64_t layer, const at::Tensor& keep) {
  // Kept entries first, in their insertion order; the rest after them, emptied (position -1).
  CacheLayer& l = this->layer(layer);
  const int64_t s = keep.size(2);
  // In place: a captured decode step reads the lengths through this tensor.
  l.length.copy_(compact_cache(l.keys.narrow(2, 0, s), l.values.narrow(2, 0, s),
                               l.positions.narrow(2, 0, s), l.stat.narrow(2, 0, s), keep));
  l.longest = l.length.max().item<int64_t>();
}

void CacheStorage::drop_padding() {
  for (int64_t li = 0; li < num_layers(); ++li) {
    const CacheLayer& l = layer(li);
    if (!l.allocated()) continue;
    const int64_t s = l.length.max().item<int64_t>();
    auto slot = at::arange(s, l.length.options()).view({1, 1, s});
    auto live = l.positions.narrow(2, 0, s) >= 0;
    auto counted = slot < l.length.unsqueeze(-1);
    if (counted.logical_and(live.logical_not()).any().item<bool>())
      compact(li, live.logical_and(counted));
  }
}

void CacheStorage::refresh_longest() {
  for (auto& l : layers_)
    if (l.allocated()) l.longest = l.length.max().item<int64_t>();
}

std::vector<int64_t> CacheStorage::row_entries() const {
  at::Tensor total;
  for (const auto& l : layers_)
    if (l.allocated()) total = total.defined() ? total + l.length.sum(1) : l.length.sum(1);
  if (!total.defined()) return {};
  auto host = total.to(at::kCPU).contiguous();
  return {host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel()};
}

int64_t CacheStorage::bytes_per_entry() const {
  for (const auto& l : layers_)  // a key and a value
    if (l.allocated()) return 2 * l.keys.size(3) * static_cast<int64_t>(l.keys.element_size());
  return 0;
}

std::vector<int64_t> CacheStorage::live_positions(int64_t layer, int64_t b, int64_t head) const {
  const CacheLayer& l = this->layer(layer);
  const int64_t n = l.length[b][head].item<int64_t>();
  auto pos = l.positions[b][head].narrow(0, 0, n).to(at::kCPU).contiguous();
  return {pos.data_ptr<int64_t>(), pos.data_ptr<int64_t>() + n};
}

void CacheStorage::deepen() {
  for (auto& l : layers_) {
    if (!l.allocated()) continue;
    l.keys = l.keys.clone();
    l.values = l.values.clone();
    l.positions = l.positions.clone();
    l.stat = l.stat.clone();
    l.length = l.length.clone();
  }
}

}  // namespace retain
