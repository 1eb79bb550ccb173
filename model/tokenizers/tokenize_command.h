// `retain tokenize` (a text's ids and pieces, or ids back to text) and `retain bench tokenize`
// (encode throughput).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/prompt.h"
#include "model/vision/video_options.h"

namespace retain {

struct TokenizeCommandOptions {
  std::string model_dir;
  std::optional<std::string> text;
  std::optional<std::string> file;
  bool ids_only = false;
  std::optional<std::string> decode;  // comma-separated ids to turn back into text
  bool skip_special = false;          // with decode: drop special tokens (BOS, EOS, ...)
  // The ids a generation prompt gets (no trailing EOS) instead of the tokenizer's full encoding.
  bool as_prompt = false;
  bool explain = false;             // print which pipeline runs and where BOS/EOS come from
  std::vector<std::string> images;  // expand one vision block per image (vision-language models)
  std::vector<std::string> videos;  // and per video (a file or a directory of frames)
  VideoOptions video;
  ChatFlags chat;
};

struct BenchTokenizeOptions {
  std::string model_dir;
  std::string file;
  int repeat = 3;
};

int run_tokenize_command(const TokenizeCommandOptions& options);
// Encode throughput (MB/s) of the model's tokenizer on a file, best of `repeat` runs after one
// warm-up run (which also fills the BPE cache, as it would be in a long job).
int run_bench_tokenize_command(const BenchTokenizeOptions& options);

}  // namespace retain
