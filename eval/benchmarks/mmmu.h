// `retain eval mmmu --data DIR`: MMMU under eviction policies, on a vision-language model. The
// questions come from MMMU's parquet release or the JSONL layout (eval/mmmu/mmmu_data.h), in the
// official order; the prompt is the official one (construct_prompt with configs/llava1.5.yaml)
// through the model's chat template, each image where the text says <image N> (--images inline)
// or all before the text with the tags left in it (--images first, lmms-eval's default for
// Qwen-VL). Responses are parsed and scored as the official eval_utils does (mmmu_metrics):
// per subject, per discipline and overall. Image tokens are in the prompt, so every policy
// budgets them with the text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/mmmu/mmmu_data.h"
#include "eval/sweep.h"
#include "model/prompt.h"

namespace retain {

struct MmmuOptions {
  SweepSettings sweep = sweep_defaults(512);  // model, policies, budgets, gates, chunk, batch, out
  ChatFlags chat;
  std::string data;
  std::string split = "validation";
  std::vector<std::string> subjects;  // empty: all 30
  std::string images = "inline";      // inline | first
  int64_t max_pixels = 0;             // 0: preprocessor_config.json's
  std::string budget_scope = "all";   // all | images (vision_prompt.h)
  int64_t max_new_tokens = 128;       // run_llava.py's
  int64_t limit = 0;                  // questions per subject (0: all)
};

int run_mmmu_eval(const MmmuOptions& options);

// The user message of `question` with Qwen's vision block (multimodal_prompt.h) in place of
// each image (`images`: inline | first), and the image numbers in the order the blocks appear.
struct MmmuMessage {
  std::string text;
  std::vector<int> images;
};
MmmuMessage mmmu_message(const MmmuQuestion& question, const std::string& images);

}  // namespace retain
