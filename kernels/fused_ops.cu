// The fused RMSNorm and rotary-embedding kernels behind kernels/fused_ops.h. Each reproduces the
// composite ATen form's rounding step by step: every intermediate the composite stores in the
// input dtype is rounded to it here too.
//
// RMSNorm: one block per row; each thread sums the squares of a strided slice in fp32, a block
// reduction gives the row's mean, then each thread writes weight * round(x * rstd).
// RoPE: one thread per (b, h, t, i < D/2) pair, writing elements i and i + D/2.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda_common.cuh"
#include "kernels/cuda_launchers.h"

namespace retain {

namespace {

constexpr int kNormThreads = 128;
constexpr int kRopeThreads = 256;

// Rounds to the storage dtype and back: the value the composite form would have stored.
template <typename T>
__device__ __forceinline__ float round_to(float x) {
  return to_float<T>(from_float<T>(x));
}

template <typename T>
__global__ void __launch_bounds__(kNormThreads)
    rms_norm_kernel(const T* __restrict__ x, const T* __restrict__ weight, T* __restrict__ out,
                    int n, float eps) {
  const int64_t row = blockIdx.x;
  const T* xr = x + row * n;
  T* orow = out + row * n;
  float sum = 0.f;
  for (int i = threadIdx.x; i < n; i += kNormThreads) {
    const float v = to_float<T>(xr[i]);
    sum += v * v;
  }
  sum = group_sum<32>(sum);
  __shared__ float partial[kNormThreads / 32];
  __shared__ float rstd;
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < kNormThreads / 32; ++w) total += partial[w];
    // As ATen: mean = sum * (1 / n), then rsqrt(mean + eps) in fp32.
    rstd = rsqrtf(total * (1.f / static_cast<float>(n)) + eps);
  }
  __syncthreads();
  const float r = rstd;
  for (int i = threadIdx.x; i < n; i += kNormThreads) {
    const float h = round_to<T>(__fmul_rn(to_float<T>(xr[i]), r));  // h.to(x.dtype)
    orow[i] = from_float<T>(__fmul_rn(to_float<T>(weight[i]), h));
  }
}

struct RopeParams {
  const void* x;
  const void* cos;
  const void* sin;
  void* out;
  int64_t xs_b, xs_h, xs_t, xs_d;  // x's strides
  int64_t heads, tokens, half;
  int64_t pairs;  // B * H * T * half
};

template <typename T>
__global__ void __launch_bounds__(kRopeThreads) rope_rotate_kernel(RopeParams p) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * kRopeThreads + threadIdx.x;
  if (idx >= p.pairs) return;
  const int64_t i = idx % p.half;
  int64_t rest = idx / p.half;
  const int64_t t = rest % p.tokens;
  rest /= p.tokens;
  const int64_t h = rest % p.heads;
  const int64_t b = rest / p.heads;
  const T* x = static_cast<const T*>(p.x) + b * p.xs_b + h * p.xs_h + t * p.xs_t;
  const float x1 = to_float<T>(x[i * p.xs_d]);
  const float x2 = to_float<T>(x[(i + p.half) * p.xs_d]);
  const int64_t d = 2 * p.half;
  const T* c = static_cast<const T*>(p.cos) + (b * p.tokens + t) * d;
  const T* s = static_cast<const T*>(p.sin) + (b * p.tokens + t) * d;
  T* o = static_cast<T*>(p.out) + ((b * p.heads + h) * p.tokens + t) * d;
  // x * cos and rotate_half(x) * sin are each stored in T by the composite form, then added.
  // Explicitly rounded multiply and add: a contracted fma would round once where the composite
  // rounds twice (in fp32, where round_to does not separate them).
  o[i] = from_float<T>(__fadd_rn(round_to<T>(__fmul_rn(x1, to_float<T>(c[i]))),
                                 round_to<T>(__fmul_rn(-x2, to_float<T>(s[i])))));
  o[i + p.half] = from_float<T>(__fadd_rn(round_to<T>(__fmul_rn(x2, to_float<T>(c[i + p.half]))),
                                          round_to<T>(__fmul_rn(x1, to_float<T>(s[i + p.half])))));
}

}  // namespace

at::Tensor rms_norm_cuda(const at::Tensor& x, const at::Tensor& weight, double eps) {
  TORCH_CHECK(x.is_cuda() && weight.is_cuda() && weight.scalar_type() == x.scalar_type() &&
                  weight.dim() == 1 && weight.size(0) == x.size(-1),
              "rms_norm_cuda: expected CUDA x (..., n) and weight (n,) of one dtype, found ",
              x.sizes(), " ", x.scalar_type(), " and ", weight.sizes(), " ", weight.scalar_type());
  c10::cuda::CUDAGuard guard(x.device());
  auto xc = x.contiguous();
  auto wc = weight.contiguous();
  auto out = at::empty_like(xc);
  const int64_t n = x.size(-1), rows = x.numel() / n;
  TORCH_CHECK(rows <= INT32_MAX && n <= INT32_MAX, "rms_norm_cuda: too many rows (", rows, ")");
  auto stream = c10::cuda::getCurrentCUDAStream();
  dispatch_storage_type(x.scalar_type(), "rms_norm", [&](auto tag) {
    using T = decltype(tag);
    rms_norm_kernel<T><<<static_cast<unsigned>(rows), kNormThreads, 0, stream>>>(
        static_cast<const T*>(xc.data_ptr()), static_cast<const T*>(wc.data_ptr()),
        static_cast<T*>(out.data_ptr()), static_cast<int>(n), static_cast<float>(eps));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor rope_rotate_cuda(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 4 && x.size(3) % 2 == 0 && cos.dim() == 3 &&
                  cos.sizes() == sin.sizes() && cos.size(0) == x.size(0) &&
                  cos.size(1) == x.size(2) && cos.size(2) == x.size(3),
              "rope_rotate_cuda: expected x (B, H, T, D) and cos, sin (B, T, D), found ", x.sizes(),
              ", ", cos.sizes(), ", ", sin.sizes());
  c10::cuda::CUDAGuard guard(x.device());
  auto c = cos.contiguous(), s = sin.contiguous();
  auto out = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  RopeParams p;
  p.x = x.data_ptr();
  p.cos = c.data_ptr();
  p.sin = s.data_ptr();
  p.out = out.data_ptr();
  p.xs_b = x.stride(0);
  p.xs_h = x.stride(1);
  p.xs_t = x.stride(2);
  p.xs_d = x.stride(3);
  p.heads = x.size(1);
  p.tokens = x.size(2);
  p.half = x.size(3) / 2;
  p.pairs = x.numel() / 2;
  const int64_t blocks = (p.pairs + kRopeThreads - 1) / kRopeThreads;
  TORCH_CHECK(blocks <= INT32_MAX, "rope_rotate_cuda: too many elements (", x.numel(), ")");
  auto stream = c10::cuda::getCurrentCUDAStream();
  dispatch_storage_type(x.scalar_type(), "rope_rotate", [&](auto tag) {
    using T = decltype(tag);
    rope_rotate_kernel<T><<<static_cast<unsigned>(blocks), kRopeThreads, 0, stream>>>(p);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

}  // namespace retain
