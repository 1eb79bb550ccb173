// How `retain eval math` grades one response and scores a cell: which answer it reads from a
// response and when that answer equals the gold one, per benchmark, and pass@1 / maj@N over the
// samples of each problem. LibTorch-free (eval/math/math_answer.h, math_equivalence.h hold the
// official rules each step follows).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"

namespace retain {

enum class MathBenchmark { kGsm8k, kMath500, kAime };

// "gsm8k" | "math500" | "aime"; anything else throws naming the three.
MathBenchmark parse_math_benchmark(const std::string& name);
std::string math_benchmark_name(MathBenchmark benchmark);

// The answer a response gives, read from its text after the last "</think>" (answer_text):
//   every benchmark: the last \boxed{...} (MATH's last_boxed_only_string + remove_boxed);
//   gsm8k, failing that: "#### N" (grade-school-math's extract_answer), then the last number
//     (lm-evaluation-harness's flexible-extract);
//   aime, failing that: the last number.
// nullopt: nothing to read, or only blanks (the prediction counts wrong, recorded as unparsed).
std::optional<std::string> extract_math_answer(MathBenchmark benchmark,
                                               const std::string& response);

// Whether `answer` equals `gold`:
//   math500: the MATH dataset's is_equiv, else equal exact numbers (math_answers_equal);
//   gsm8k: the same (GSM8K's golds are numbers: "1,000" = "1000" = "1000.00");
//   aime: both read as integers (AIME's answers are 0-999; "033" = "33"), equal; an answer that is
//     not an integer (after MATH's normalisation: "\$33", "33^\circ") is wrong.
bool math_answer_correct(MathBenchmark benchmark, const std::string& answer,
                         const std::string& gold);

// The key maj@N votes with: equal for answers math_answer_correct would call equal in the usual
// cases (math_vote_key; an integer for aime).
std::string math_answer_vote_key(MathBenchmark benchmark, const std::string& answer);

// A cell's scores from its records (each: the problem's "id", "sample", "response", "gold",
// "new_tokens", "truncated"), graded anew (so `eval score` applies today's rules), in percent:
//   pass@1: the mean over problems of each problem's share of right samples (with N samples the
//     mean over all predictions), with a 95% interval: Wilson's for one sample per problem, else
//     the normal one over the problems' shares (samples of a problem are not independent);
//   maj@N: a problem is right when its most frequent answer (by vote key; ties: the answer seen
//     first; unparsed answers do not vote) is right;
//   unparsed (%), truncated (%: stopped by --max-new-tokens), mean / max generated tokens, and
//   where the records have them the mean peak KV bytes and the most entries a query read per head.
// `where(i)` names record i in errors; records of one problem need not be adjacent.
Json math_metrics(MathBenchmark benchmark, const std::vector<Json>& records,
                  const std::function<std::string(size_t)>& where);

}  // namespace retain
