#include "eval/generate_command.h"

#include <iostream>
#include <sstream>

#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "eval/cache_factory.h"
#include "model/generate.h"
#include "model/vision/multimodal_prompt.h"
#include "model/vision/vision_config.h"

namespace retain {

int run_generate_command(const GenerateCommandOptions& o) {
  RETAIN_CHECK(
      int(o.prompt.has_value()) + int(o.prompt_ids.has_value()) + int(o.prompts_file.has_value()) ==
          1,
      "generate: give exactly one of --prompt, --prompt-ids or --prompts-file");
  const bool text = o.prompt.has_value() || o.prompts_file.has_value();
  RETAIN_CHECK(o.stops.empty() || text, "generate: --stop needs text prompts (a tokenizer)");
  // Qwen3-VL writes a video's timestamps as text: a prompt of ids with a video needs the tokenizer.
  EvalModel m =
      load_eval_model(o.model, o.gates, /*with_tokenizer=*/text || !o.videos.empty(), {o.policy});
  const Decoder& model = *m.model;
  const Tokenizer* tokenizer = m.tokenizer.get();
  std::vector<std::vector<int64_t>> prompts;
  std::vector<RowOptions> rows;
  if (!o.images.empty() || !o.videos.empty()) {
    const char* flag = o.images.empty() ? "--video" : "--image";
    RETAIN_CHECK(model.config().multimodal, "generate: ", flag,
                 " needs a vision-language model (qwen2_5_vl or qwen3_vl); ", o.model.model_dir,
                 " is ", model.config().model_type, ", a text-only model");
    RETAIN_CHECK(!o.prompts_file, "generate: ", flag,
                 " goes with --prompt or --prompt-ids, not --prompts-file");
    std::vector<int64_t> ids =
        o.prompt ? prompt_ids(o.model.model_dir, *tokenizer,
                              text_with_image_blocks(*o.prompt, o.images.size(), o.videos.size()),
                              o.chat)
                 : parse_id_list(*o.prompt_ids, "--prompt-ids");
    const auto videos =
        load_videos(o.model.model_dir, model.config().multimodal->vision.family, o.videos, o.video);
    for (const auto& v : videos)
      log_info(v.where, ": ", v.frame_indices.size(), " of ", v.total_frames, " frames (", v.fps,
               " fps), resized to ", v.resized_width, "x", v.resized_height, ", grid ", v.grid.t,
               "x", v.grid.h, "x", v.grid.w);
    auto prompt = std::make_shared<MultimodalPrompt>(prepare_multimodal_prompt(
        model, ids, load_images(o.model.model_dir, o.images), videos, tokenizer));
    log_info(o.images.size(), " image(s), ", o.videos.size(), " video(s): ", prompt->image_tokens,
             " image and ", prompt->video_tokens, " video tokens of ", prompt->ids.size(),
             " prompt tokens");
    prompts.push_back(prompt->ids);
    RowOptions row;
    row.multimodal = prompt;
    rows.push_back(row);
  } else if (o.prompt) {
    prompts.push_back(prompt_ids(o.model.model_dir, *tokenizer, *o.prompt, o.chat));
  } else if (o.prompts_file) {
    std::istringstream in(read_text_file(*o.prompts_file));
    std::string line;
    while (std::getline(in, line))
      if (!line.empty()) prompts.push_back(prompt_ids(o.model.model_dir, *tokenizer, line, o.chat));
    RETAIN_CHECK(!prompts.empty(), *o.prompts_file, ": no prompts (one per line)");
  } else {
    prompts.push_back(parse_id_list(*o.prompt_ids, "--prompt-ids"));
  }
  int64_t longest = 0;
  for (const auto& p : prompts) {
    longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
    for (int64_t id : p)
      RETAIN_CHECK(id < model.config().vocab_size, "generate: prompt id ", id,
                   " is outside the vocabulary (", model.config().vocab_size, " ids)");
  }

  SamplingOptions sampling;
  sampling.max_new_tokens = o.max_new_tokens;
  sampling.temperature = o.temperature;
  sampling.top_p = o.top_p;
  sampling.top_k = o.top_k;
  sampling.seed = o.seed;
  // config.json's EOS ids, plus the tokenizer's (chat models end turns with it, e.g. <|eot_id|>).
  if (!o.ignore_eos) sampling.stop_ids = stop_ids(model.config(), tokenizer);
  sampling.stop_strings = o.stops;
  if (tokenizer) sampling.detokenize = text_decoder(*tokenizer, /*skip_special=*/true);
  PolicySpec policy = parse_policy(o.policy);
  RETAIN_CHECK(!policy.budgeted() || o.budget > 0, "generate: --policy ", policy.name(),
               " needs --budget");
  const int64_t chunk = o.chunk > 0 ? o.chunk : longest;
  // A fractional budget is relative to the longest prompt of the batch.
  auto cache =
      make_kv_cache(model.config(), policy, o.budget, longest, chunk, m.learned_for(policy));
  sampling.prefill_chunk = chunk;
  auto results = generate_batch(model, prompts, *cache, sampling, rows);
  // --tp: every rank generated the same tokens (the logits are summed over the group); rank 0
  // reports. KV bytes are this rank's slice of the heads. Rank 0 hosts the store: it leaves only
  // once every rank is done with it.
  if (m.world) m.world->shutdown();
  if (!m.leader()) return 0;
  const int64_t peak = cache->peak_bytes();

  for (size_t i = 0; i < results.size(); ++i) {
    const GenerationResult& r = results[i];
    const double decode_rate = r.tokens.size() > 1 && r.decode_seconds > 0
                                   ? static_cast<double>(r.tokens.size() - 1) / r.decode_seconds
                                   : 0.0;
    const double prefill_rate =
        r.prefill_seconds > 0 ? static_cast<double>(prompts[i].size()) / r.prefill_seconds : 0.0;
    std::string output;
    if (tokenizer)
      output = reply_text(*tokenizer, r.tokens, sampling.stop_ids, o.stops, !o.keep_special_tokens);
    if (o.json) {
      Json out = {{"prompt_ids", prompts[i]},
                  {"ids", r.tokens},
                  {"finish_reason", r.finish_reason},
                  {"prefill_tokens_per_s", prefill_rate},
                  {"decode_tokens_per_s", decode_rate},
                  {"policy", o.policy},
                  {"live_kv_bytes", cache->live_bytes()},
                  {"peak_kv_bytes", peak}};
      if (tokenizer) out["text"] = output;
      std::cout << out.dump() << std::endl;
    } else {
      if (tokenizer) {
        std::cout << output << std::endl;
      } else {
        for (size_t k = 0; k < r.tokens.size(); ++k) std::cout << (k ? "," : "") << r.tokens[k];
        std::cout << std::endl;
      }
      log_info("prompt ", prompts[i].size(), " tokens at ", prefill_rate, " tok/s; generated ",
               r.tokens.size(), " tokens at ", decode_rate, " tok/s (", r.finish_reason, "); KV ",
               o.policy, ": live ", cache->live_bytes(), " bytes, peak ", peak);
    }
  }
  return 0;
}

}  // namespace retain
