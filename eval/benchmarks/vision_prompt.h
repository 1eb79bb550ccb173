// What the vision-language benchmarks (MMMU, MMStar) share: the model must take images; the
// user's message (with Qwen's vision block where each image goes) goes through the model's chat
// template (--chat/--no-chat/--system/--no-thinking as everywhere); images are preprocessed with
// the model's preprocessor_config.json (--max-pixels lowers its max_pixels) and run through the
// vision tower once per prompt.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "eval/sweep.h"
#include "model/chat_template.h"
#include "model/prompt.h"
#include "model/vision/image_processor.h"
#include "model/vision/multimodal_prompt.h"

namespace retain {

class VisionPromptBuilder {
 public:
  // `command` names errors ("eval mmmu"). Checks the model takes images and the flags agree.
  VisionPromptBuilder(const EvalModel& model, const std::string& model_dir, const ChatFlags& chat,
                      int64_t max_pixels, const std::string& command);

  // `text`: the user's message with one kQwenImageBlock per image, in order; `images`: (H, W, 3)
  // uint8 RGB (model/vision/image_io.h).
  std::shared_ptr<const MultimodalPrompt> build(const std::string& text,
                                                const std::vector<at::Tensor>& images,
                                                const Decoder& model,
                                                const Tokenizer& tokenizer) const;

  // config.yaml's fields: chat, min_pixels, max_pixels.
  Json config() const;

 private:
  ChatFlags chat_flags_;
  std::optional<ChatTemplate> chat_;
  ImageProcessorConfig processor_;
};

// The means a vision benchmark's cell reports beside its accuracy: peak_kv_bytes and
// image_tokens over the records.
Json vision_record_means(const std::vector<Json>& records);

}  // namespace retain
