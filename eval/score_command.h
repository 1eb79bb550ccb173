// `retain eval score --benchmark longbench|longbench-v2|mmmu|mmstar|math|ruler --predictions FILE
// [--e] [--out DIR]`:
// recomputes scores from a predictions.jsonl without a model, in the shared scores schema, with
// the aggregation the sweeps use; each benchmark's part is its entry in
// eval/benchmarks/scoring.h.
//   longbench:     lines {pred, answers, all_classes, dataset[, length, policy, budget]};
//                  LongBench's own pred files (named <dataset>.jsonl, no dataset field) work as
//                  they are; per dataset round(100 * mean, 2) and their average; --e adds
//                  LongBench-E buckets by `length` (<4000, <8000, else; numpy rounding)
//   longbench-v2:  lines {response or pred, answer, difficulty, length[, policy, budget]}; the
//                  answer is `The correct answer is (X)` (then without parentheses) after removing
//                  '*'; accuracy overall / easy / hard / short / medium / long, round(100 * acc, 1)
//   mmmu:          lines {subject, question_type, answers, response, options[, policy, budget]}
//                  (retain's MMMU records); parsed and judged as the official eval_utils, in the
//                  official subject order (mmmu_metrics)
//   mmstar:        lines {category, l2_category, answer, response[, policy, budget]}
//                  (mmstar_metrics)
//   math:          retain's eval math records {id, sample, math_benchmark, gold, response,
//                  new_tokens, truncated[, policy, budget]}, graded anew (math_metrics)
//   ruler:         retain's eval ruler records {id, task, length, score[, policy, budget,
//                  peak_kv_bytes, max_attended_entries]}; the sweep's metrics, "ruler" and "niah"
//                  with stratified-bootstrap 95% intervals and, beside the full cache, paired
//                  differences to it (eval/bootstrap.h)
#pragma once

#include <string>

namespace retain {

struct ScoreCommandOptions {
  std::string benchmark;
  std::string predictions;
  bool e = false;
  std::string out;  // default: the predictions file's directory
};

int run_score_command(const ScoreCommandOptions& options);

}  // namespace retain
