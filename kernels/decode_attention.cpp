#include "kernels/decode_attention.h"

#include <cstdint>

#include "core/error.h"
#include "kernels/cache_cpu.h"
#include "kernels/cuda_launchers.h"
#include "kernels/device_info.h"

namespace retain {

namespace {

bool kernel_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
}

bool aligned16(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

// Rows of D contiguous elements, D contiguous rows per head.
bool rows_contiguous(const at::Tensor& t) {
  return t.dim() == 4 && t.stride(3) == 1 && t.stride(2) == t.size(3) && aligned16(t);
}

void check_cache(const char* what, const at::Tensor& keys, const at::Tensor& values,
                 const at::Tensor& positions) {
  RETAIN_CHECK(keys.dim() == 4 && values.sizes() == keys.sizes() &&
                   positions.sizes() == at::IntArrayRef({keys.size(0), keys.size(1), keys.size(2)}),
               what, ": expected keys, values (B, Hk, S, D) and positions (B, Hk, S), found ",
               keys.sizes(), ", ", values.sizes(), ", ", positions.sizes());
}

}  // namespace

bool decode_attention_uses_kernel(const at::Tensor& q, const at::Tensor& keys,
                                  const at::Tensor& values, const at::Tensor& positions) {
  return q.is_cuda() && cuda_sources_compiled() && kernel_dtype(q.scalar_type()) &&
         keys.scalar_type() == q.scalar_type() && values.scalar_type() == q.scalar_type() &&
         (q.size(-1) == 64 || q.size(-1) == 128) && q.size(1) % keys.size(1) == 0 &&
         q.size(1) / keys.size(1) <= 16 && rows_contiguous(keys) && rows_contiguous(values) &&
         positions.scalar_type() == at::kLong && positions.stride(2) == 1;
}

at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                            const at::Tensor& positions, const at::Tensor& lengths,
                            const at::Tensor& q_positions, double scale) {
  check_cache("decode_attention", keys, values, positions);
  RETAIN_CHECK(q.dim() == 4 && q.size(2) == 1 && q.size(0) == keys.size(0) &&
                   q.size(3) == keys.size(3) && q.size(1) % keys.size(1) == 0,
               "decode_attention: expected q (B, H, 1, D) over keys ", keys.sizes(), ", found ",
               q.sizes());
  if (decode_attention_uses_kernel(q, keys, values, positions))
    return decode_attention_cuda(q, keys, values, positions, lengths, q_positions, scale);
  return decode_attention_reference(q, keys, values, positions, lengths, q_positions, scale);
}

at::Tensor decode_attention_reference(const at::Tensor& q, const at::Tensor& keys,
                                      const at::Tensor& values, const at::Tensor& positions,
                                      const at::Tensor& lengths, const at::Tensor& q_positions,
                                      double scale) {
  const int64_t b = q.size(0), h = q.size(1), d = q.size(3);
  const int64_t hk = keys.size(1), s = keys.size(2), g = h / hk;
  // fp32 for fp32/bf16/fp16 inputs, fp64 for fp64.
  const auto type = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  auto qf = q.to(type).reshape({b, hk, g, d});
  auto scores = at::matmul(qf, keys.to(type).transpose(-1, -2)) * scale;  // (B, Hk, G, S)
  auto slot = at::arange(s, positions.options()).view({1, 1, s});
  auto q_pos = q_positions.to(positions.device(), at::kLong).reshape({b, 1, 1});
  auto visible = (slot < lengths.to(at::kLong).unsqueeze(-1))
                     .logical_and(positions >= 0)
                     .logical_and(positions <= q_pos)
                     .unsqueeze(2);  // (B, Hk, 1, S)
  auto probs = at::softmax(scores.masked_fill(visible.logical_not(), -INFINITY), -1)
                   .nan_to_num(0);  // a head that sees nothing: zeros
  return at::matmul(probs, values.to(type)).view({b, h, 1, d}).to(q.scalar_type());
}

bool compact_cache_uses_kernel(const at::Tensor& keys, const at::Tensor& values,
                               const at::Tensor& positions, const at::Tensor& stat) {
  return keys.is_cuda() && cuda_sources_compiled() && rows_contiguous(keys) &&
         rows_contiguous(values) && values.scalar_type() == keys.scalar_type() &&
         (keys.size(3) * keys.element_size()) % 16 == 0 && positions.scalar_type() == at::kLong &&
         positions.stride(2) == 1 && stat.scalar_type() == at::kFloat && stat.stride(2) == 1;
}

at::Tensor compact_cache(const at::Tensor& keys, const at::Tensor& values,
                         const at::Tensor& positions, const at::Tensor& stat,
                         const at::Tensor& keep) {
  check_cache("compact_cache", keys, values, positions);
  RETAIN_CHECK(stat.sizes() == positions.sizes() && keep.sizes() == positions.sizes(),
               "compact_cache: stat and keep must be (B, Hk, S) = ", positions.sizes(), ", found ",
               stat.sizes(), ", ", keep.sizes());
  if (compact_cache_uses_kernel(keys, values, positions, stat))
    return compact_cache_cuda(keys, values, positions, stat, keep);
  if (compact_cache_uses_cpu_loop(keys, values, positions, stat))
    return compact_cache_cpu(keys, values, positions, stat, keep);
  return compact_cache_reference(keys, values, positions, stat, keep);
}

at::Tensor compact_cache_reference(const at::Tensor& keys, const at::Tensor& values,
                                   const at::Tensor& positions, const at::Tensor& stat,
                                   const at::Tensor& keep) {
  const int64_t s = keep.size(2), d = keys.size(3);
  auto slot = at::arange(s, positions.options()).expand_as(keep);
  // Kept entries first, in their insertion order; the rest after them.
  auto order =
      at::argsort(at::where(keep, slot, slot + s), /*dim=*/int64_t{-1}, /*descending=*/false);
  auto gather4 = order.unsqueeze(-1).expand({order.size(0), order.size(1), s, d});
  keys.copy_(keys.gather(2, gather4));
  values.copy_(values.gather(2, gather4));
  stat.copy_(stat.gather(2, order));
  positions.copy_(positions.gather(2, order));
  auto length = keep.sum(-1);
  auto live = at::arange(s, positions.options()).view({1, 1, s}) < length.unsqueeze(-1);
  positions.masked_fill_(live.logical_not(), -1);
  return length;
}

}  // namespace retain
