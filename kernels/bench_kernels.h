// `retain bench kernels`: times the CUDA kernels on the shapes they are tuned for and sets them
// next to what bounds them: retention attention (WMMA and Triton kernels) vs
// at::scaled_dot_product_attention's flash and cuDNN backends (causal, no bias) on the same shapes, decode attention vs the time to read its bytes at
// the device's measured copy bandwidth. Needs a GPU; says so and fails without one.
#pragma once

#include <cstdint>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "kernels/retention_attention.h"

namespace retain {

struct BenchKernelsOptions {
  std::vector<int64_t> seqs = {4096, 16384, 32768};  // attention lengths T
  int64_t batch = 1;
  int64_t heads = 32;
  int64_t kv_heads = 8;
  int64_t head_dim = 128;
  int64_t decode_batch = 8;   // sequences decoding at once
  int64_t decode_len = 8192;  // cache slots per (sequence, KV head); lengths are in [len/2, len]
  int iters = 10;
  int warmup = 3;
  // The retention attention implementations timed, each beside the same SDPA runs.
  std::vector<RetentionKernels> kernels = {RetentionKernels::wmma, RetentionKernels::triton};
  bool json = false;  // also one JSON line per (length, implementation)
};

// Bytes per second (read + written) of a large copy within `device` (1 GiB on a GPU, 256 MiB on
// the CPU): the bandwidth the roofline figures of the benchmarks divide by.
double device_copy_bandwidth(c10::Device device);
// FLOP/s of a large matrix product in `dtype` (8192^3 on a GPU, 2048^3 on the CPU): the ceiling
// the MFU of `bench train` divides by (measured, not the datasheet's).
double device_matmul_rate(c10::Device device, c10::ScalarType dtype);

// Prints one table; returns 0. Throws when there is no CUDA device.
int run_bench_kernels_command(const BenchKernelsOptions& options);

}  // namespace retain
