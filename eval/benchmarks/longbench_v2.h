// `retain eval longbench-v2 --data FILE`: LongBench v2 multiple choice under eviction policies.
// The data is the official release (a JSON array or JSONL of {_id, difficulty, length, question,
// choice_A..D, answer, context}); the prompt template is the official one from the LongBench
// checkout (`--template`, default prompts/0shot.txt next to the data file), with $DOC$, $Q$ and
// $C_A$..$C_D$ filled in. As the official pred.py: the prompt's tokens are middle-truncated to
// --max-length, the chat template is applied, 128 new tokens are generated; scored as
// `retain eval score --benchmark longbench-v2` scores the predictions (longbench_v2_metrics).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/json.h"
#include "eval/sweep.h"
#include "model/prompt.h"

namespace retain {

struct LongBenchV2Options {
  SweepSettings sweep = sweep_defaults(2048);  // model, policies, budgets, gates, chunk, batch, out
  ChatFlags chat;
  std::string data;
  std::string template_file;
  int64_t max_length = 0;  // 0: the model's max_position_embeddings
  int64_t max_new_tokens = 128;
  int64_t limit = 0;
};

int run_longbench_v2_eval(const LongBenchV2Options& options);

// LongBench v2's accuracy of one (policy, budget), round(100 * acc, 1): overall, easy / hard,
// short / medium / long (other lengths count as long). A record holds answer, difficulty, length
// and response (the answer extracted from it) or pred; where(i) names record i in errors. The
// sweep and `eval score` both score with it.
Json longbench_v2_metrics(const std::vector<Json>& records,
                          const std::function<std::string(size_t)>& where);

// Whether one such record is answered right (the choice extracted from its response, or its pred,
// equals its answer): what the accuracy counts, and what a sweep pairs with the full cache's.
bool longbench_v2_correct(const Json& record, const std::string& where);

// LongBench v2's answer extraction: `The correct answer is (X)`, then without parentheses, after
// removing '*'; "" when nothing matches.
std::string extract_choice(const std::string& response);

}  // namespace retain
