// LongBench's metrics, equal to its official definitions (LongBench/metrics.py and the packages it
// uses: `rouge` 1.0.1 and fuzzywuzzy 0.18.0 without python-Levenshtein, i.e. difflib), including
// their quirks:
//   qa_f1           F1 of normalised word multisets (lower, strip ASCII punctuation, drop
//                   a/an/the, split)
//   rouge_l         rouge 1.0.1 "rouge-l" f: sentences split on ".", words on " ", SETS of
//                   distinct words, union of reconstructed LCS words over all sentence pairs; 0
//                   where the package raises (empty text, or an LCS reconstruction deeper than
//                   Python's recursion limit)
//   classification  1/|matched classes| when the answer's class is among the classes named in the
//                   prediction, after the official removal loop (which skips the element after
//                   each removal)
//   retrieval       share of the numbers in the prediction equal to the "Paragraph N" id
//   count           share of the numbers in the prediction equal to the answer
//   code_sim        fuzz.ratio (difflib SequenceMatcher, autojunk) / 100 on the first line
//                   without `, # or //
//   exact_match     trimmed strings equal
// `longbench_score` applies a dataset's metric the way eval.py's scorer() does (first line only for
// trec, triviaqa, samsum, lsht; max over the answers).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace retain {

std::string normalize_answer(const std::string& text);
double qa_f1_score(const std::string& prediction, const std::string& answer);
double rouge_l_score(const std::string& prediction, const std::string& answer);
double classification_score(const std::string& prediction, const std::string& answer,
                            const std::vector<std::string>& all_classes);
double retrieval_score(const std::string& prediction, const std::string& answer);
double count_score(const std::string& prediction, const std::string& answer);
double code_sim_score(const std::string& prediction, const std::string& answer);
int fuzz_ratio(const std::string& a, const std::string& b);
double exact_match_score(const std::string& prediction, const std::string& answer);

// The metric eval.py uses for `dataset`; std::nullopt for datasets retain does not score (the
// Chinese ones, which need jieba).
std::optional<std::string> longbench_metric(const std::string& dataset);

// One prediction's score for `dataset`: max over the answers (0..1).
double longbench_score(const std::string& dataset, const std::string& prediction,
                       const std::vector<std::string>& answers,
                       const std::vector<std::string>& all_classes);

// Python's str.isspace() set (what str.split() and str.strip() remove).
bool python_space(uint32_t code_point);
// str.split() with no argument: runs of whitespace, no empty pieces.
std::vector<std::string> python_split(const std::string& text);
// str.strip() with no argument: Python's whitespace at both ends.
std::string python_strip(const std::string& text);
// str.lower() (simple case mapping through utf8proc).
std::string python_lower(const std::string& text);

// Python's round(x, digits) (correct rounding of the exact binary value, ties to even).
double python_round(double value, int digits);
// numpy's round (rint(x * 10^d) / 10^d), which LongBench-E's scorer applies to numpy floats.
double numpy_round(double value, int digits);
// LongBench-E's length bucket: "0-4k" (< 4000), "4-8k" (< 8000) or "8k+".
const char* longbench_e_bucket(double length);

}  // namespace retain
