#include "eval/benchmarks/mcq_extract.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdint>

#include "model/tokenizers/unicode.h"

namespace retain {

namespace {

using Text = std::vector<uint32_t>;

Text code_points(const std::string& s) {
  Text out;
  for (size_t i = 0; i < s.size();) out.push_back(next_code_point(s, i));
  return out;
}

// Python's str.isspace / str.isalpha on one code point.
bool is_space(uint32_t cp) { return is_unicode_whitespace(cp); }
bool is_alpha(uint32_t cp) {
  switch (utf8proc_category(static_cast<int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return true;
    default:
      return false;
  }
}

// str.strip() (whitespace) or str.strip(c) (that one character).
Text strip(const Text& t, bool (*drop)(uint32_t, uint32_t), uint32_t c) {
  size_t b = 0, e = t.size();
  while (b < e && drop(t[b], c)) ++b;
  while (e > b && drop(t[e - 1], c)) --e;
  return Text(t.begin() + static_cast<std::ptrdiff_t>(b),
              t.begin() + static_cast<std::ptrdiff_t>(e));
}
bool whitespace(uint32_t cp, uint32_t) { return is_space(cp); }
bool same(uint32_t cp, uint32_t c) { return cp == c; }

// str.find / str.rfind of `needle` (from `from`); -1 when absent.
int64_t find(const Text& t, const Text& needle, size_t from = 0) {
  if (needle.size() > t.size()) return -1;
  for (size_t i = from; i + needle.size() <= t.size(); ++i)
    if (std::equal(needle.begin(), needle.end(), t.begin() + static_cast<std::ptrdiff_t>(i)))
      return static_cast<int64_t>(i);
  return -1;
}
int64_t rfind(const Text& t, const Text& needle) {
  if (needle.size() > t.size()) return -1;
  for (size_t i = t.size() - needle.size() + 1; i-- > 0;)
    if (std::equal(needle.begin(), needle.end(), t.begin() + static_cast<std::ptrdiff_t>(i)))
      return static_cast<int64_t>(i);
  return -1;
}

const std::vector<std::string>& answer_phrases() {
  static const std::vector<std::string> kPhrases = {
      "the answer is", "answer is", "the correct answer is", "correct answer is",
      "the best answer is", "best answer is", "the correct option is", "correct option is",
      "the best option is", "best option is", "the choice is", "choice is", "the correct choice is",
      "correct choice is", "i choose", "i select", "i pick", "my answer is", "my choice is",
      // Korean, Chinese, Japanese
      "옵션", "정답은", "답은", "답:", "答案是", "答案为", "选", "答えは"};
  return kPhrases;
}

struct Candidate {
  size_t letter;
  int64_t position;
  int priority;
};

}  // namespace

std::string extract_mcq_answer(const std::string& response,
                               const std::vector<std::string>& choices) {
  Text text = strip(code_points(response), whitespace, 0);
  if (text.empty()) return "";
  for (char c : std::string(",.!?;:'\"")) text = strip(text, same, static_cast<uint32_t>(c));
  text.insert(text.begin(), ' ');
  text.push_back(' ');
  std::vector<Text> letters;
  for (const auto& c : choices) letters.push_back(code_points(c));
  std::vector<Candidate> candidates;
  auto with = [](Text t, char suffix, bool paren) {
    if (paren) t.insert(t.begin(), '(');
    t.push_back(static_cast<uint32_t>(suffix));
    return t;
  };
  const struct {
    char suffix;
    bool paren;
    int priority;
  } kFormats[] = {
      {')', true, 6}, {'.', false, 5}, {':', false, 4}, {')', false, 3}, {' ', false, 2}};
  for (const auto& f : kFormats)
    for (size_t k = 0; k < letters.size(); ++k) {
      const int64_t at = rfind(text, with(letters[k], f.suffix, f.paren));
      if (at >= 0) candidates.push_back({k, at, f.priority});
    }
  Text lower;
  for (uint32_t cp : text)
    lower.push_back(static_cast<uint32_t>(utf8proc_tolower(static_cast<int32_t>(cp))));
  for (const auto& phrase : answer_phrases()) {
    const Text p = code_points(phrase);
    const int64_t at = find(lower, p);
    if (at < 0) continue;
    for (size_t k = 0; k < letters.size(); ++k) {
      const int64_t pos = find(text, letters[k], static_cast<size_t>(at) + p.size());
      if (pos >= 0) candidates.push_back({k, pos, 7});
    }
  }
  const Text stripped = strip(text, whitespace, 0);
  auto starts = [&](const Text& l) {
    return stripped.size() >= l.size() && std::equal(l.begin(), l.end(), stripped.begin());
  };
  auto ends = [&](const Text& l) {
    return stripped.size() >= l.size() &&
           std::equal(l.begin(), l.end(), stripped.end() - static_cast<std::ptrdiff_t>(l.size()));
  };
  for (size_t k = 0; k < letters.size(); ++k)
    if (starts(letters[k]) && (stripped.size() == 1 || !is_alpha(stripped[1])))
      candidates.push_back({k, 0, 10});
  for (size_t k = 0; k < letters.size(); ++k)
    if (ends(letters[k]) && (stripped.size() == 1 || !is_alpha(stripped[stripped.size() - 2])))
      candidates.push_back({k, static_cast<int64_t>(text.size()) - 1, 9});
  if (candidates.empty())
    for (size_t k = 0; k < letters.size(); ++k) {
      const int64_t at = rfind(text, letters[k]);
      if (at >= 0) candidates.push_back({k, at, 0});
    }
  if (candidates.empty()) return "";
  // Python's sort(reverse=True) is stable: among equal keys the first appended wins.
  std::stable_sort(
      candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
        return a.priority != b.priority ? a.priority > b.priority : a.position > b.position;
      });
  return choices[candidates.front().letter];
}

}  // namespace retain
