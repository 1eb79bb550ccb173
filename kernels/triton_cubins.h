// The Triton kernels compiled ahead of time (kernels/triton/compile_cubins.py, run by the build
// from kernels/triton/configs.json): one cubin per (kernel, arch, dtype, head dim), embedded in
// the binary, with the launch shape and the resource usage the compiler reported. A build without
// CUDA sources has an empty table.
#pragma once

#include <cstddef>
#include <span>

namespace retain {

struct TritonCubin {
  const char* kernel;    // the @triton.jit function in kernels/triton/retention_attention.py
  int arch;              // compute capability x 10: 80 (sm_80), 90 (sm_90a), 100 (sm_100a), ...
  const char* dtype;     // "bf16" | "fp16" (the attention kernels) | "fp32" (the sums)
  int head_dim;          // 64 | 128; 0 for the sums
  const char* function;  // the function's name inside the cubin
  const char* params;    // its non-constexpr parameters in order, "name:type,..." (the ABI)
  int block_m, block_n;  // tile rows and columns (block_n 0 where the kernel has none)
  int num_warps, num_stages;
  int shared_bytes;         // dynamic shared memory per block the launch asks for
  int static_shared_bytes;  // the cubin's own (counts against the same per-block limit)
  int registers, stack_bytes, local_bytes;  // cuobjdump -res-usage
  const char* data;
  size_t size;
};

std::span<const TritonCubin> triton_cubins();

}  // namespace retain
