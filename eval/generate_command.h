// `retain generate`: one prompt, a file of prompts (one batch) or ids, under an eviction policy;
// prints the text (or JSON with ids, rates and KV bytes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "eval/sweep.h"
#include "model/prompt.h"
#include "model/vision/video_options.h"

namespace retain {

struct GenerateCommandOptions {
  ModelFlags model;
  ChatFlags chat;
  std::optional<std::string> prompt;
  std::optional<std::string> prompt_ids;    // "1,2,3"
  std::optional<std::string> prompts_file;  // one prompt per line, generated as one batch
  std::vector<std::string> images;          // --image (vision-language models), in order
  std::vector<std::string> videos;          // --video: files or directories of frames, in order
  VideoOptions video;                       // --fps, --max-frames, --video-max-pixels, --frames-fps
  std::vector<std::string> stops;           // stop strings
  int64_t max_new_tokens = 64;
  double temperature = 0.0;
  double top_p = 1.0;
  int64_t top_k = 0;  // 0: off
  uint64_t seed = 0;
  bool ignore_eos = false;
  bool keep_special_tokens = false;  // special tokens in the text (never the one that stopped it)
  bool json = false;
  std::string policy = "full";  // eviction policy spec (`retain policies`)
  double budget = 0;            // entries per KV head, or a fraction of the prompt below 1
  std::string gates;            // gate file for trimkv / dbtrimkv
  int64_t chunk = 0;            // prefill chunk (0: the whole prompt at once)
};

int run_generate_command(const GenerateCommandOptions& options);

}  // namespace retain
