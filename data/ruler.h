// RULER (Hsieh et al., 2024; NVIDIA/RULER): its 13 synthetic tasks generated at a target length in
// the model's own tokens, the way RULER's scripts build them (templates, needles, haystacks,
// one-shot examples, length fitting by binary search so that prompt + answer budget fits), with
// retain's own seeded random streams and word lists:
//   niah_single_1/2/3, niah_multikey_1/2/3, niah_multivalue, niah_multiquery   needles in a
//       haystack (the repeated noise sentences, essays from the user's copy, or distractor
//       needles), keys of words / numbers / uuids, values of numbers / uuids
//   vt    variable tracking: a chain of 5 assignments hidden in noise, one worked example first
//   cwe   common words extraction from a numbered list (one worked example first)
//   fwe   frequent words extraction from a Zipf-distributed coded text
//   qa_1 / qa_2   a question over its gold paragraph among distractors (SQuAD v2 / HotpotQA from
//       the user's copy)
// The essay tasks use the noise haystack when no essays are given (recorded as such). Scoring is
// RULER's: string_match_all (the fraction of references found in the prediction) for every task
// but qa, string_match_part (any reference found) for qa; case-insensitive substrings.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/fs.h"

namespace retain {

// A question and its gold answers over its gold paragraphs (SQuAD: one paragraph; HotpotQA: the
// question's ten paragraphs).
struct RulerQa {
  std::string question;
  std::vector<std::string> answers;
  std::vector<std::string> gold;   // documents holding the answer
  std::vector<std::string> other;  // same-article paragraphs tried first as distractors (SQuAD)
};

// What the user brings: essays for the essay haystack (a text file, or a JSON object with "text"
// as RULER's PaulGrahamEssays.json), SQuAD v2.0 dev and HotpotQA dev distractor files.
struct RulerSources {
  std::vector<std::string> essay_words;  // empty: the essay tasks use the noise haystack
  std::vector<RulerQa> squad, hotpotqa;
  std::vector<std::string> squad_docs, hotpotqa_docs;  // every paragraph, deduplicated and sorted
};
RulerSources read_ruler_sources(const std::string& essays, const std::string& squad,
                                const std::string& hotpotqa);

struct RulerSample {
  std::string id;  // "<task>-<length>-<index>"
  std::string task;
  int64_t length = 0;  // the target: prompt tokens + max_new_tokens fit in it
  // The prompt is context + question + answer_prefix (RULER's `input` + `answer_prefix`); the
  // context is what kvpress compresses (everything before the final question).
  std::string context, question, answer_prefix;
  std::vector<std::string> outputs;  // the references
  int64_t max_new_tokens = 0;
  std::string haystack;  // niah / vt: noise | essay | needle (what was used)
  // The passages of the context that hold the answer, in context order: niah the queried keys'
  // needles, vt the chain's assignments, qa the gold documents; none for cwe and fwe, whose
  // answer is the whole list. Each occurs in the context (a depth-vs-recall analysis finds them).
  std::vector<std::string> needles;

  std::string prompt() const { return context + question + answer_prefix; }
};

// The 13 tasks in RULER's order; `ruler_task_available` says whether `sources` allows one (qa
// needs its data set).
const std::vector<std::string>& ruler_task_names();
bool ruler_task_available(const std::string& task, const RulerSources& sources);
// RULER's answer budget of a task: niah 128, vt 30, cwe 120, fwe 50, qa 32.
int64_t ruler_max_new_tokens(const std::string& task);

// `count` samples of `task` at `length` tokens as `count_tokens` counts them (the model's
// tokenizer, no special tokens). Sample i depends only on (seed, task, length, i).
std::vector<RulerSample> make_ruler(const std::string& task, int64_t length, int64_t count,
                                    uint64_t seed,
                                    const std::function<int64_t(const std::string&)>& count_tokens,
                                    const RulerSources& sources);

// RULER's prediction clean-up: strip, control characters (0x00-0x1f) become '\n', strip again.
std::string ruler_postprocess(const std::string& prediction);
// One sample's score in [0, 1]: the fraction of `references` found in the prediction (`all`), or
// whether any is (`part`, the qa tasks). Case-insensitive (ASCII) substring tests.
double ruler_string_match(const std::string& prediction, const std::vector<std::string>& references,
                          bool all);
bool ruler_uses_match_part(const std::string& task);

}  // namespace retain
