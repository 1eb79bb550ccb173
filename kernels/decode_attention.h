// Attention and compaction over the budgeted KV cache's per-(sequence, KV head) variable-length
// entries (eval/budgeted_cache.h): keys/values (B, Hk, S, D) buffers, positions (B, Hk, S)
// (-1 = empty), and a live length per head (B, Hk); the live entries of a head are its first
// `length` slots.
//
// decode_attention / compact_cache run the CUDA kernels (decode_attention.cu) on GPU tensors the
// kernels support; compact_cache runs a CPU loop (cache_cpu.h) on CPU tensors with dense rows;
// the ATen references otherwise. The references stay callable for the tests.
//
// Shapes: B sequences, H query heads, Hk KV heads, G = H / Hk, S slots, D head dim.
#pragma once

#include <ATen/ATen.h>

namespace retain {

// One new query per sequence: q (B, H, 1, D) at q_positions (B, 1). Query head h attends over
// the slots s < lengths[b][h / G] of KV head h / G whose position p satisfies 0 <= p <= q_pos,
// with scores q.k * scale and an fp32 softmax; a head that sees nothing gets zeros.
// Returns (B, H, 1, D) in q's dtype.
at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                            const at::Tensor& positions, const at::Tensor& lengths,
                            const at::Tensor& q_positions, double scale);
at::Tensor decode_attention_reference(const at::Tensor& q, const at::Tensor& keys,
                                      const at::Tensor& values, const at::Tensor& positions,
                                      const at::Tensor& lengths, const at::Tensor& q_positions,
                                      double scale);
bool decode_attention_uses_kernel(const at::Tensor& q, const at::Tensor& keys,
                                  const at::Tensor& values, const at::Tensor& positions);

// Keeps the slots where keep (B, Hk, S) is true, packed to the front in their order; the dropped
// entries follow them in theirs, with position -1. keys, values (B, Hk, S, D), positions
// (B, Hk, S) int64 and stat (B, Hk, S) fp32 are views of the cache, modified in place. Returns
// the new lengths keep.sum(-1), (B, Hk) int64.
at::Tensor compact_cache(const at::Tensor& keys, const at::Tensor& values,
                         const at::Tensor& positions, const at::Tensor& stat,
                         const at::Tensor& keep);
at::Tensor compact_cache_reference(const at::Tensor& keys, const at::Tensor& values,
                                   const at::Tensor& positions, const at::Tensor& stat,
                                   const at::Tensor& keep);
bool compact_cache_uses_kernel(const at::Tensor& keys, const at::Tensor& values,
                               const at::Tensor& positions, const at::Tensor& stat);

}  // namespace retain
