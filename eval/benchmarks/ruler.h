// `retain eval ruler`: RULER's 13 tasks (data/ruler.h) generated with the model's tokenizer at each
// --lengths value, under every requested policy and budget, scored with RULER's string matching.
// scores.json holds per (policy, budget) the mean of the task scores ("ruler", RULER's and
// kvpress's headline), each task's score, and with several lengths each length's mean and each
// (task, length); DIR/leaderboard.csv lays the same out as kvpress's RULER leaderboard (dataset,
// data_dir, model, method, compression_ratio, score, then the tasks).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/sweep.h"
#include "model/prompt.h"

namespace retain {

struct RulerEvalOptions {
  SweepSettings sweep = sweep_defaults(2048);  // model, policies, budgets, gates, chunk, batch, out
  ChatFlags chat;
  std::vector<int64_t> lengths = {4096};
  std::vector<std::string> tasks;  // empty: every task the sources allow
  int64_t samples = 50;            // per task and length (RULER and kvpress: 500)
  uint64_t seed = 42;
  std::string essays, squad, hotpotqa;
  // keep (the default, kvpress's setting): the context is compressed once and the question and
  // answer prefix are kept on top; evict: they are part of the budgeted stream.
  std::string question_mode = "keep";
};

int run_ruler_eval(const RulerEvalOptions& options);

}  // namespace retain
