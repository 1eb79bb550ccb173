// The vision towers of Qwen2.5-VL and Qwen3-VL: patch embedding (a 3-D convolution whose kernel is
// the patch), ViT blocks with a 2-D rotary over the patch's row and column, and the merger that
// turns each merge x merge group of patches into one language-model token. Same arithmetic order
// as transformers (rotary in fp32, softmax in fp32), so fp32 outputs agree to rounding.
//
// Qwen2.5-VL: RMSNorm + SwiGLU blocks; most blocks attend within windows of window_size pixels
// (patches reordered window by window), the fullatt_block_indexes blocks over the whole image.
// Qwen3-VL: LayerNorm + GELU blocks over the whole image, a learned square grid of position
// embeddings resampled (bilinear, corners aligned) to each image, and DeepStack: the outputs of the
// deepstack_visual_indexes blocks, merged by their own mergers, are added to the hidden states of
// the first decoder layers at the image tokens.
//
// Shapes: N patches of all images, P = C x temporal x patch x patch values per patch.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "core/safetensors.h"
#include "model/load_options.h"
#include "model/vision/mrope.h"
#include "model/vision/vision_config.h"

namespace retain {

struct VisionOutput {
  at::Tensor embeds;                  // (N / merge_unit, out_hidden): one row per image token
  std::vector<at::Tensor> deepstack;  // Qwen3-VL: one (N / merge_unit, out_hidden) per level
};

// Whether a vision tower weight (name without prefix) is a norm's scale: ones in random weights.
bool vision_norm_weight(const std::string& name);

class VisionTower {
 public:
  // Weights under `prefix` ("model.visual." or, in Qwen2.5-VL's first release, "visual.").
  static VisionTower load(const VisionConfig& config, const SafetensorsCheckpoint& checkpoint,
                          const std::string& prefix, const LoadOptions& options);
  // Random weights for benchmarks of public shapes (as Decoder::random).
  static VisionTower random(const VisionConfig& config, const LoadOptions& options, uint64_t seed);

  // pixel_values: (N, P) as the image processor makes them (model/vision/image_processor.h);
  // grids: each image's patch grid, in the order of its rows in pixel_values.
  VisionOutput forward(const at::Tensor& pixel_values, const std::vector<ImageGrid>& grids) const;

  const VisionConfig& config() const { return config_; }
  const std::vector<std::pair<std::string, at::Tensor>>& named_parameters() const {
    return params_;
  }

  // The checkpoint names this config needs, with shapes (without the prefix).
  static std::vector<std::pair<std::string, std::vector<int64_t>>> param_shapes(
      const VisionConfig& config);

 private:
  struct Merger {
    at::Tensor norm_w, norm_b, fc1_w, fc1_b, fc2_w, fc2_b;
    bool norm_after_shuffle = false;  // Qwen3-VL's DeepStack mergers normalise the merged rows
  };
  static VisionTower assemble(const VisionConfig& config,
                              std::vector<std::pair<std::string, at::Tensor>> params);
  at::Tensor norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) const;
  at::Tensor apply_merger(const Merger& merger, const at::Tensor& x) const;
  at::Tensor block(int64_t i, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                   const std::vector<int64_t>& segments) const;
  at::Tensor learned_positions(const std::vector<ImageGrid>& grids) const;

  VisionConfig config_;
  std::vector<std::pair<std::string, at::Tensor>> params_;
  std::unordered_map<std::string, at::Tensor> by_name_;
  Merger merger_;
  std::vector<Merger> deepstack_mergers_;
};

}  // namespace retain
