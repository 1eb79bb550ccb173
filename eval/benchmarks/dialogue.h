// `retain eval dialogue --data FILE`: multi-turn questions over one shared context (SCBench-style
// records {id, context, multi_turns: [{input, answer}, ...]}, answer a string or a list). The KV
// cache, with its evictions, persists across the turns of a record: turn 1 prefills the context
// and the first question; each later turn appends its question to the same cache.
//   --history own:  the model's own answers stay in the cache before the next question
//   --history gold: each answer is generated on a copy of the cache; the gold answer is what the
//                   conversation continues with
// Exact match (first line), F1 and ROUGE-L (LongBench's definitions) per turn index and overall.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/sweep.h"

namespace retain {

struct DialogueOptions {
  SweepSettings sweep = sweep_defaults(512);  // model, policies, budgets, gates, chunk, batch, out
  std::string data;
  std::string history = "gold";
  int64_t max_new_tokens = 32;
  int64_t limit = 0;
};

int run_dialogue_eval(const DialogueOptions& options);

}  // namespace retain
