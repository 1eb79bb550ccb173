// A prompt with images, made ready for a vision-language decoder: each image's placeholder
// (<|image_pad|>, written once per image by the chat template) repeated once per merged patch as
// transformers' processor does, the vision tower run once per prompt, and the multimodal rotary
// positions of every token.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/forward_context.h"
#include "model/vision/image_processor.h"

namespace retain {

class Decoder;  // model/decoder.h

struct MultimodalPrompt {
  std::vector<int64_t> ids;   // image placeholders expanded
  at::Tensor rope_positions;  // (3, T) int64
  int64_t rope_delta = 0;     // what decoded tokens add to their position (mrope.h)
  at::Tensor visual_embeds;   // (image tokens, d)
  std::vector<at::Tensor> deepstack;
  int64_t image_tokens = 0;
  int64_t image_token_id = -1;  // marks the rows of visual_embeds in `ids`
};

// Each single `image_token_id` in `ids` becomes grids[i].tokens(merge) copies, in order; the
// number of placeholders must equal the number of grids.
std::vector<int64_t> expand_image_placeholders(const std::vector<int64_t>& ids,
                                               int64_t image_token_id,
                                               const std::vector<ImageGrid>& grids, int64_t merge);

// `ids`: the tokenized prompt with one placeholder per image. Errors say what does not match (a
// text-only model, placeholder count vs images).
MultimodalPrompt prepare_multimodal_prompt(const Decoder& model, const std::vector<int64_t>& ids,
                                           const std::vector<ProcessedImage>& images);

// Qwen's vision block, written once per image into the prompt text (the chat templates of
// Qwen2-VL, Qwen2.5-VL and Qwen3-VL render an image item exactly so).
inline constexpr const char* kQwenImageBlock = "<|vision_start|><|image_pad|><|vision_end|>";

// The user's text with one vision block per image: in place of each "<image>" marker (their
// count must equal `images`), or, without markers, all of them before the text (where the chat
// templates put image items listed before the text).
std::string text_with_image_blocks(const std::string& text, size_t images);

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
