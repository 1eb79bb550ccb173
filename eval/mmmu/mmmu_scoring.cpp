#include "eval/mmmu/mmmu_scoring.h"

#include <utf8proc.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "eval/metrics.h"
#include "eval/mmmu/mmmu_data.h"
#include "model/tokenizers/regex.h"
#include "model/tokenizers/unicode.h"

namespace retain {

// ---- Python's random: MT19937 with init_by_array over the seed's 32-bit words ----

PythonRandom::PythonRandom(uint64_t seed) {
  std::vector<uint32_t> key;
  for (uint64_t s = seed; s > 0; s >>= 32) key.push_back(static_cast<uint32_t>(s & 0xffffffffu));
  if (key.empty()) key.push_back(0);
  state_[0] = 19650218u;
  for (int i = 1; i < 624; ++i)
    state_[i] = 1812433253u * (state_[i - 1] ^ (state_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  int i = 1;
  size_t j = 0;
  for (size_t k = std::max<size_t>(624, key.size()); k > 0; --k) {
    state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1664525u)) + key[j] +
                static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= 624) {
      state_[0] = state_[623];
      i = 1;
    }
    if (j >= key.size()) j = 0;
  }
  for (int k = 623; k > 0; --k) {
    state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1566083941u)) -
                static_cast<uint32_t>(i);
    ++i;
    if (i >= 624) {
      state_[0] = state_[623];
      i = 1;
    }
  }
  state_[0] = 0x80000000u;
  index_ = 624;
}

uint32_t PythonRandom::next() {
  if (index_ >= 624) {
    for (int k = 0; k < 624; ++k) {
      const uint32_t y = (state_[k] & 0x80000000u) | (state_[(k + 1) % 624] & 0x7fffffffu);
      state_[k] = state_[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    index_ = 0;
  }
  uint32_t y = state_[index_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

int64_t PythonRandom::choice_index(int64_t n) {
  RETAIN_CHECK(n > 0 && n <= (int64_t{1} << 32), "PythonRandom: choice over ", n, " items");
  int bits = 0;
  while ((int64_t{1} << bits) <= n) ++bits;  // n.bit_length()
  // getrandbits(k <= 32) is the top k bits of one draw; _randbelow rejects draws >= n.
  while (true) {
    const int64_t r = bits == 0 ? 0 : static_cast<int64_t>(next() >> (32 - bits));
    if (r < n) return r;
  }
}

namespace {

std::string strip_chars(std::string s, char c) {  // str.strip(c)
  size_t b = 0, e = s.size();
  while (b < e && s[b] == c) ++b;
  while (e > b && s[e - 1] == c) --e;
  return s.substr(b, e - b);
}

// len() of a Python str: code points.
size_t python_len(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// str.rfind: the byte offset, or -1. Offsets compare like Python's character offsets because
// both are monotone in the position.
int64_t rfind(const std::string& haystack, const std::string& needle) {
  const size_t at = haystack.rfind(needle);
  return at == std::string::npos ? -1 : static_cast<int64_t>(at);
}

// The value of a Unicode decimal digit (category Nd): digits come in runs of ten from 0 to 9.
std::optional<int> decimal_digit(uint32_t cp) {
  if (cp >= '0' && cp <= '9') return static_cast<int>(cp - '0');
  if (cp < 0x80 || utf8proc_category(static_cast<int32_t>(cp)) != UTF8PROC_CATEGORY_ND)
    return std::nullopt;
  uint32_t first = cp;
  while (first > 0 && utf8proc_category(static_cast<int32_t>(first - 1)) == UTF8PROC_CATEGORY_ND)
    --first;
  return static_cast<int>((cp - first) % 10);
}

}  // namespace

std::optional<double> python_float(const std::string& text) {
  // Python's float(): strip whitespace, Unicode digits count as their ASCII value, "_" only
  // between digits; inf / infinity / nan in any case, with a sign.
  std::string ascii;
  const std::string s = python_strip(text);
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = next_code_point(s, i);
    if (auto d = decimal_digit(cp)) {
      ascii.push_back(static_cast<char>('0' + *d));
    } else if (cp < 0x80) {
      ascii.push_back(static_cast<char>(cp));
    } else {
      return std::nullopt;
    }
  }
  if (ascii.empty()) return std::nullopt;
  size_t i = 0;
  std::string clean;
  if (ascii[i] == '+' || ascii[i] == '-') clean.push_back(ascii[i++]);
  std::string rest = ascii.substr(i);
  std::string lower;
  for (char c : rest)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (lower == "inf" || lower == "infinity") return clean == "-" ? -HUGE_VAL : HUGE_VAL;
  if (lower == "nan") return std::nan("");
  // digits ["." digits] [e [sign] digits], underscores only between two digits.
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  size_t k = 0;
  int mantissa_digits = 0;
  auto take_digits = [&](int& count) {
    while (k < lower.size()) {
      if (is_digit(lower[k])) {
        clean.push_back(lower[k++]);
        ++count;
      } else if (lower[k] == '_' && k > 0 && is_digit(lower[k - 1]) && k + 1 < lower.size() &&
                 is_digit(lower[k + 1])) {
        ++k;
      } else {
        break;
      }
    }
  };
  take_digits(mantissa_digits);
  if (k < lower.size() && lower[k] == '.') {
    clean.push_back('.');
    ++k;
    take_digits(mantissa_digits);
  }
  if (mantissa_digits == 0) return std::nullopt;
  if (k < lower.size() && lower[k] == 'e') {
    clean.push_back('e');
    ++k;
    if (k < lower.size() && (lower[k] == '+' || lower[k] == '-')) clean.push_back(lower[k++]);
    int exponent_digits = 0;
    take_digits(exponent_digits);
    if (exponent_digits == 0) return std::nullopt;
  }
  if (k != lower.size()) return std::nullopt;
  return std::strtod(clean.c_str(), nullptr);
}

std::string parse_multi_choice_response(const std::string& response_in,
                                        const std::vector<std::string>& choices,
                                        const std::vector<std::string>& options,
                                        PythonRandom& random) {
  RETAIN_CHECK(choices.size() == options.size() && !choices.empty(),
               "parse_multi_choice_response: ", choices.size(), " choices for ", options.size(),
               " options");
  std::string response = response_in;
  for (char c : {',', '.', '!', '?', ';', ':', '\''}) response = strip_chars(response, c);
  response = " " + response + " ";  // avoids partial matches
  bool index_answer = true, bracketed = false;
  std::vector<size_t> candidates;
  for (size_t i = 0; i < choices.size(); ++i)
    if (contains(response, "(" + choices[i] + ")")) {
      candidates.push_back(i);
      bracketed = true;
    }
  if (candidates.empty())
    for (size_t i = 0; i < choices.size(); ++i)
      if (contains(response, " " + choices[i] + " ")) candidates.push_back(i);
  const std::string lowered = python_lower(response);
  if (candidates.empty() && python_split(response).size() > 5) {
    for (size_t i = 0; i < options.size(); ++i)
      if (contains(lowered, python_lower(options[i]))) {
        candidates.push_back(i);
        index_answer = false;  // matched by the option's text
      }
  }
  if (candidates.empty())
    return choices[static_cast<size_t>(random.choice_index(static_cast<int64_t>(choices.size())))];
  if (candidates.size() == 1) return choices[candidates[0]];
  // Several: the one occurring last (np.argmax keeps the first of equal maxima).
  int64_t best = -2;
  size_t pick = candidates[0];
  for (size_t c : candidates) {
    const int64_t at = !index_answer ? rfind(lowered, python_lower(options[c]))
                       : bracketed   ? rfind(response, "(" + choices[c] + ")")
                                     : rfind(response, " " + choices[c] + " ");
    if (at > best) {
      best = at;
      pick = c;
    }
  }
  return choices[pick];
}

std::vector<OpenValue> normalize_open_answer(const std::string& text) {
  const std::string s = python_strip(text);
  std::string no_commas;
  for (char c : s)
    if (c != ',') no_commas.push_back(c);
  if (auto value = python_float(no_commas)) return {python_round(*value, 2)};
  const std::string lowered = python_lower(s);
  // One character: padded so it cannot match inside a word.
  size_t i = 0;
  if (!lowered.empty()) next_code_point(lowered, i);
  if (!lowered.empty() && i == lowered.size()) return {" " + lowered, lowered + " "};
  return {lowered};
}

namespace {

std::vector<std::string> extract_numbers(const std::string& text) {
  static const Regex commas(R"(-?\b\d{1,3}(?:,\d{3})+\b)", "MMMU numbers with commas");
  static const Regex scientific(R"(-?\d+(?:\.\d+)?[eE][+-]?\d+)", "MMMU scientific numbers");
  static const Regex simple(R"(-?(?:\d+\.\d+|\.\d+|\d+\b)(?![eE][+-]?\d+)(?![,\d]))",
                            "MMMU simple numbers");
  std::vector<std::string> out;
  for (const Regex* r : {&commas, &scientific, &simple})
    for (auto [b, e] : r->find_all(text)) out.push_back(text.substr(b, e - b));
  return out;
}

// The official get_key_subresponses: per line (the sentence split needs a capital letter, which
// lowercasing has removed: in effect lines), the shortest tail after a key phrase.
std::vector<std::string> key_subresponses(const std::string& response) {
  std::string r = python_lower(strip_chars(python_strip(response), '.'));
  static const Regex split(R"(\.\s(?=[A-Z])|\n)", "MMMU sentence split");
  std::vector<std::string> parts;
  size_t from = 0;
  for (auto [b, e] : split.find_all(r)) {
    parts.push_back(r.substr(from, b - from));
    from = e;
  }
  parts.push_back(r.substr(from));
  std::vector<std::string> indicators = {"could be ",  "so ",    "is ",     "thus ",
                                         "therefore ", "final ", "answer ", "result "};
  std::vector<std::string> keys;
  for (size_t p = 0; p < parts.size(); ++p) {
    if (p + 1 == parts.size()) indicators.push_back("=");
    std::optional<std::string> shortest;
    for (const auto& indicator : indicators) {
      const size_t at = parts[p].rfind(indicator);
      if (at == std::string::npos) continue;
      const std::string tail = python_strip(parts[p].substr(at + indicator.size()));
      // `if not shortest` is also true for an empty tail: a later indicator replaces it.
      if (!shortest || shortest->empty() || python_len(tail) < python_len(*shortest))
        shortest = tail;
    }
    if (shortest && !shortest->empty()) {
      const std::string trimmed = python_strip(*shortest);
      static const std::vector<std::string> trivial = {":", ",", ".", "!", "?", ";", "'"};
      if (std::find(trivial.begin(), trivial.end(), trimmed) == trivial.end())
        keys.push_back(*shortest);
    }
  }
  if (keys.empty()) return {r};
  return keys;
}

}  // namespace

std::vector<OpenValue> parse_open_response(const std::string& response) {
  const std::vector<std::string> keys = key_subresponses(response);
  std::vector<std::string> texts = keys;
  for (const auto& k : keys)
    for (auto& n : extract_numbers(k)) texts.push_back(n);
  std::vector<OpenValue> out;
  for (const auto& t : texts)
    for (auto& v : normalize_open_answer(t))
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  return out;
}

bool eval_multi_choice(const std::vector<std::string>& gold, const std::string& prediction) {
  return std::find(gold.begin(), gold.end(), prediction) != gold.end();
}

bool eval_open(const std::vector<std::string>& gold, const std::vector<OpenValue>& prediction) {
  std::vector<OpenValue> answers;
  for (const auto& g : gold)
    for (auto& v : normalize_open_answer(g)) answers.push_back(v);
  for (const auto& p : prediction) {
    if (const auto* text = std::get_if<std::string>(&p)) {
      for (const auto& a : answers)
        if (const auto* t = std::get_if<std::string>(&a); t && contains(*text, *t)) return true;
    } else {
      const double x = std::get<double>(p);
      for (const auto& a : answers)
        if (const auto* v = std::get_if<double>(&a); v && *v == x) return true;
    }
  }
  return false;
}

const std::map<std::string, std::vector<std::string>>& mmmu_disciplines() {
  static const std::map<std::string, std::vector<std::string>> kDisciplines = {
      {"Art and Design", {"Art", "Art_Theory", "Design", "Music"}},
      {"Business", {"Accounting", "Economics", "Finance", "Manage", "Marketing"}},
      {"Science", {"Biology", "Chemistry", "Geography", "Math", "Physics"}},
      {"Health and Medicine",
       {"Basic_Medical_Science", "Clinical_Medicine", "Diagnostics_and_Laboratory_Medicine",
        "Pharmacy", "Public_Health"}},
      {"Humanities and Social Science", {"History", "Literature", "Sociology", "Psychology"}},
      {"Tech and Engineering",
       {"Agriculture", "Architecture_and_Engineering", "Computer_Science", "Electronics",
        "Energy_and_Power", "Materials", "Mechanical_Engineering"}},
  };
  return kDisciplines;
}

Json mmmu_metrics(const std::vector<Json>& records, const std::function<std::string(size_t)>& where,
                  std::vector<MmmuJudgement>* judged) {
  // eval_utils.py seeds Python's random once at import; every draw of a run follows.
  PythonRandom random(42);
  std::map<std::string, std::pair<int64_t, int64_t>> subjects;  // subject -> (correct, total)
  if (judged) judged->clear();
  for (size_t i = 0; i < records.size(); ++i) {
    const Json& r = records[i];
    const std::string response = json_get<std::string>(r, "response", where(i));
    const auto answers = json_get<std::vector<std::string>>(r, "answers", where(i));
    const std::string type = json_get<std::string>(r, "question_type", where(i));
    MmmuJudgement j;
    if (type == "multiple-choice") {
      const auto options = json_get<std::vector<std::string>>(r, "options", where(i));
      std::vector<std::string> choices;
      for (size_t k = 0; k < options.size(); ++k)
        choices.push_back(std::string(1, static_cast<char>('A' + k)));
      j.parsed = parse_multi_choice_response(response, choices, options, random);
      j.correct = eval_multi_choice(answers, j.parsed);
    } else {
      RETAIN_CHECK(type == "open", where(i), ": question_type '", type,
                   "'; expected multiple-choice or open");
      const auto predictions = parse_open_response(response);
      for (const auto& p : predictions) {
        if (!j.parsed.empty()) j.parsed += " | ";
        j.parsed += std::holds_alternative<double>(p) ? str_cat(std::get<double>(p))
                                                      : std::get<std::string>(p);
      }
      j.correct = eval_open(answers, predictions);
    }
    auto& [correct, total] = subjects[json_get<std::string>(r, "subject", where(i))];
    correct += j.correct;
    total += 1;
    if (judged) judged->push_back(std::move(j));
  }
  // main_eval_only.py: each subject's acc = correct / n; a discipline's and the overall accuracy
  // are calculate_ins_level_acc, sum(acc * n) / sum(n) in its dict's order (the same floating
  // point sums); each printed as round(acc, 3), here in percent.
  auto weighted = [&](const std::vector<std::string>& members, int64_t* count) {
    double sum = 0;
    int64_t n = 0;
    for (const auto& subject : members)
      if (auto it = subjects.find(subject); it != subjects.end()) {
        const auto total = static_cast<double>(it->second.second);
        sum += static_cast<double>(it->second.first) / total * total;
        n += it->second.second;
      }
    if (count) *count = n;
    return n > 0 ? sum / static_cast<double>(n) : 0.0;
  };
  auto percent = [](double acc) { return python_round(100.0 * python_round(acc, 3), 1); };
  Json metrics = Json::object();
  for (const auto& [discipline, members] : mmmu_disciplines()) {
    int64_t n = 0;
    const double acc = weighted(members, &n);
    if (n > 0) metrics[discipline] = percent(acc);
  }
  for (const auto& [subject, ct] : subjects)
    metrics[subject] = percent(static_cast<double>(ct.first) / static_cast<double>(ct.second));
  int64_t all_total = 0;
  metrics["overall"] = percent(weighted(mmmu_subjects(), &all_total));
  metrics["questions"] = all_total;
  return metrics;
}

}  // namespace retain
