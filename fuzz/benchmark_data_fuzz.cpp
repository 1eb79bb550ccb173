// libFuzzer target: a benchmark's JSONL data file as `retain eval` reads it, the same bytes given
// to every reader (eval/benchmarks/data_files.h: dialogue, LongBench v2, MMStar; eval/math:
// GSM8K, MATH-500, AIME). Each reader either returns records whose fields it promised, or throws
// retain::Error; nothing else escapes (JSON library exceptions included).
#include "core/error.h"
#include "eval/benchmarks/data_files.h"
#include "eval/math/math_data.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retain;
  const fs::path file = fuzz::write_input("data.jsonl", data, size);
  try {
    for (const DialogueRecord& d : read_dialogue_file(file.string(), 0))
      fuzz::require(!d.turns.empty());
  } catch (const Error&) {
  }
  try {
    for (const Json& r : read_longbench_v2_file(file.string()))
      fuzz::require(r.is_object() && r["context"].is_string() && r["answer"].is_string());
  } catch (const Error&) {
  }
  try {
    read_mmstar_jsonl(file);
  } catch (const Error&) {
  }
  for (const MathBenchmark b :
       {MathBenchmark::kGsm8k, MathBenchmark::kMath500, MathBenchmark::kAime}) {
    try {
      for (const MathProblem& p : load_math_problems(file, b, 0))
        fuzz::require(!p.problem.empty() && !p.gold.empty());
    } catch (const Error&) {
    }
  }
  return 0;
}
