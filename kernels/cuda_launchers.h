// The CUDA launchers behind retention_attention, retention_sum, decode_attention,
// compact_cache and the fused inference ops (rms_norm, rope_rotate). They validate devices, dtypes
// and shapes, launch on the current stream and return fresh tensors (or modify the cache views in
// place); the public entry points in retention_attention.h and decode_attention.h choose between
// them and the ATen references.
//
// Built from the .cu files when RETAIN_CUDA is ON; cuda_stubs.cpp otherwise (every launcher then
// throws: the dispatchers never call them in such a build, cuda_sources_compiled() is false).
//
// This header is included by nvcc: ATen only, no project PCH.
//
// Shapes: B batch, H query heads, Hk KV heads, T tokens, D head dim (64 or 128), C cache slots.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace retain {

// q (B, H, T, D), k, v (B, Hk, T, D) in one of fp32/bf16/fp16; log_beta (B, Hk, T) fp32;
// positions, segments (B, T) int64. Returns {out (B, H, T, D) in q's dtype, lse (B, H, T) fp32
// (-inf on rows that see no key)}.
std::vector<at::Tensor> retention_attention_cuda_forward(const at::Tensor& q, const at::Tensor& k,
                                                         const at::Tensor& v,
                                                         const at::Tensor& log_beta,
                                                         const at::Tensor& positions,
                                                         const at::Tensor& segments, double scale);

// Returns {dq, dk, dv, dlog_beta} in the dtypes of q, k, v, log_beta.
std::vector<at::Tensor> retention_attention_cuda_backward(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_beta,
    const at::Tensor& positions, const at::Tensor& segments, const at::Tensor& out,
    const at::Tensor& lse, const at::Tensor& d_out, double scale);

// log_beta (B, Hk, T) fp32 -> S (B, Hk, T) fp32, and its backward: d log_beta from dS.
at::Tensor retention_sum_cuda_forward(const at::Tensor& log_beta, const at::Tensor& positions,
                                      const at::Tensor& segments);
at::Tensor retention_sum_cuda_backward(const at::Tensor& log_beta, const at::Tensor& positions,
                                       const at::Tensor& segments, const at::Tensor& d_sum);

// q (B, H, 1, D); keys, values (B, Hk, S, D) views with unit stride in D and D in S;
// positions (B, Hk, S) int64 (unit stride in S); lengths (B, Hk) int64; q_positions (B, 1) int64.
// Returns (B, H, 1, D) in q's dtype.
at::Tensor decode_attention_cuda(const at::Tensor& q, const at::Tensor& keys,
                                 const at::Tensor& values, const at::Tensor& positions,
                                 const at::Tensor& lengths, const at::Tensor& q_positions,
                                 double scale);

// In place on the views keys, values (B, Hk, S, D), positions (B, Hk, S) int64, stat (B, Hk, S)
// fp32; keep (B, Hk, S) bool. Returns the new lengths (B, Hk) int64.
at::Tensor compact_cache_cuda(const at::Tensor& keys, const at::Tensor& values,
                              const at::Tensor& positions, const at::Tensor& stat,
                              const at::Tensor& keep);

// x (..., n) and weight (n,) of one dtype -> HF RMSNorm of x, contiguous (kernels/fused_ops.h).
at::Tensor rms_norm_cuda(const at::Tensor& x, const at::Tensor& weight, double eps);

// x (B, H, T, D) any strides, cos, sin (B, T, D) -> x * cos + rotate_half(x) * sin, contiguous.
at::Tensor rope_rotate_cuda(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace retain
