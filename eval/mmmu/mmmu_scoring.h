// MMMU's answer extraction and scoring, equal to the official evaluation (MMMU's
// mmmu/utils/eval_utils.py), quirks included:
//   multiple choice  "(B)" anywhere wins over " B " (the response padded with spaces); failing
//                    both, an option's text in a response of more than 5 words; several
//                    candidates: the one occurring last; none: a draw from Python's `random`
//                    seeded once with 42 for the whole run (so the order of questions matters)
//   open answers     the tail after the last key phrase ("is ", "so ", "answer ", ... and "=" in
//                    the last line) of each line, plus every number in it; numbers normalised to
//                    round(float, 2), text lowercased (one character padded with a space); a
//                    prediction is right when a number equals a gold number or a gold text is a
//                    substring of a predicted text
//   accuracy         per subject, then the instance-weighted mean over subjects and disciplines
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/json.h"

namespace retain {

// Python's `random` module (MT19937, seeded from an int as random.seed(n) does), for the draw
// the official parser makes when a response names no option.
class PythonRandom {
 public:
  explicit PythonRandom(uint64_t seed);
  // random.choice over n items: the index drawn (_randbelow by rejection on getrandbits).
  int64_t choice_index(int64_t n);

 private:
  uint32_t next();
  uint32_t state_[624];
  int index_ = 624;
};

// A normalised open-answer prediction: a number (rounded to 2 decimals) or lowercased text.
using OpenValue = std::variant<double, std::string>;

// The letter the official parser takes from a multiple-choice response. `choices` are the letters
// (A, B, ...), `options` their texts in the same order.
std::string parse_multi_choice_response(const std::string& response,
                                        const std::vector<std::string>& choices,
                                        const std::vector<std::string>& options,
                                        PythonRandom& random);
// Whether the official parser had to draw (no candidate at all): callers that must reproduce the
// official draws run every response through parse_multi_choice_response in the official order.

// The official parse_open_response: the normalised predictions (a set; order unspecified).
std::vector<OpenValue> parse_open_response(const std::string& response);

// normalize_str: a number (Python's float() syntax after removing commas) -> round(x, 2); else
// lowercased text, a single character padded as [" c", "c "].
std::vector<OpenValue> normalize_open_answer(const std::string& text);
// Python's float() of `text` (whitespace, sign, underscores, inf/nan, Unicode digits), or nullopt.
std::optional<double> python_float(const std::string& text);

bool eval_multi_choice(const std::vector<std::string>& gold, const std::string& prediction);
bool eval_open(const std::vector<std::string>& gold, const std::vector<OpenValue>& prediction);

// A sweep cell's MMMU accuracy from its records in the official order, each {subject,
// question_type, answers, response, and options for multiple choice}: the responses parsed as
// main_parse_and_eval.py parses them (one PythonRandom(42) for the whole cell), judged as its
// evaluate(), and reported as main_eval_only.py prints them: per subject, per discipline
// ("Overall-<discipline>", the instance-weighted mean) and overall, each 100 * round(acc, 3);
// `questions` counts them. `judged` (optional) receives each record's parsed prediction and
// whether it is right.
struct MmmuJudgement {
  std::string parsed;  // the letter, or the open predictions joined by " | "
  bool correct = false;
};
Json mmmu_metrics(const std::vector<Json>& records, const std::function<std::string(size_t)>& where,
                  std::vector<MmmuJudgement>* judged = nullptr);

// MMMU's 30 subjects by discipline (data_utils.py DOMAIN_CAT2SUB_CAT), for the table.
const std::map<std::string, std::vector<std::string>>& mmmu_disciplines();

}  // namespace retain
