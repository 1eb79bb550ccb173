#include "model/vision/bench_vision.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "model/generate.h"
#include "model/tokenizers/tokenizer.h"
#include "model/vision/image_processor.h"
#include "model/vision/multimodal_prompt.h"
#include "model/vision/video_processor.h"
#include "model/vision/vision_tower.h"

namespace retain {

namespace {

std::pair<int64_t, int64_t> parse_size(const std::string& text) {
  int64_t w = 0, h = 0;
  char x = 0;
  std::string rest;
  const int got = std::sscanf(text.c_str(), "%ld%c%ld", &w, &x, &h);
  RETAIN_CHECK(got == 3 && (x == 'x' || x == 'X') && w > 0 && h > 0, "bench vision: --size '", text,
               "' is not WIDTHxHEIGHT (e.g. 448x448)");
  return {w, h};
}

// Seconds of the best of `repeat` runs after one warm-up.
template <typename F>
double best_seconds(int repeat, F&& run) {
  run();
  double best = 1e300;
  for (int i = 0; i < repeat; ++i) {
    auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// The prompt text, <|vision_start|> PLACEHOLDER <|vision_end|>, more text: ids drawn below the
// multimodal token ids' range.
std::vector<int64_t> vision_prompt_ids(const ModelConfig& c, int64_t placeholder,
                                       int64_t text_tokens, at::Generator& generator) {
  std::vector<int64_t> ids;
  const int64_t vocab = std::min<int64_t>(c.vocab_size, c.multimodal->vision_start_token_id);
  auto text = at::randint(0, std::max<int64_t>(vocab, 1), {text_tokens}, generator, at::kLong);
  for (int64_t i = 0; i < text_tokens / 2; ++i) ids.push_back(text[i].item<int64_t>());
  ids.push_back(c.multimodal->vision_start_token_id);
  ids.push_back(placeholder);
  ids.push_back(c.multimodal->vision_end_token_id);
  for (int64_t i = text_tokens / 2; i < text_tokens; ++i) ids.push_back(text[i].item<int64_t>());
  return ids;
}

int bench_videos(const BenchVisionOptions& o, const Decoder& model, at::Generator& generator) {
  const ModelConfig& c = model.config();
  RETAIN_CHECK(!o.model.model_dir.empty(),
               "bench vision: --video needs --model DIR (its video processor settings)");
  const VideoProcessorConfig processor = apply_video_options(
      VideoProcessorConfig::load(o.model.model_dir, c.multimodal->vision.family), o.video);
  // Qwen3-VL's timestamps are text: the tokenizer writes them.
  const auto tokenizer = load_tokenizer(o.model.model_dir);
  Json rows = Json::array();
  for (const auto& path : o.videos) {
    ProcessedVideo video;
    const double preprocess =
        best_seconds(o.repeat, [&] { video = preprocess_video(path, processor, o.video); });
    const auto frames = static_cast<double>(video.frame_indices.size());
    const double vision = best_seconds(o.repeat, [&] {
      model.vision()->forward(video.pixel_values, {video.grid});
      if (model.device().is_cuda())
        at::zeros({1}, at::TensorOptions().device(model.device())).item();
    });
    const auto ids = vision_prompt_ids(c, c.multimodal->video_token_id, o.text_tokens, generator);
    SamplingOptions sampling;
    sampling.max_new_tokens = 1;
    double decoder = 0;
    int64_t prompt_tokens = 0, video_tokens = 0;
    const double end_to_end = best_seconds(o.repeat, [&] {
      auto p = std::make_shared<MultimodalPrompt>(
          prepare_multimodal_prompt(model, ids, {}, {video}, tokenizer.get()));
      prompt_tokens = static_cast<int64_t>(p->ids.size());
      video_tokens = p->video_tokens;
      RowOptions r;
      r.multimodal = p;
      FullKvCache cache(c.num_layers);
      decoder = generate_batch(model, {p->ids}, cache, sampling, {r})[0].prefill_seconds;
    });
    rows.push_back({{"video", path},
                    {"frames", video.frame_indices.size()},
                    {"of_frames", video.total_frames},
                    {"grid", {video.grid.t, video.grid.h, video.grid.w}},
                    {"resized", str_cat(video.resized_width, "x", video.resized_height)},
                    {"video_tokens", video_tokens},
                    {"prompt_tokens", prompt_tokens},
                    {"preprocess_ms", preprocess * 1e3},
                    {"preprocess_frames_per_s", frames / preprocess},
                    {"vision_ms", vision * 1e3},
                    {"vision_frames_per_s", frames / vision},
                    {"prefill_tokens_per_s", static_cast<double>(prompt_tokens) / decoder},
                    {"end_to_end_tokens_per_s",
                     static_cast<double>(prompt_tokens) / (end_to_end + preprocess)}});
  }
  if (o.json) {
    std::cout << Json{{"model", o.model.describe()}, {"rows", rows}}.dump() << std::endl;
    return 0;
  }
  std::printf("%-24s %9s %9s %7s %12s %12s %16s %16s\n", "video", "frames", "resized", "vid tok",
              "read fr/s", "tower fr/s", "prefill tok/s", "with vision tok/s");
  for (const auto& r : rows) {
    std::string name = fs::path(r["video"].get<std::string>()).filename().string();
    std::printf("%-24s %9s %9s %7ld %12.1f %12.1f %16.0f %16.0f\n", name.substr(0, 24).c_str(),
                str_cat(r["frames"].get<int64_t>(), "/", r["of_frames"].get<int64_t>()).c_str(),
                r["resized"].get<std::string>().c_str(), r["video_tokens"].get<int64_t>(),
                r["preprocess_frames_per_s"].get<double>(), r["vision_frames_per_s"].get<double>(),
                r["prefill_tokens_per_s"].get<double>(),
                r["end_to_end_tokens_per_s"].get<double>());
  }
  std::printf(
      "read: decoding, sampling and preprocessing the sampled frames; tower: the vision tower on "
      "them; with vision: read + tower + decoder\n");
  return 0;
}

}  // namespace

int run_bench_vision_command(const BenchVisionOptions& o) {
  RETAIN_CHECK(o.repeat >= 1, "bench vision: --repeat must be >= 1");
  RETAIN_CHECK(o.text_tokens >= 0, "bench vision: --text-tokens must be >= 0");
  c10::InferenceMode guard;
  auto model = load_bench_model(o.model);
  const ModelConfig& c = model->config();
  RETAIN_CHECK(c.multimodal && model->vision() != nullptr, "bench vision: ", o.model.describe(),
               " is ", c.model_type, ", not a vision-language model");
  const ImageProcessorConfig processor = o.model.model_dir.empty()
                                             ? ImageProcessorConfig::for_model(c)
                                             : ImageProcessorConfig::load(o.model.model_dir);
  log_info("bench vision: ", o.model.describe(), " (", c.model_type, "), ",
           c10::toString(model->dtype()), " on ", model->device().str(), ", ",
           at::get_num_threads(), " threads; best of ", o.repeat, " after a warm-up");
  auto generator = at::make_generator<at::CPUGeneratorImpl>(o.model.seed);
  if (!o.videos.empty()) return bench_videos(o, *model, generator);
  Json rows = Json::array();
  for (const auto& size : o.sizes) {
    auto [w, h] = parse_size(size);
    auto rgb = at::randint(0, 256, {h, w, 3}, generator, at::kLong).to(at::kByte);
    ProcessedImage image;
    const double preprocess =
        best_seconds(o.repeat, [&] { image = preprocess_image(rgb, processor); });
    const int64_t tokens = image.grid.tokens(processor.merge_size);
    const double vision = best_seconds(o.repeat, [&] {
      model->vision()->forward(image.pixel_values, {image.grid});
      if (model->device().is_cuda())
        at::zeros({1}, at::TensorOptions().device(model->device())).item();
    });
    // A prompt: text, the image, text; ids drawn below the multimodal token ids' range.
    std::vector<int64_t> ids;
    const int64_t vocab = std::min<int64_t>(c.vocab_size, c.multimodal->vision_start_token_id);
    auto text = at::randint(0, std::max<int64_t>(vocab, 1), {o.text_tokens}, generator, at::kLong);
    for (int64_t i = 0; i < o.text_tokens / 2; ++i) ids.push_back(text[i].item<int64_t>());
    ids.push_back(c.multimodal->vision_start_token_id);
    ids.push_back(c.multimodal->image_token_id);
    ids.push_back(c.multimodal->vision_end_token_id);
    for (int64_t i = o.text_tokens / 2; i < o.text_tokens; ++i)
      ids.push_back(text[i].item<int64_t>());
    auto prompt =
        std::make_shared<MultimodalPrompt>(prepare_multimodal_prompt(*model, ids, {image}));
    RowOptions row;
    row.multimodal = prompt;
    SamplingOptions sampling;
    sampling.max_new_tokens = 1;
    double decoder = 0;
    const double end_to_end = best_seconds(o.repeat, [&] {
      auto p = std::make_shared<MultimodalPrompt>(prepare_multimodal_prompt(*model, ids, {image}));
      RowOptions r;
      r.multimodal = p;
      FullKvCache cache(c.num_layers);
      decoder = generate_batch(*model, {p->ids}, cache, sampling, {r})[0].prefill_seconds;
    });
    const auto prompt_tokens = static_cast<double>(prompt->ids.size());
    Json r = {{"size", size},
              {"grid", {image.grid.t, image.grid.h, image.grid.w}},
              {"resized", str_cat(image.resized_width, "x", image.resized_height)},
              {"image_tokens", tokens},
              {"prompt_tokens", prompt->ids.size()},
              {"preprocess_ms", preprocess * 1e3},
              {"vision_ms", vision * 1e3},
              {"prefill_tokens_per_s", prompt_tokens / decoder},
              {"end_to_end_tokens_per_s", prompt_tokens / (end_to_end + preprocess)}};
    rows.push_back(r);
  }
  if (o.json) {
    std::cout << Json{{"model", o.model.describe()}, {"rows", rows}}.dump() << std::endl;
    return 0;
  }
  std::printf("%-10s %-10s %7s %7s %10s %10s %16s %16s\n", "image", "resized", "img tok", "prompt",
              "prep ms", "vision ms", "prefill tok/s", "with vision tok/s");
  for (const auto& r : rows)
    std::printf("%-10s %-10s %7ld %7ld %10.1f %10.1f %16.0f %16.0f\n",
                r["size"].get<std::string>().c_str(), r["resized"].get<std::string>().c_str(),
                r["image_tokens"].get<int64_t>(), r["prompt_tokens"].get<int64_t>(),
                r["preprocess_ms"].get<double>(), r["vision_ms"].get<double>(),
                r["prefill_tokens_per_s"].get<double>(),
                r["end_to_end_tokens_per_s"].get<double>());
  std::printf(
      "prefill: the decoder alone on the prompt (image tokens included); with vision: "
      "preprocessing + vision tower + decoder\n");
  return 0;
}

}  // namespace retain
