#include "eval/benchmarks/vision_prompt.h"

#include "core/error.h"

namespace retain {

VisionPromptBuilder::VisionPromptBuilder(const EvalModel& m, const std::string& model_dir,
                                         const ChatFlags& chat, int64_t max_pixels,
                                         const std::string& command)
    : chat_flags_(chat) {
  RETAIN_CHECK(m.model->config().multimodal != nullptr, command, ": ", model_dir, " is ",
               m.model->config().model_type,
               ", a text-only model; this benchmark needs a vision-language model (qwen2_5_vl, "
               "qwen3_vl)");
  RETAIN_CHECK(!(chat.chat && chat.no_chat), "--chat and --no-chat exclude each other");
  const bool use_chat =
      chat.chat || (!chat.no_chat && (has_chat_template(model_dir) || !chat.chat_template.empty()));
  RETAIN_CHECK(use_chat || !chat.system, "--system needs the chat template (drop --no-chat)");
  if (use_chat) chat_ = load_chat_template(model_dir, chat.chat_template);
  processor_ = ImageProcessorConfig::load(model_dir);
  if (max_pixels > 0) {
    RETAIN_CHECK(max_pixels >= processor_.min_pixels, command, ": --max-pixels ", max_pixels,
                 " is below the processor's min_pixels ", processor_.min_pixels);
    processor_.max_pixels = max_pixels;
  }
}

std::shared_ptr<const MultimodalPrompt> VisionPromptBuilder::build(
    const std::string& text, const std::vector<at::Tensor>& images, const Decoder& model,
    const Tokenizer& tokenizer) const {
  std::vector<ProcessedImage> processed;
  for (const auto& rgb : images) processed.push_back(preprocess_image(rgb, processor_));
  std::vector<int64_t> ids;
  if (chat_) {
    std::vector<ChatMessage> messages;
    if (chat_flags_.system) messages.push_back({"system", *chat_flags_.system});
    messages.push_back({"user", text});
    ChatOptions options;
    options.enable_thinking = !chat_flags_.no_thinking;
    ids = tokenizer.encode(chat_->render(messages, options));
  } else {
    ids = tokenizer.encode_prompt(text);
  }
  return std::make_shared<MultimodalPrompt>(prepare_multimodal_prompt(model, ids, processed));
}

Json VisionPromptBuilder::config() const {
  return {{"chat", chat_.has_value()},
          {"min_pixels", processor_.min_pixels},
          {"max_pixels", processor_.max_pixels}};
}

Json vision_record_means(const std::vector<Json>& records) {
  double peak = 0, image_tokens = 0;
  for (const auto& r : records) {
    peak += r.at("peak_kv_bytes").get<double>();
    image_tokens += r.at("image_tokens").get<double>();
  }
  const double n = records.empty() ? 1.0 : static_cast<double>(records.size());
  return {{"peak_kv_bytes", peak / n}, {"image_tokens", image_tokens / n}};
}

}  // namespace retain
