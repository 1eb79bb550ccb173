// CPU loops for the budgeted KV cache's bookkeeping (eval/budgeted_cache.h): moving whole rows
// of a head's entries with memcpy where the ATen ops (scatter, argsort + gather) index every
// element. On a tiny model's CPU sweep those ops were ~10% of the time; compact_cache
// (decode_attention.h) dispatches here for CPU tensors, and the tests hold both loops to the
// ATen results exactly.
//
// Shapes: B sequences, Hk KV heads, C slots, D head dim.
#pragma once

#include <ATen/ATen.h>

namespace retain {

// dst[b, h, lengths[b, h] + i] = src[b, h, i] for i < n: src (B, Hk, n, ...) lands after each
// head's live entries in dst (B, Hk, C, ...), the trailing dimensions equal. lengths (B, Hk)
// int64 must leave room (lengths + n <= C). Any device and layout (a scatter off the CPU fast
// path); dst is modified in place.
void write_at_lengths(const at::Tensor& dst, const at::Tensor& lengths, const at::Tensor& src);

// compact_cache's contract (decode_attention.h), by row moves on the CPU; false from the `uses`
// check means the tensors are not CPU tensors with contiguous rows.
bool compact_cache_uses_cpu_loop(const at::Tensor& keys, const at::Tensor& values,
                                 const at::Tensor& positions, const at::Tensor& stat);
at::Tensor compact_cache_cpu(const at::Tensor& keys, const at::Tensor& values,
                             const at::Tensor& positions, const at::Tensor& stat,
                             const at::Tensor& keep);

}  // namespace retain
