// Reading the final answer out of a math solution, each rule as the official code it is named
// after does it (quirks included; checked against that code on the same strings by
// scripts/peers/math_official_cases.py). LibTorch-free.
#pragma once

#include <optional>
#include <string>

namespace retain {

// hendrycks/math, modeling/dataset/util.py `last_boxed_only_string`: from the last "\boxed" (else
// the last "\fbox") through the "}" that brings the count of braces opened since it back to zero,
// nested braces included; nullopt when none does.
std::optional<std::string> last_boxed_only_string(const std::string& text);

// hendrycks/math, modeling/eval_math_gpt.py `remove_boxed`: the text between "\boxed{" and the
// final "}"; nullopt unless `boxed` starts with "\boxed{" and ends with "}" (so "\fbox{5}" and
// "\boxed 5" give nothing, as there).
std::optional<std::string> remove_boxed(const std::optional<std::string>& boxed);

// remove_boxed(last_boxed_only_string(text)): what the MATH evaluation compares.
std::optional<std::string> last_boxed_answer(const std::string& text);

// openai/grade-school-math, grade_school_math/dataset.py `extract_answer`: the first match of
// "#### (\-?[0-9\.\,]+)", commas removed; nullopt where it returns "[invalid]".
std::optional<std::string> gsm8k_extract_answer(const std::string& text);

// The final number, as lm-evaluation-harness's gsm8k task reads it (its "flexible-extract"
// filter: the last match of "(-?[$0-9.,]{2,})|(-?[0-9]+)", then its exact_match's
// regexes_to_ignore: every "," and "$" removed, then one final "."). nullopt when nothing matches.
std::optional<std::string> last_number(const std::string& text);

// The part of a response its answer is read from: what follows its last "</think>" (a thinking
// model's reasoning is not its answer, as lighteval's remove_reasoning_tags has it), else all of
// it (a reasoning cut off by --max-new-tokens is searched whole).
std::string answer_text(const std::string& response);

}  // namespace retain
