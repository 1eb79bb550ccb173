// Causal softmax attention over cached entries; masks come from token positions (see kv_cache.h).
// The eager path does GQA without materialising repeated K/V: the G query heads sharing a KV head
// are folded into the row dimension, so one matmul per KV head serves all of them.
//
// Shapes: B batch, H query heads, Hk KV heads, G = H / Hk, T queries, S keys, D head dim.
#pragma once

#include <ATen/ATen.h>

namespace retain {

// q: (B, H, T, D); keys/values: (B, Hk, S, D); q_positions: (B, T); k_positions: (B, 1|Hk, S).
// window > 0 restricts each query to keys with q_pos - k_pos < window. Returns (B, H, T, D).
// T > 1 (prefill chunks, training's teacher): fused scaled-dot-product attention (transformers'
// default "sdpa" path; flash / memory-efficient kernels on CUDA, flash on the CPU) with the
// position mask, never holding the (B, H, T, S) scores; see attention_fused. T = 1 (a decode
// step): the eager path, scores in the input dtype and the softmax in fp32, as transformers'
// eager attention. A query that sees no key
// (padding) gets finite weights on both paths (every key by its score on the fused one, uniform
// on the eager one); its output is unused.
at::Tensor attention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                     const at::Tensor& q_positions, const at::Tensor& k_positions, double scale,
                     int64_t window);

// The two paths, callable directly (tests compare them).
at::Tensor attention_eager(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                           const at::Tensor& q_positions, const at::Tensor& k_positions,
                           double scale, int64_t window);
at::Tensor attention_fused(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                           const at::Tensor& q_positions, const at::Tensor& k_positions,
                           double scale, int64_t window);

// The additive mask of attention_fused on the CPU: (B, Hk * group, T, S) for k_positions
// (B, Hk > 1, S), (B, 1, T, S) for (B, 1, S); 0 where query t may attend to key s (0 <= k_pos <=
// q_pos, and q_pos - k_pos < window when window > 0), -inf elsewhere, and 0 across a row that
// sees nothing (a padding query then reads every key: finite, never NaN). Query head h reads KV head
// h / group. CPU position tensors only.
at::Tensor attention_bias(const at::Tensor& q_positions, const at::Tensor& k_positions,
                          int64_t group, int64_t window, at::ScalarType dtype);

}  // namespace retain
