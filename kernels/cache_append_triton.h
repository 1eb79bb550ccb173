// The budgeted cache's append in one launch (kernels/triton/cache_append.py, compiled into the
// embedded cubins): keys, values, positions and statistic of the new tokens after each KV head's
// live entries, and the heads' lengths grown, where ATen takes four scatters, their index
// arithmetic and the length update. Same result as write_at_lengths (kernels/cache_cpu.h) on each
// of the four tensors followed by `lengths += n`, bit for bit (a copy); a slot at or past the
// capacity is not written (the caller makes room: CacheStorage grows its buffers first).
//
// Shapes: cache keys and values (B, Hk, C, D) contiguous, positions (B, Hk, C) int64, statistic
// (B, Hk, C) fp32, lengths (B, Hk) int64; new keys and values (B, Hk, n, D) with unit stride
// along D, new positions (B, n), new statistic (B, Hk, n).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "kernels/triton_launch.h"

namespace retain {

struct CacheAppendTensors {
  const at::Tensor& keys;
  const at::Tensor& values;
  const at::Tensor& positions;
  const at::Tensor& stat;
  const at::Tensor& lengths;
  const at::Tensor& new_keys;
  const at::Tensor& new_values;
  const at::Tensor& new_positions;
  const at::Tensor& new_stat;
};

// The most new tokens the fused append takes: one program per KV head walks them in turn, which
// suits decode steps; a prefill chunk keeps ATen's scatters, whose grid spans the tokens.
constexpr int64_t kFusedAppendMaxTokens = 64;

// Which append the budgeted cache runs on a GPU: ATen's scatters (the default until a GPU session
// has verified the kernel: scripts/gpu-run.sh) or the fused kernel, where it takes the tensors.
// Process-wide; starts from RETAIN_CACHE_APPEND=aten|fused.
enum class CacheAppend { aten, fused };
CacheAppend cache_append_choice();
void set_cache_append(CacheAppend choice);
// "aten" | "fused"; anything else is refused naming `where`.
CacheAppend parse_cache_append(const std::string& name, const std::string& where);

// Empty when the fused append runs these tensors on their device; otherwise why not (not a GPU,
// no cubin for the arch, dtype or head dim, a layout the kernel does not take, too many tokens).
std::string cache_append_triton_unsupported(const CacheAppendTensors& t);

// The launch, planned without a GPU for a device of compute capability `arch` (x 10): the CPU
// tests check its arguments against the cubin's parameters. The positions and statistic may be
// converted to int64 / fp32 copies, which the plan holds until the launch is queued.
TritonPlan plan_cache_append(const CacheAppendTensors& t, int arch);

// Appends in place on the GPU (cache_append_triton_unsupported(t) must be empty).
void cache_append_triton(const CacheAppendTensors& t);

}  // namespace retain
