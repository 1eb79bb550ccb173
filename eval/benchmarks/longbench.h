// `retain eval longbench --data DIR`: LongBench (v1 and LongBench-E) generation under eviction
// policies, from the user's LongBench directory (never copied into this repository):
//   DIR/data/<dataset>.jsonl (or <dataset>_e.jsonl with --e), DIR/config/dataset2prompt.json,
//   DIR/config/dataset2maxlen.json.
// As LongBench's pred.py: the prompt template filled with the record's fields; prompts longer than
// --max-length tokens keep their first and last max_length/2 tokens (decoded and re-tokenized);
// the model's chat template except for trec, triviaqa, samsum, lsht, lcc, repobench-p; greedy
// decoding for dataset2maxlen tokens; samsum also stops at a newline. Default tasks: the 16 English
// and code tasks (13 with --e). Predictions go to DIR/predictions.jsonl (resumable) and are scored
// with eval/metrics (scores.json/csv, plot.png, config.yaml).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/json.h"
#include "eval/benchmarks/prompt_format.h"
#include "eval/sweep.h"
#include "model/prompt.h"

namespace retain {

struct LongBenchOptions {
  SweepSettings sweep = sweep_defaults(2048);  // model, policies, budgets, gates, chunk, batch, out
  ChatFlags chat;
  std::string data_dir;
  std::vector<std::string> datasets;  // empty: the default set
  bool e = false;
  int64_t max_length = 0;  // 0: the model's max_position_embeddings
  int64_t limit = 0;
  // The prompt's part after {context} is never evicted while the prompt is read; predictions
  // record where it starts (question_start; null where middle truncation cut into it).
  bool protect_question = false;
};

int run_longbench_eval(const LongBenchOptions& options);

// LongBench's scores of one (policy, budget), as the official eval.py: per dataset
// round(100 * mean, 2) and their average ("avg"); with `e`, LongBench-E buckets ("<dataset>/0-4k",
// numpy rounding) of the records with a numeric `length`. A record holds dataset, pred, answers
// and optionally all_classes and length; where(i) names record i in errors. The sweep and
// `eval score` both score with it.
Json longbench_metrics(const std::vector<Json>& records, bool e,
                       const std::function<std::string(size_t)>& where);

}  // namespace retain
