// `retain bench vision`: what images cost a vision-language model, per image size: preprocessing
// (decode excluded: the image is made in memory), the vision tower, and the prefill of a prompt
// holding the image (decoder only, and end to end with the tower), in ms and tokens/s. With
// --video, per clip instead: decoding + sampling + preprocessing (frames/s of the clip's sampled
// frames), the tower (frames/s) and the prefill of a prompt holding the video (tokens/s).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/bench_model.h"
#include "model/vision/video_options.h"

namespace retain {

struct BenchVisionOptions {
  BenchModelOptions model;                                   // preset default: qwen3-vl-4b
  std::vector<std::string> sizes = {"448x448", "1024x768"};  // WxH
  std::vector<std::string> videos;  // clips timed instead of the sizes (decoding included)
  VideoOptions video;
  int64_t text_tokens = 64;  // text around the image in the prompt
  int repeat = 3;            // timed runs (best reported) after one warm-up
  bool json = false;
};

int run_bench_vision_command(const BenchVisionOptions& options);

}  // namespace retain
