// Small helpers shared by the CUDA kernels: the dispatch over storage dtypes (fp32, bf16, fp16),
// conversions between them and fp32, and vector loads of a row's slice into fp32 registers.
#pragma once

#include <ATen/ATen.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace retain {

// Calls fn(T{}) with T the kernels' storage type for `dtype`: float, __nv_bfloat16 or __half;
// any other dtype is an error naming `what`.
template <typename Fn>
void dispatch_storage_type(at::ScalarType dtype, const char* what, Fn&& fn) {
  switch (dtype) {
    case at::kFloat:
      fn(float{});
      break;
    case at::kBFloat16:
      fn(__nv_bfloat16{});
      break;
    case at::kHalf:
      fn(__half{});
      break;
    default:
      TORCH_CHECK(false, what, " (CUDA): unsupported dtype ", dtype);
  }
}

template <typename T>
__device__ __forceinline__ float to_float(T x);
template <>
__device__ __forceinline__ float to_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ float to_float<__half>(__half x) {
  return __half2float(x);
}
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// Loads N consecutive elements at src (aligned to N * sizeof(T), which must be 8 or a multiple
// of 16 bytes) into fp32 registers.
template <typename T, int N>
__device__ __forceinline__ void load_as_float(const T* src, float (&out)[N]) {
  constexpr int kBytes = N * static_cast<int>(sizeof(T));
  static_assert(kBytes == 8 || kBytes % 16 == 0, "vector loads of 8 or 16k bytes");
  if constexpr (kBytes == 8) {
    const uint2 raw = *reinterpret_cast<const uint2*>(src);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = to_float<T>(e[i]);
  } else {
    constexpr int kPer = 16 / static_cast<int>(sizeof(T));
#pragma unroll
    for (int v = 0; v < kBytes / 16; ++v) {
      const uint4 raw = reinterpret_cast<const uint4*>(src)[v];
      const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
      for (int i = 0; i < kPer; ++i) out[v * kPer + i] = to_float<T>(e[i]);
    }
  }
}

// Reductions over the kLanes consecutive lanes that share a row (kLanes a power of two <= 32).
// Every lane of the warp must take part.
template <int kLanes>
__device__ __forceinline__ float group_max(float x) {
#pragma unroll
  for (int off = 1; off < kLanes; off <<= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
  return x;
}
template <int kLanes>
__device__ __forceinline__ float group_sum(float x) {
#pragma unroll
  for (int off = 1; off < kLanes; off <<= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

}  // namespace retain
