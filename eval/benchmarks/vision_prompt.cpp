#include "eval/benchmarks/vision_prompt.h"

#include "core/error.h"

namespace retain {

void check_budget_scope(const std::string& budget_scope, const std::vector<double>& budgets,
                        const std::string& command) {
  RETAIN_CHECK(budget_scope == "all" || budget_scope == "images", command, ": --budget-scope '",
               budget_scope, "'; expected all or images");
  for (double b : budgets)
    RETAIN_CHECK(budget_scope == "all" || b >= 1, command,
                 ": --budget-scope images takes budgets in entries per head (>= 1), found ", b);
}

VisionPromptBuilder::VisionPromptBuilder(const EvalModel& m, const std::string& model_dir,
                                         const ChatFlags& chat, int64_t max_pixels,
                                         const std::string& budget_scope,
                                         const std::vector<double>& budgets,
                                         const std::string& command)
    : chat_flags_(chat), images_only_budget_(budget_scope == "images") {
  check_budget_scope(budget_scope, budgets, command);
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
  processor_family_ = m.model->config().multimodal->vision.family;
  if (max_pixels > 0) {
    RETAIN_CHECK(max_pixels >= processor_.min_pixels, command, ": --max-pixels ", max_pixels,
                 " is below the processor's min_pixels ", processor_.min_pixels);
    processor_.max_pixels = max_pixels;
  }
}

GenerationRequest VisionPromptBuilder::request(const std::string& text,
                                               const std::vector<at::Tensor>& images,
                                               const UnitContext& context, int64_t max_new_tokens,
                                               const std::vector<ProcessedVideo>& videos) const {
  const Tokenizer& tokenizer = context.tokenizer;
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
  auto prompt = std::make_shared<MultimodalPrompt>(
      prepare_multimodal_prompt(context.model, ids, processed, videos, &tokenizer));
  GenerationRequest r;
  if (images_only_budget_)
    r.budget_extra =
        static_cast<int64_t>(prompt->ids.size()) - prompt->image_tokens - prompt->video_tokens;
  r.prompt = prompt->ids;
  r.multimodal = std::move(prompt);
  r.max_new_tokens = max_new_tokens;
  return r;
}

void VisionPromptBuilder::use_videos(const std::string& model_dir, const VideoOptions& options) {
  video_options_ = options;
  video_processor_ =
      apply_video_options(VideoProcessorConfig::load(model_dir, processor_family_), options);
}

ProcessedVideo VisionPromptBuilder::video(const std::string& path) const {
  RETAIN_CHECK(video_processor_.has_value(), "VisionPromptBuilder: use_videos() first");
  return preprocess_video(path, *video_processor_, video_options_);
}

PlotSpec accuracy_plot(const std::string& title, const std::vector<std::string>& groups) {
  std::vector<PlotPanel> panels = {{"overall", "overall"}};
  for (const auto& g : groups) panels.push_back({g, g});
  return {title, "accuracy (%)", panels, "peak_kv_bytes", true};
}

std::vector<std::string> accuracy_columns(const std::vector<std::string>& groups) {
  std::vector<std::string> columns = {"overall"};
  columns.insert(columns.end(), groups.begin(), groups.end());
  columns.push_back("peak_kv_bytes");
  return columns;
}

Json VisionPromptBuilder::config() const {
  Json j = {{"chat", chat_.has_value()},
            {"min_pixels", processor_.min_pixels},
            {"max_pixels", processor_.max_pixels},
            {"budget_scope", images_only_budget_ ? "images" : "all"}};
  if (video_processor_) {
    const VideoProcessorConfig& v = *video_processor_;
    j["video"] = {{"sample_frames", v.do_sample_frames}, {"fps", v.fps ? Json(*v.fps) : Json()},
                  {"min_frames", v.min_frames},          {"max_frames", v.max_frames},
                  {"min_pixels", v.min_pixels},          {"max_pixels", v.max_pixels}};
  }
  return j;
}

Json vision_record_means(const std::vector<Json>& records) {
  double peak = 0, image_tokens = 0, video_tokens = 0;
  bool videos = false;
  for (const auto& r : records) {
    peak += r.at("peak_kv_bytes").get<double>();
    image_tokens += r.at("image_tokens").get<double>();
    if (r.contains("video_tokens")) {
      videos = true;
      video_tokens += r.at("video_tokens").get<double>();
    }
  }
  const double n = records.empty() ? 1.0 : static_cast<double>(records.size());
  Json means = {{"peak_kv_bytes", peak / n}, {"image_tokens", image_tokens / n}};
  if (videos) means["video_tokens"] = video_tokens / n;
  return means;
}

}  // namespace retain
