// Retention attention and the retention sum on the Triton kernels (kernels/triton/), launched
// from their embedded cubins: the C++ twin of kernels/triton/retention_host.py (same tile
// ranges, grids and argument order). Same contract as the CUDA launchers in cuda_launchers.h.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/triton_launch.h"

namespace retain {

// The loop bounds of the kernels, from each token's document (the tokens of its row with its
// segment id; padding, segment -1, sees nothing and is seen by nothing):
//   start (B, ceil(T / row_tile)) int32: per tile of rows (queries), the first tile of columns
//     (keys) any of its rows can see;
//   end (B, ceil(T / col_tile)) int32: per tile of columns, one past the last tile of rows that
//     can see any of them.
// ATen only: runs on the CPU (tested there) and on the GPU.
struct RetentionTileRanges {
  at::Tensor start, end;
};
RetentionTileRanges retention_tile_ranges(const at::Tensor& segments, int64_t row_tile,
                                          int64_t col_tile);

// Empty when the Triton cubins of this binary run these inputs on their device; otherwise why
// not (not a GPU, no cubin for the device's arch, the dtype or the head dim).
std::string retention_attention_triton_unsupported(const at::Tensor& q, const at::Tensor& k,
                                                   const at::Tensor& v, const at::Tensor& log_beta);
std::string retention_sum_triton_unsupported(const at::Tensor& log_beta);

// The launches of each call, planned without a GPU (TritonPlan, triton_launch.h), for a device of compute capability `arch` (x 10); outputs as the launchers below return them.
TritonPlan plan_retention_attention_forward(const at::Tensor& q, const at::Tensor& k,
                                            const at::Tensor& v, const at::Tensor& log_beta,
                                            const at::Tensor& positions, const at::Tensor& segments,
                                            double scale, int arch);
TritonPlan plan_retention_attention_backward(const at::Tensor& q, const at::Tensor& k,
                                             const at::Tensor& v, const at::Tensor& log_beta,
                                             const at::Tensor& positions,
                                             const at::Tensor& segments, const at::Tensor& out,
                                             const at::Tensor& lse, const at::Tensor& d_out,
                                             double scale, int arch);
TritonPlan plan_retention_sum_forward(const at::Tensor& log_beta, const at::Tensor& positions,
                                      const at::Tensor& segments, int arch);
TritonPlan plan_retention_sum_backward(const at::Tensor& log_beta, const at::Tensor& positions,
                                       const at::Tensor& segments, const at::Tensor& d_sum,
                                       int arch);

// q (B, H, T, D), k, v (B, Hk, T, D) bf16/fp16; log_beta (B, Hk, T) fp32; positions, segments
// (B, T) integer. Returns {out (B, H, T, D) in q's dtype, lse (B, H, T) fp32}.
std::vector<at::Tensor> retention_attention_triton_forward(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_beta,
    const at::Tensor& positions, const at::Tensor& segments, double scale);
// Returns {dq, dk, dv, dlog_beta}.
std::vector<at::Tensor> retention_attention_triton_backward(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_beta,
    const at::Tensor& positions, const at::Tensor& segments, const at::Tensor& out,
    const at::Tensor& lse, const at::Tensor& d_out, double scale);

at::Tensor retention_sum_triton_forward(const at::Tensor& log_beta, const at::Tensor& positions,
                                        const at::Tensor& segments);
at::Tensor retention_sum_triton_backward(const at::Tensor& log_beta, const at::Tensor& positions,
                                         const at::Tensor& segments, const at::Tensor& d_sum);

}  // namespace retain
