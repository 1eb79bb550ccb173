// What the vision-language benchmarks (MMMU, MMStar, Video-MME) share: the model must take images
// (and videos); the user's message (with Qwen's vision block where each image or video goes)
// goes through the model's chat template (--chat/--no-chat/--system/--no-thinking as everywhere);
// images are preprocessed with the model's preprocessor_config.json (--max-pixels lowers its
// max_pixels), videos with its video processor settings (--fps, --max-frames,
// --video-max-pixels), and both run through the vision tower once per prompt.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "eval/benchmarks/benchmark.h"
#include "eval/sweep.h"
#include "model/chat_template.h"
#include "model/prompt.h"
#include "model/vision/image_processor.h"
#include "model/vision/multimodal_prompt.h"
#include "model/vision/video_processor.h"

namespace retain {

// Refuses --budget-scope values and budgets that do not go together (before anything loads).
void check_budget_scope(const std::string& budget_scope, const std::vector<double>& budgets,
                        const std::string& command);

class VisionPromptBuilder {
 public:
  // `command` names errors ("eval mmmu"). Checks the model takes images and the flags agree.
  // `budget_scope`: all (the budget bounds every token) | images (it bounds the image tokens:
  // each row's budget grows by its prompt's text tokens, as DBTrimKV's VLM evaluation does).
  VisionPromptBuilder(const EvalModel& model, const std::string& model_dir, const ChatFlags& chat,
                      int64_t max_pixels, const std::string& budget_scope,
                      const std::vector<double>& budgets, const std::string& command);

  // The generation of a user message `text` with one kQwenImageBlock per image and one
  // kQwenVideoBlock per video, in order; `images`: (H, W, 3) uint8 RGB (model/vision/image_io.h).
  // With --budget-scope images the budget bounds the image and video tokens.
  GenerationRequest request(const std::string& text, const std::vector<at::Tensor>& images,
                            const UnitContext& context, int64_t max_new_tokens,
                            const std::vector<ProcessedVideo>& videos = {}) const;

  // Video benchmarks: the model directory's video processor with the run's flags applied.
  void use_videos(const std::string& model_dir, const VideoOptions& options);
  // A video file (or directory of frames) preprocessed with it.
  ProcessedVideo video(const std::string& path) const;

  // config.yaml's fields: chat, min_pixels, max_pixels, budget_scope.
  Json config() const;
  // What a prediction depends on beyond the question, policy and budget (the settings above and
  // `extra`): part of every record's resume key, so a re-run into the same --out with other
  // settings generates anew instead of reusing predictions made under the old ones.
  std::string setting(const std::string& extra) const { return config().dump() + extra; }

 private:
  ChatFlags chat_flags_;
  bool images_only_budget_ = false;
  std::optional<ChatTemplate> chat_;
  ImageProcessorConfig processor_;
  VisionFamily processor_family_ = VisionFamily::kQwen2_5;
  std::optional<VideoProcessorConfig> video_processor_;
  VideoOptions video_options_;
};

// An accuracy benchmark's figures and table: "overall" then `groups` (disciplines, categories),
// and the peak KV bytes.
PlotSpec accuracy_plot(const std::string& title, const std::vector<std::string>& groups);
std::vector<std::string> accuracy_columns(const std::vector<std::string>& groups);

// The means a vision benchmark's cell reports beside its accuracy: peak_kv_bytes, image_tokens
// and (records that have them) video_tokens over the records.
Json vision_record_means(const std::vector<Json>& records);

}  // namespace retain
