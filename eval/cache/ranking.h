// Top-k selection for eviction, the same on every device: at::topk breaks ties differently on CPU
// and CUDA, and max pooling (SnapKV) makes exact ties common, so the same run kept different
// entries on the two; a stable sort decides the same way everywhere. Ties go to the later entry
// (the more recent token within a head).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <limits>

namespace retain {

inline constexpr float kInfScore = std::numeric_limits<float>::infinity();

// Indices of the k largest scores along the last dimension.
at::Tensor top_k_indices(const at::Tensor& score, int64_t k);
// A mask of the keep[b] largest scores along the last dimension of each row b; keep is (B,)
// int64.
at::Tensor top_k_mask(const at::Tensor& score, const at::Tensor& keep);
// (B,) counts as (B, 1, ..., 1) with `dims` dimensions, to broadcast against a (B, ...) tensor.
at::Tensor per_row(const at::Tensor& counts, int64_t dims);

}  // namespace retain
