// Multimodal rotary positions (M-RoPE) of Qwen2.5-VL and Qwen3-VL: every token has a temporal,
// a height and a width position; text tokens have the same value on all three, an image's merged
// patches share the temporal one and take their row and column, offset by where the image starts.
// The decoder's rotary frequencies are divided among the three axes (model/vision/vision_config.h).
//
// The KV cache, the attention mask and every eviction policy keep using each token's sequential
// index; only the rotation of q and k follows these positions.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "model/rope.h"
#include "model/vision/vision_config.h"

namespace retain {

// One image's patch grid before merging: temporal x height x width patches.
struct ImageGrid {
  int64_t t = 1, h = 0, w = 0;
  int64_t patches() const { return t * h * w; }
  // Language-model tokens once merge x merge patches become one.
  int64_t tokens(int64_t merge) const { return t * (h / merge) * (w / merge); }
};

struct RopeIndex {
  at::Tensor positions;  // (3, T) int64: temporal, height, width position of every token
  int64_t delta = 0;     // max position + 1 - T: what decoded tokens add to their index
};

// transformers' get_rope_index for one unpadded row: each run of `image_token_id` tokens is the
// next image of `grids` (in order) and must hold exactly its merged token count. Errors name the
// run that does not match.
RopeIndex multimodal_rope_index(const std::vector<int64_t>& ids, int64_t image_token_id,
                                const std::vector<ImageGrid>& grids, int64_t merge);

// (D/2,) int64: which axis (0 t, 1 h, 2 w) each rotary frequency follows.
at::Tensor mrope_axis_of_frequency(const MultimodalConfig& config, int64_t head_dim,
                                   at::Device device);

// cos, sin: (B, T, D) for positions (3, B, T), as transformers computes them in fp32.
std::pair<at::Tensor, at::Tensor> mrope_cos_sin(const RopeFrequencies& freqs,
                                                const at::Tensor& positions,
                                                const at::Tensor& axis_of_frequency,
                                                at::ScalarType dtype);

}  // namespace retain
