// Fused forms of the decoder's two elementwise chains, for inference: HF's RMSNorm and the rotary
// embedding. Each is one kernel on CUDA where the composite ATen form launches five to eight (a
// decode step of a 36-layer model would launch over a thousand of them), with the composite's
// exact rounding: RoPE is bit-identical to it; RMSNorm sums squares in another order, so its
// fp32 result differs in the last bits and a bf16/fp16 result by at most one unit in the last
// place on rare elements.
//
// The kernels have no backward pass: they run only where no gradient is asked for (inference
// mode, no-grad, frozen inputs), on CUDA tensors of fp32/bf16/fp16 in a build with the CUDA
// sources; otherwise the composite references run (also callable directly, for the tests).
#pragma once

#include <ATen/ATen.h>

namespace retain {

// HF's LlamaRMSNorm: weight * (x_f32 * rsqrt(mean(x_f32^2, -1) + eps)).to(x.dtype), over the
// last dimension. weight: (n,) where x is (..., n).
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);
at::Tensor rms_norm_reference(const at::Tensor& x, const at::Tensor& weight, double eps);
bool rms_norm_uses_kernel(const at::Tensor& x, const at::Tensor& weight);

// Rotary embedding, x * cos + rotate_half(x) * sin, with rotate_half(x) = cat(-x2, x1) of the two
// halves of the last dimension. x: (B, H, T, D), any strides; cos, sin: (B, T, D) in x's dtype,
// shared by the heads. Returns (B, H, T, D).
at::Tensor rope_rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);
at::Tensor rope_rotate_reference(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);
bool rope_rotate_uses_kernel(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace retain
