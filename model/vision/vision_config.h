// The vision side of a vision-language model's config.json (Qwen2.5-VL, Qwen3-VL): the vision
// tower's shape, the multimodal token ids and the multimodal rotary layout of the text decoder.
// Every key that changes the computation is honoured or refused, as for the text decoder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "model/model_config.h"

namespace retain {

enum class VisionFamily {
  kQwen2_5,  // RMSNorm + SwiGLU blocks, windowed attention with a few full blocks, RMSNorm merger
  kQwen3,    // LayerNorm + GELU blocks, a learned position grid, DeepStack mergers
};

struct VisionConfig {
  VisionFamily family = VisionFamily::kQwen2_5;
  int64_t depth = 0;
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t intermediate_size = 0;
  int64_t in_channels = 3;
  int64_t patch_size = 14;
  int64_t temporal_patch_size = 2;
  int64_t spatial_merge_size = 2;
  int64_t out_hidden_size = 0;  // the text decoder's hidden size
  std::string hidden_act;
  Activation activation = Activation::kSilu;
  double rope_theta = 10000.0;  // the 2-D (axial) rotary of the vision blocks
  // Qwen2.5-VL: windows of window_size pixels; blocks listed here attend over the whole image.
  int64_t window_size = 0;
  std::vector<int64_t> fullatt_block_indexes;
  int64_t tokens_per_second = 4;  // video temporal positions per second (model/vision/mrope.h)
  // Qwen3-VL: a learned square grid of position embeddings, resampled to each image's grid, and
  // the blocks whose outputs feed the first decoder layers (DeepStack).
  int64_t num_position_embeddings = 0;
  std::vector<int64_t> deepstack_visual_indexes;

  int64_t head_dim() const { return hidden_size / num_heads; }
  // Patches merged into one language-model token.
  int64_t merge_unit() const { return spatial_merge_size * spatial_merge_size; }
  // One flattened patch: channels x temporal x patch x patch values.
  int64_t patch_values() const {
    return in_channels * temporal_patch_size * patch_size * patch_size;
  }
};

struct MultimodalConfig {
  VisionConfig vision;
  int64_t image_token_id = -1;
  int64_t video_token_id = -1;
  int64_t vision_start_token_id = -1;
  int64_t vision_end_token_id = -1;
  // The decoder's rotary frequencies are split among the temporal, height and width position
  // axes: mrope_section[a] frequencies follow axis a. Qwen2.5-VL gives each axis a contiguous
  // block; Qwen3-VL interleaves them (t, h, w, t, h, w, ...).
  std::vector<int64_t> mrope_section;
  bool mrope_interleaved = false;
};

// `vision`: config.json's "vision_config"; `top`: the whole config (token ids); `text_rope`: the
// text config's rope parameters object (mrope_section). `head_dim`: the decoder's.
MultimodalConfig parse_multimodal_config(const std::string& model_type, const Json& top,
                                         const Json& text_rope, int64_t text_head_dim,
                                         const std::string& where);

std::string multimodal_fingerprint(const MultimodalConfig& config);

}  // namespace retain
