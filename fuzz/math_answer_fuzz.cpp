// libFuzzer target: `eval math`'s grading of a model's response (any bytes a model may write) and
// of a gold answer: reading the answer (boxes, "#### N", the last number), MATH's normalisation,
// exact numbers and the votes never crash, and an answer always equals itself (except for AIME,
// which wants an integer). The first line is the response, the rest the gold answer.
#include "core/error.h"
#include "eval/math/math_answer.h"
#include "eval/math/math_equivalence.h"
#include "eval/math/math_grading.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retain;
  const std::string input = fuzz::as_text(data, size);
  const size_t newline = input.find('\n');
  const std::string response = input.substr(0, newline);
  const std::string gold = newline == std::string::npos ? "" : input.substr(newline + 1);
  for (const auto benchmark :
       {MathBenchmark::kGsm8k, MathBenchmark::kMath500, MathBenchmark::kAime}) {
    const auto answer = extract_math_answer(benchmark, response);
    if (!answer) continue;
    math_answer_correct(benchmark, *answer, gold);
    math_answer_vote_key(benchmark, *answer);
    if (benchmark != MathBenchmark::kAime && !math_answer_correct(benchmark, *answer, *answer))
      __builtin_trap();
  }
  // A number read back from its own vote key is the same number.
  if (const auto number = parse_math_number(gold)) {
    const auto again = parse_math_number(math_vote_key(std::to_string(number->numerator) + "/" +
                                                       std::to_string(number->denominator)));
    if (!again || !(*again == *number)) __builtin_trap();
  }
  return 0;
}
