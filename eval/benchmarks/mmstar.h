// `retain eval mmstar --data FILE`: MMStar (1,500 vision-indispensable multiple-choice questions,
// 6 core capabilities x 3 axes) under eviction policies, on a vision-language model.
//   data      the HF release's mmstar.parquet (index, question, image as struct<bytes, path>,
//             answer, category, l2_category, ...), a directory holding it (or HF's converted
//             val/*.parquet, test-*.parquet), or the JSONL layout (mmstar.jsonl: the same fields,
//             image a path relative to the file)
//   prompt    the image, then the question (which lists its options) and "\nAnswer with the
//             option's letter from the given choices directly.", as MMStar's own VLMEvalKit
//             build_prompt and lmms-eval write it, through the model's chat template
//   scoring   MMStar's MMStar_eval: lowercased, stripped, newlines as spaces; right when the
//             answer is the response's first character, or follows "(", "option " or
//             "the answer is " at its start; accuracy per l2 category ("category(l2)"), per
//             category and overall, each correct / count (the official code divides by 250 and
//             1,500, the same on the full set)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json.h"
#include "eval/benchmarks/data_files.h"
#include "eval/sweep.h"
#include "model/prompt.h"

namespace retain {

struct MmstarOptions {
  SweepSettings sweep = sweep_defaults(512);  // model, policies, budgets, gates, chunk, batch, out
  ChatFlags chat;
  std::string data;
  int64_t max_pixels = 0;            // 0: preprocessor_config.json's
  std::string budget_scope = "all";  // all | images (vision_prompt.h)
  int64_t max_new_tokens = 32;
  int64_t limit = 0;
};

int run_mmstar_eval(const MmstarOptions& options);

std::vector<MmstarQuestion> load_mmstar(const fs::path& data, int64_t limit = 0);

// The text after the image.
std::string mmstar_prompt_text(const MmstarQuestion& question);

// MMStar_eval's judgement of one response.
bool mmstar_correct(const std::string& response, const std::string& answer);

// A cell's accuracy (percent, one decimal) from records {category, l2_category, answer,
// response}: overall, per category, per "category(l2)".
Json mmstar_metrics(const std::vector<Json>& records,
                    const std::function<std::string(size_t)>& where);

}  // namespace retain
