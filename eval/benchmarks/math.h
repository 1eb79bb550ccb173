// `retain eval math --data FILE --benchmark gsm8k|math500|aime`: reasoning with long generations
// under eviction, as the learned-eviction papers report it (AIME 24/25, MATH-500, GSM8K; budgets of
// 64-4,096 entries while up to 32k tokens are generated).
//   data      the releases' layouts (eval/math/math_data.h)
//   prompt    the problem, then "\nPlease reason step by step, and put your final answer within
//             \boxed{}." (--instruction replaces it), as the one user message of the model's chat
//             template (--system, --no-thinking pass through); --samples N generations per
//             problem, sampled with --temperature / --top-p / --top-k, sample s with seed
//             --seed + s (its own generator: the same tokens in any batch, and on resume)
//   grading   eval/math/math_grading.h: the last \boxed{} (gsm8k: then "#### N", the last
//             number), MATH's is_equiv or equal exact numbers; AIME as integers
//   scores    pass@1 (mean over samples, 95% interval over problems), maj@N, the share of
//             unparsed and of truncated generations, mean / max generated tokens; each record
//             keeps its response, answer, length and the budget's bound (the most entries a
//             query read per head)
// A budget is best given in entries (--budget 512): a fraction is a share of the prompt, which
// here is short beside what is generated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/math_conversation.h"  // kMathInstruction: training and evaluation prompts alike
#include "eval/sweep.h"
#include "model/prompt.h"

namespace retain {

struct MathOptions {
  // model, policies, budgets, gates, chunk, batch, out, and the sampling: sweep.temperature (0:
  // greedy, then one sample), sweep.top_p, sweep.top_k
  SweepSettings sweep = sweep_defaults(512);
  ChatFlags chat;
  std::string data;
  std::string benchmark;  // gsm8k | math500 | aime
  std::string instruction = kMathInstruction;
  int64_t samples = 1;
  uint64_t seed = 0;
  int64_t max_new_tokens = 32768;
  int64_t limit = 0;
};

int run_math_eval(const MathOptions& options);

}  // namespace retain
