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

// One run of vision tokens in a prompt: an image, a Qwen2.5-VL video (its whole grid), or one
// temporal group of a Qwen3-VL video (grid t = 1: its processor writes each group's timestamp as
// text between the runs, and transformers splits the video's grid the same way).
struct VisionSpan {
  int64_t token_id = -1;  // the placeholder its run repeats (image or video pad)
  ImageGrid grid;
  // Qwen2.5-VL videos: temporal positions per grid step, tokens_per_second x seconds per grid,
  // in fp32 as transformers computes it from its fp32 second_per_grid_ts tensor; 1 otherwise.
  float time_interval = 1.0f;
};

// transformers 5's get_rope_index for one unpadded row: each maximal run of image or video
// placeholders is the next span (in order) and must repeat its token exactly grid.tokens(merge)
// times. Text takes the next position on all axes; a span's tokens take (start + int(t *
// interval), start + row, start + col) and the text after it starts at start + max(rows, cols),
// which is transformers 5's rule (its 4.x code, and vLLM, start it at the span's largest position
// + 1: the same unless a Qwen2.5-VL video's temporal extent exceeds its side; docs/vision.md).
// Errors name the run that does not match.
RopeIndex multimodal_rope_index(const std::vector<int64_t>& ids, int64_t image_token_id,
                                int64_t video_token_id, const std::vector<VisionSpan>& spans,
                                int64_t merge);
// Images only: each run of `image_token_id` is the next of `grids`.
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
