// `retain eval synthetic`: the seeded synthetic tasks (data/synthetic.h) under every requested
// policy and budget, with one model load for the whole sweep. Writes DIR/predictions.jsonl
// (appended as it goes, so a killed run resumes where it stopped), DIR/scores.json and
// DIR/scores.csv (exact match overall and per task, peak KV bytes, prefill/decode tokens/s) and
// DIR/config.yaml. With `data` the examples come from a task file (one synthetic_to_json record
// per line); `tasks` then selects among the file's tasks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/sweep.h"

namespace retain {

struct SyntheticEvalOptions {
  SweepSettings sweep = sweep_defaults(512);  // model, policies, budgets, gates, chunk, batch, out
  std::vector<std::string> tasks = {"kv", "vars", "needle", "multi"};
  std::string data;    // a task file (retain synth's heldout.jsonl) instead of generating
  int64_t count = 10;  // examples per task
  int64_t context_words = 600;
  uint64_t seed = 0;
  int64_t limit = 0;  // examples per task actually run (0: all)
  int64_t max_new_tokens = 12;
  bool protect_question = false;
  // evict: the question is part of the budgeted stream ("The bound" in docs/evaluation.md);
  // keep: kvpress's semantics, the context alone is compressed to the budget once and the
  // question and generated tokens are kept on top (the budget is a fraction of the context).
  std::string question_mode = "evict";
};

int run_synthetic_eval(const SyntheticEvalOptions& options);

// The answer of a generation: its first line, trimmed.
std::string first_line_trimmed(const std::string& text);

}  // namespace retain
