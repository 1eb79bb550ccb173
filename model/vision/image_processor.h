// transformers' Qwen2-VL image processor (also Qwen2.5-VL's and Qwen3-VL's), reproduced exactly:
// smart resize to multiples of patch x merge within [min_pixels, max_pixels], bicubic resampling
// with antialias on the 8-bit image (the same ATen kernel torchvision calls), rescale and
// normalise fused as transformers fuses them, the frame repeated temporal_patch_size times and
// the patches flattened in merge-block order.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <string>

#include "core/fs.h"
#include "core/json.h"
#include "model/model_config.h"
#include "model/vision/mrope.h"

namespace retain {

// What the image and the video processors of Qwen's families share: the pixel budget, the patch
// layout and the normalisation.
struct PatchProcessorConfig {
  int64_t min_pixels = 56 * 56;         // size.shortest_edge
  int64_t max_pixels = 28 * 28 * 1280;  // size.longest_edge
  int64_t patch_size = 14;
  int64_t temporal_patch_size = 2;
  int64_t merge_size = 2;
  std::array<double, 3> mean{0.48145466, 0.4578275, 0.40821073};  // OPENAI_CLIP_MEAN
  std::array<double, 3> std{0.26862954, 0.26130258, 0.27577711};
  double rescale_factor = 1.0 / 255.0;

  // Reads those keys of a processor's JSON (`where` names it) over the current values and refuses
  // what changes the computation unsupported (do_* = false, a resample other than bicubic, a
  // centre crop). transformers 5 writes size {shortest_edge, longest_edge}; older files carry
  // min_pixels / max_pixels, which win when present, where `legacy_pixel_keys` (the image
  // processor, and Qwen2VLVideoProcessor, which maps them onto size).
  void read(const Json& j, const std::string& where, bool legacy_pixel_keys);
};

struct ImageProcessorConfig : PatchProcessorConfig {
  // preprocessor_config.json of a model directory (transformers' defaults for absent keys).
  static ImageProcessorConfig load(const fs::path& model_dir);
  // The released models' settings for a config without a directory (init-model presets):
  // Qwen2.5-VL patch 14 with CLIP's mean/std, Qwen3-VL patch 16 with mean/std 0.5.
  static ImageProcessorConfig for_model(const ModelConfig& config);
};

struct ProcessedImage {
  at::Tensor pixel_values;  // (grid.patches(), C x temporal x patch x patch) fp32
  ImageGrid grid;
  int64_t resized_height = 0, resized_width = 0;
};

// transformers' smart_resize: (height, width) rounded to multiples of `factor` with the pixel
// count brought inside [min_pixels, max_pixels]; an aspect ratio above 200 is an error.
std::pair<int64_t, int64_t> smart_resize(int64_t height, int64_t width, int64_t factor,
                                         int64_t min_pixels, int64_t max_pixels);

// rgb: (H, W, 3) uint8 (model/vision/image_io.h).
ProcessedImage preprocess_image(const at::Tensor& rgb, const ImageProcessorConfig& config);

}  // namespace retain
