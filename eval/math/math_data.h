// The math benchmarks as released, read for `retain eval math`:
//   gsm8k    openai/gsm8k's JSONL (or parquet): `question`, `answer` whose "#### N" is the gold
//   math500  HuggingFaceH4/MATH-500's test.jsonl: `problem`, `answer` (else the last \boxed{} of
//            `solution`, the MATH release's layout), `subject`, `level`, `unique_id`
//   aime     AIME 2024 / 2025 as released on the hub, JSONL or parquet: `problem` (or `question`),
//            `answer` (a string or an integer), `id` / `ID` / `problem_idx` when present
// A file, or a directory of *.jsonl / *.parquet files (read in name order). A row without a field
// its layout needs is refused naming the field, the file and the line (or row).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/fs.h"
#include "eval/math/math_grading.h"

namespace retain {

struct MathProblem {
  std::string id;       // the release's id, else the row's index in the data ("0", "1", ...)
  std::string problem;  // the question as the model reads it
  std::string gold;     // the reference answer (gsm8k: the number after "####")
  std::string subject;  // math500's subject and level ("" elsewhere)
  int64_t level = 0;
  std::string where;  // file:line or file row N
};

// At most `limit` problems (0: all); ids must be unique.
std::vector<MathProblem> load_math_problems(const fs::path& data, MathBenchmark benchmark,
                                            int64_t limit = 0);

}  // namespace retain
