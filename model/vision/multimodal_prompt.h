// A prompt with images and videos, made ready for a vision-language decoder: each image's
// placeholder (<|image_pad|>, written once per image by the chat template) repeated once per
// merged patch as transformers' processor does, each video's (<|video_pad|>) expanded as its
// family's processor expands it (Qwen2.5-VL: one run for the whole clip; Qwen3-VL: per temporal
// group "<T seconds><|vision_start|>" + its tokens + "<|vision_end|>", inside the template's own
// pair, exactly as transformers 5 writes it), the vision tower run once per prompt over images and
// videos in prompt order, and the multimodal rotary positions of every token.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/forward_context.h"
#include "model/vision/image_processor.h"
#include "model/vision/video_processor.h"

namespace retain {

class Decoder;    // model/decoder.h
class Tokenizer;  // model/tokenizers/tokenizer.h

struct MultimodalPrompt {
  std::vector<int64_t> ids;   // image placeholders expanded
  at::Tensor rope_positions;  // (3, T) int64
  int64_t rope_delta = 0;     // what decoded tokens add to their position (mrope.h)
  at::Tensor visual_embeds;   // (image + video tokens, d), in prompt order
  std::vector<at::Tensor> deepstack;
  int64_t image_tokens = 0, video_tokens = 0;
  // Mark the rows of visual_embeds in `ids` (-1: none).
  int64_t image_token_id = -1, video_token_id = -1;
  bool visual(int64_t id) const {
    return id >= 0 && (id == image_token_id || id == video_token_id);
  }
};

// Each single `image_token_id` in `ids` becomes grids[i].tokens(merge) copies, in order; the
// number of placeholders must equal the number of grids.
std::vector<int64_t> expand_image_placeholders(const std::vector<int64_t>& ids,
                                               int64_t image_token_id,
                                               const std::vector<ImageGrid>& grids, int64_t merge);

// The most patches one pass of the vision tower takes (before merging: 4 per language-model
// token). A video with more runs in passes of whole temporal groups.
inline constexpr int64_t kTowerPatchesPerPass = 16384;

// `ids`: the tokenized prompt with one placeholder per image and per video. `tokenizer` writes
// Qwen3-VL's video timestamps (needed only then). Errors say what does not match (a text-only
// model, placeholder count vs images or videos).
MultimodalPrompt prepare_multimodal_prompt(const Decoder& model, const std::vector<int64_t>& ids,
                                           const std::vector<ProcessedImage>& images,
                                           const std::vector<ProcessedVideo>& videos = {},
                                           const Tokenizer* tokenizer = nullptr,
                                           int64_t tower_patches_per_pass = kTowerPatchesPerPass);

// The ids with every image and video placeholder expanded (what tokenize --image/--video shows)
// and the vision spans in prompt order (model/vision/mrope.h).
struct ExpandedPrompt {
  std::vector<int64_t> ids;
  std::vector<VisionSpan> spans;
  std::vector<int64_t> order;  // per image/video in prompt order: image i as i, video j as -1 - j
};
ExpandedPrompt expand_vision_placeholders(const ModelConfig& config,
                                          const std::vector<int64_t>& ids,
                                          const std::vector<ImageGrid>& images,
                                          const std::vector<ProcessedVideo>& videos,
                                          const Tokenizer* tokenizer);

// Qwen's vision blocks, written once per image or video into the prompt text (the chat templates
// of Qwen2-VL, Qwen2.5-VL and Qwen3-VL render an image or a video item exactly so).
inline constexpr const char* kQwenImageBlock = "<|vision_start|><|image_pad|><|vision_end|>";
inline constexpr const char* kQwenVideoBlock = "<|vision_start|><|video_pad|><|vision_end|>";

// The user's text with one vision block per image and per video: in place of each "<image>" and
// "<video>" marker (their counts must equal `images` and `videos`), or, without markers of a
// kind, all of that kind before the text, images first (where the chat templates put items
// listed before the text).
std::string text_with_image_blocks(const std::string& text, size_t images, size_t videos = 0);

// Reads and preprocesses image files with the model directory's preprocessor_config.json.
std::vector<ProcessedImage> load_images(const fs::path& model_dir,
                                        const std::vector<std::string>& paths);

// A row without images in a batch that has some: plain positions on every axis.
MultimodalPrompt text_only_prompt(const std::vector<int64_t>& ids);

// Several rows, left-padded to `width` columns (every row has a prompt: text_only_prompt for rows without images): the
// decoder's inputs for columns [begin, begin + len), and for decode steps (rope_delta only).
class BatchMultimodal {
 public:
  BatchMultimodal(const std::vector<std::shared_ptr<const MultimodalPrompt>>& rows,
                  const std::vector<int64_t>& starts, int64_t width, at::Device device);
  MultimodalInputs columns(int64_t begin, int64_t len) const;
  const MultimodalInputs& decode_step() const { return decode_; }

 private:
  at::Tensor rope_positions_;  // (3, B, width)
  at::Tensor embed_index_;     // (B, width): row of visual_embeds_, -1 for text
  at::Tensor visual_embeds_;
  std::vector<at::Tensor> deepstack_;
  MultimodalInputs decode_;
};

}  // namespace retain
