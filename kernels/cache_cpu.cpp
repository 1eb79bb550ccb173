#include "kernels/cache_cpu.h"

#include <ATen/Parallel.h>

#include <cstring>
#include <vector>

#include "core/error.h"

namespace retain {

namespace {

// Elements in one slot of a (B, Hk, C, ...) tensor whose slots are dense rows (the trailing
// dimensions packed, one slot after the other); -1 when they are not.
int64_t dense_slot_elements(const at::Tensor& t) {
  int64_t elements = 1;
  for (int64_t d = t.dim() - 1; d >= 3; --d) {
    if (t.size(d) != 1 && t.stride(d) != elements) return -1;
    elements *= t.size(d);
  }
  return t.stride(2) == elements ? elements : -1;
}

// Rows of work per thread: enough bytes that a thread's start-up is small beside its copies.
int64_t grain_for(int64_t bytes_per_row) {
  return std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(bytes_per_row, 1));
}

}  // namespace

void write_at_lengths(const at::Tensor& dst, const at::Tensor& lengths, const at::Tensor& src) {
  RETAIN_CHECK(dst.dim() >= 3 && src.dim() == dst.dim() && src.size(0) == dst.size(0) &&
                   src.size(1) == dst.size(1) && src.sizes().slice(3) == dst.sizes().slice(3) &&
                   lengths.sizes() == dst.sizes().slice(0, 2),
               "write_at_lengths: expected dst (B, Hk, C, ...), src (B, Hk, n, ...) and lengths "
               "(B, Hk), found ",
               dst.sizes(), ", ", src.sizes(), ", ", lengths.sizes());
  RETAIN_CHECK(src.scalar_type() == dst.scalar_type(), "write_at_lengths: src is ",
               c10::toString(src.scalar_type()), ", dst ", c10::toString(dst.scalar_type()));
  const int64_t b = dst.size(0), hk = dst.size(1), n = src.size(2);
  if (n == 0 || b * hk == 0) return;
  const int64_t slot = dense_slot_elements(dst);
  if (!dst.is_cpu() || !src.is_cpu() || !lengths.is_cpu() || slot < 0) {
    // Off the CPU (or a strided dst): one scatter, which checks the slots' range itself.
    auto index =
        lengths.to(at::kLong).unsqueeze(-1) + at::arange(n, lengths.options().dtype(at::kLong));
    for (int64_t d = 3; d < dst.dim(); ++d) index = index.unsqueeze(-1);
    dst.scatter_(2, index.expand(src.sizes()), src);
    return;
  }
  auto from = src.contiguous();
  auto at_length = lengths.to(at::kLong).contiguous();
  const int64_t* length = at_length.data_ptr<int64_t>();
  for (int64_t r = 0; r < b * hk; ++r)
    RETAIN_CHECK(length[r] >= 0 && length[r] + n <= dst.size(2), "write_at_lengths: head ", r,
                 " holds ", length[r], " entries; ", n, " more do not fit its ", dst.size(2),
                 " slots");
  const int64_t element = dst.element_size();
  const size_t bytes = static_cast<size_t>(n * slot * element);
  char* out = static_cast<char*>(dst.data_ptr());
  const char* in = static_cast<const char*>(from.data_ptr());
  at::parallel_for(
      0, b * hk, grain_for(static_cast<int64_t>(bytes)), [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const int64_t bi = r / hk, h = r % hk;
          const int64_t at = bi * dst.stride(0) + h * dst.stride(1) + length[r] * dst.stride(2);
          std::memcpy(out + at * element, in + r * static_cast<int64_t>(bytes), bytes);
        }
      });
}

bool compact_cache_uses_cpu_loop(const at::Tensor& keys, const at::Tensor& values,
                                 const at::Tensor& positions, const at::Tensor& stat) {
  return keys.is_cpu() && values.is_cpu() && positions.is_cpu() && stat.is_cpu() &&
         keys.dim() == 4 && values.sizes() == keys.sizes() &&
         values.scalar_type() == keys.scalar_type() && dense_slot_elements(keys) == keys.size(3) &&
         dense_slot_elements(values) == values.size(3) && positions.scalar_type() == at::kLong &&
         positions.dim() == 3 && positions.stride(2) == 1 && stat.scalar_type() == at::kFloat &&
         stat.dim() == 3 && stat.stride(2) == 1;
}

at::Tensor compact_cache_cpu(const at::Tensor& keys, const at::Tensor& values,
                             const at::Tensor& positions, const at::Tensor& stat,
                             const at::Tensor& keep) {
  RETAIN_CHECK(compact_cache_uses_cpu_loop(keys, values, positions, stat),
               "compact_cache_cpu: expected CPU keys, values (B, Hk, S, D) with dense rows, int64 "
               "positions and fp32 stat (B, Hk, S) with unit slot stride");
  RETAIN_CHECK(
      keep.sizes() == positions.sizes() && stat.sizes() == positions.sizes() &&
          positions.sizes() == keys.sizes().slice(0, 3),
      "compact_cache_cpu: keep, positions and stat must be (B, Hk, S) = ", keys.sizes().slice(0, 3),
      ", found ", keep.sizes(), ", ", positions.sizes(), ", ", stat.sizes());
  const int64_t b = keys.size(0), hk = keys.size(1), s = keys.size(2), d = keys.size(3);
  auto kept_mask = keep.to(at::kBool).contiguous();
  auto lengths = at::empty({b, hk}, positions.options());
  const bool* kept = kept_mask.data_ptr<bool>();
  int64_t* length = lengths.data_ptr<int64_t>();
  const int64_t key_bytes = d * keys.element_size();
  at::parallel_for(0, b * hk, grain_for(s * 2 * key_bytes), [&](int64_t begin, int64_t end) {
    std::vector<int64_t> order;  // the slots from the first dropped one, in their new order
    std::vector<char> scratch;
    for (int64_t r = begin; r < end; ++r) {
      const int64_t bi = r / hk, h = r % hk;
      const bool* k = kept + r * s;
      int64_t first = 0;  // slots before the first dropped entry stay where they are
      while (first < s && k[first]) ++first;
      order.clear();
      for (int64_t j = first; j < s; ++j)
        if (k[j]) order.push_back(j);
      length[r] = first + static_cast<int64_t>(order.size());
      if (first == s) continue;
      for (int64_t j = first; j < s; ++j)
        if (!k[j]) order.push_back(j);
      // Slots [first, s) of one head are one block of `bytes`-sized rows: gather them in their new
      // order into scratch, then copy the block back.
      auto permute = [&](const at::Tensor& t, int64_t bytes) {
        char* block = static_cast<char*>(t.data_ptr()) +
                      (bi * t.stride(0) + h * t.stride(1)) * t.element_size() + first * bytes;
        scratch.resize(static_cast<size_t>((s - first) * bytes));
        for (size_t i = 0; i < order.size(); ++i)
          std::memcpy(scratch.data() + i * bytes, block + (order[i] - first) * bytes, bytes);
        std::memcpy(block, scratch.data(), scratch.size());
      };
      permute(keys, key_bytes);
      permute(values, key_bytes);
      permute(positions, sizeof(int64_t));
      permute(stat, sizeof(float));
      int64_t* pos =
          positions.data_ptr<int64_t>() + bi * positions.stride(0) + h * positions.stride(1);
      std::fill(pos + length[r], pos + s, int64_t{-1});
    }
  });
  return lengths;
}

}  // namespace retain
