#include "eval/metrics.h"

#include <utf8proc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "model/tokenizers/regex.h"
#include "model/tokenizers/unicode.h"

namespace retain {

namespace {

std::u32string to_u32(const std::string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) out.push_back(next_code_point(s, i));
  return out;
}

}  // namespace

bool python_space(uint32_t cp) { return is_unicode_whitespace(cp) || (cp >= 0x1C && cp <= 0x1F); }

std::vector<std::string> python_split(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    uint32_t cp = next_code_point(s, i);
    if (python_space(cp)) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur.append(s, start, i - start);
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

namespace {

std::vector<std::string> split_on(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) break;
    start = at + 1;
  }
  return out;
}

}  // namespace

std::string python_strip(const std::string& s) {
  size_t b = 0;
  while (b < s.size()) {
    size_t i = b;
    if (!python_space(next_code_point(s, i))) break;
    b = i;
  }
  size_t e = s.size();
  while (e > b) {
    size_t start = e - 1;
    while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    if (!python_space(next_code_point(s, i))) break;
    e = start;
  }
  return s.substr(b, e - b);
}

std::string python_lower(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();)
    append_utf8(
        out, static_cast<uint32_t>(utf8proc_tolower(static_cast<int32_t>(next_code_point(s, i)))));
  return out;
}

namespace {

// re.findall(r"\d+", text) with Python's Unicode \d.
std::vector<std::string> find_numbers(const std::string& text) {
  static const Regex digits("\\d+", "metrics");
  std::vector<std::string> out;
  for (auto [b, e] : digits.find_all(text)) out.push_back(text.substr(b, e - b));
  return out;
}

double f1_of(const std::vector<std::string>& prediction, const std::vector<std::string>& truth) {
  std::map<std::string, int> p, t;
  for (const auto& w : prediction) ++p[w];
  for (const auto& w : truth) ++t[w];
  int same = 0;
  for (const auto& [w, c] : p)
    if (auto it = t.find(w); it != t.end()) same += std::min(c, it->second);
  if (same == 0) return 0;
  double precision = static_cast<double>(same) / static_cast<double>(prediction.size());
  double recall = static_cast<double>(same) / static_cast<double>(truth.size());
  return 2 * precision * recall / (precision + recall);
}

// rouge 1.0.1's sentence and word split.
std::vector<std::vector<std::string>> rouge_sentences(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  for (const auto& piece : split_on(text, '.')) {
    if (piece.empty()) continue;
    std::string joined;
    for (const auto& w : python_split(piece)) joined += (joined.empty() ? "" : " ") + w;
    out.push_back(split_on(joined, ' '));
  }
  return out;
}

// Python frames below the first _recon call when LongBench scores (module, scorer, rouge_score,
// get_scores, _get_avg_scores, rouge_l_summary_level, _union_lcs, _recon_lcs) against the
// default recursion limit of 1000.
constexpr int kRecursionBudget = 1000 - 8;

// The LCS words rouge reconstructs for (reference x, hypothesis y), or nullopt where its recursive
// reconstruction would exceed Python's recursion limit.
std::optional<std::vector<std::string>> recon_lcs(const std::vector<std::string>& x,
                                                  const std::vector<std::string>& y) {
  const size_t n = x.size(), m = y.size();
  std::vector<std::vector<int>> table(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j)
      table[i][j] = x[i - 1] == y[j - 1] ? table[i - 1][j - 1] + 1
                                         : std::max(table[i - 1][j], table[i][j - 1]);
  std::vector<std::string> words;
  size_t i = n, j = m;
  int depth = 1;  // _recon(n, m)
  while (i > 0 && j > 0) {
    if (x[i - 1] == y[j - 1]) {
      words.push_back(x[i - 1]);
      --i;
      --j;
    } else if (table[i - 1][j] > table[i][j - 1]) {
      --i;
    } else {
      --j;
    }
    if (++depth > kRecursionBudget) return std::nullopt;
  }
  return words;
}

// difflib.SequenceMatcher(None, a, b) matching characters (autojunk on, no junk function).
int matching_characters(const std::u32string& a, const std::u32string& b) {
  std::unordered_map<char32_t, std::vector<int>> b2j;
  for (int j = 0; j < static_cast<int>(b.size()); ++j) b2j[b[j]].push_back(j);
  if (b.size() >= 200) {  // "popular" elements leave the index (they can still extend matches)
    const size_t ntest = b.size() / 100 + 1;
    for (auto it = b2j.begin(); it != b2j.end();)
      it = it->second.size() > ntest ? b2j.erase(it) : std::next(it);
  }
  auto longest = [&](int alo, int ahi, int blo, int bhi) {
    int besti = alo, bestj = blo, bestsize = 0;
    std::unordered_map<int, int> j2len;
    for (int i = alo; i < ahi; ++i) {
      std::unordered_map<int, int> next;
      auto it = b2j.find(a[i]);
      if (it != b2j.end()) {
        for (int j : it->second) {
          if (j < blo) continue;
          if (j >= bhi) break;
          auto prev = j2len.find(j - 1);
          int k = next[j] = (prev == j2len.end() ? 0 : prev->second) + 1;
          if (k > bestsize) besti = i - k + 1, bestj = j - k + 1, bestsize = k;
        }
      }
      j2len.swap(next);
    }
    while (besti > alo && bestj > blo && a[besti - 1] == b[bestj - 1]) --besti, --bestj, ++bestsize;
    while (besti + bestsize < ahi && bestj + bestsize < bhi &&
           a[besti + bestsize] == b[bestj + bestsize])
      ++bestsize;
    return std::array<int, 3>{besti, bestj, bestsize};
  };
  int matches = 0;
  std::vector<std::array<int, 4>> queue{
      {0, static_cast<int>(a.size()), 0, static_cast<int>(b.size())}};
  while (!queue.empty()) {
    auto [alo, ahi, blo, bhi] = queue.back();
    queue.pop_back();
    auto [i, j, k] = longest(alo, ahi, blo, bhi);
    if (k == 0) continue;
    matches += k;
    if (alo < i && blo < j) queue.push_back({alo, i, blo, j});
    if (i + k < ahi && j + k < bhi) queue.push_back({i + k, ahi, j + k, bhi});
  }
  return matches;
}

}  // namespace

double python_round(double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, value);  // glibc: correctly rounded, ties to even
  return std::strtod(buf, nullptr);
}

double numpy_round(double value, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::nearbyint(value * scale) / scale;
}

const char* longbench_e_bucket(double length) {
  return length < 4000 ? "0-4k" : length < 8000 ? "4-8k" : "8k+";
}

std::string normalize_answer(const std::string& text) {
  std::string lowered = python_lower(text);
  std::string no_punct;
  for (char c : lowered)
    if (!(c >= 33 && c <= 126 && !std::isalnum(static_cast<unsigned char>(c))))
      no_punct.push_back(c);
  static const Regex articles("\\b(a|an|the)\\b", "normalize_answer");
  std::string no_articles;
  size_t last = 0;
  for (auto [b, e] : articles.find_all(no_punct)) {
    no_articles.append(no_punct, last, b - last);
    no_articles += " ";
    last = e;
  }
  no_articles.append(no_punct, last, std::string::npos);
  std::string out;
  for (const auto& w : python_split(no_articles)) out += (out.empty() ? "" : " ") + w;
  return out;
}

double qa_f1_score(const std::string& prediction, const std::string& answer) {
  return f1_of(python_split(normalize_answer(prediction)), python_split(normalize_answer(answer)));
}

double rouge_l_score(const std::string& prediction, const std::string& answer) {
  auto hyp = rouge_sentences(prediction), ref = rouge_sentences(answer);
  if (hyp.empty() || ref.empty()) return 0.0;  // the package raises; LongBench scores 0
  std::set<std::string> ref_words, hyp_words, lcs_union;
  for (const auto& s : ref) ref_words.insert(s.begin(), s.end());
  for (const auto& s : hyp) hyp_words.insert(s.begin(), s.end());
  for (const auto& r : ref)
    for (const auto& h : hyp) {
      auto words = recon_lcs(r, h);
      if (!words) return 0.0;  // RecursionError in the package
      lcs_union.insert(words->begin(), words->end());
    }
  const double llcs = static_cast<double>(lcs_union.size());
  const double recall = llcs / static_cast<double>(ref_words.size());
  const double precision = llcs / static_cast<double>(hyp_words.size());
  return 2.0 * (precision * recall / (precision + recall + 1e-8));
}

double classification_score(const std::string& prediction, const std::string& answer,
                            const std::vector<std::string>& all_classes) {
  std::vector<std::string> matched;
  for (const auto& c : all_classes)
    if (prediction.find(c) != std::string::npos) matched.push_back(c);
  // The official loop removes from the list it iterates, so the element after a removal is skipped.
  for (size_t i = 0; i < matched.size(); ++i) {
    const std::string term = matched[i];
    if (answer.find(term) != std::string::npos && term != answer) {
      matched.erase(std::find(matched.begin(), matched.end(), term));
    }
  }
  if (std::find(matched.begin(), matched.end(), answer) == matched.end()) return 0.0;
  return 1.0 / static_cast<double>(matched.size());
}

double retrieval_score(const std::string& prediction, const std::string& answer) {
  static const Regex paragraph("Paragraph (\\d+)", "retrieval_score");
  auto hits = paragraph.find_all(answer);
  RETAIN_CHECK(!hits.empty(), "retrieval_score: the answer '", answer, "' names no 'Paragraph N'");
  std::string id = answer.substr(hits[0].first + 10, hits[0].second - hits[0].first - 10);
  auto numbers = find_numbers(prediction);
  if (numbers.empty()) return 0.0;
  return static_cast<double>(std::count(numbers.begin(), numbers.end(), id)) /
         static_cast<double>(numbers.size());
}

double count_score(const std::string& prediction, const std::string& answer) {
  auto numbers = find_numbers(prediction);
  if (numbers.empty()) return 0.0;
  return static_cast<double>(std::count(numbers.begin(), numbers.end(), answer)) /
         static_cast<double>(numbers.size());
}

int fuzz_ratio(const std::string& a, const std::string& b) {
  if (a == b) return 100;
  if (a.empty() || b.empty()) return 0;
  auto ua = to_u32(a), ub = to_u32(b);
  double ratio = 2.0 * matching_characters(ua, ub) / static_cast<double>(ua.size() + ub.size());
  return static_cast<int>(python_round(100 * ratio, 0));
}

double code_sim_score(const std::string& prediction, const std::string& answer) {
  std::string text =
      prediction.substr(std::min(prediction.find_first_not_of('\n'), prediction.size()));
  std::string chosen;
  for (const auto& line : split_on(text, '\n')) {
    if (line.find('`') == std::string::npos && line.find('#') == std::string::npos &&
        line.find("//") == std::string::npos) {
      chosen = line;
      break;
    }
  }
  return fuzz_ratio(chosen, answer) / 100.0;
}

double exact_match_score(const std::string& prediction, const std::string& answer) {
  auto trim = [](const std::string& s) {
    size_t b = s.find_first_not_of(" \t\r\n"), e = s.find_last_not_of(" \t\r\n");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  return trim(prediction) == trim(answer) ? 1.0 : 0.0;
}

std::optional<std::string> longbench_metric(const std::string& dataset) {
  static const std::map<std::string, std::string> kMetric = {{"narrativeqa", "qa_f1"},
                                                             {"qasper", "qa_f1"},
                                                             {"multifieldqa_en", "qa_f1"},
                                                             {"hotpotqa", "qa_f1"},
                                                             {"2wikimqa", "qa_f1"},
                                                             {"musique", "qa_f1"},
                                                             {"triviaqa", "qa_f1"},
                                                             {"gov_report", "rouge"},
                                                             {"qmsum", "rouge"},
                                                             {"multi_news", "rouge"},
                                                             {"samsum", "rouge"},
                                                             {"trec", "classification"},
                                                             {"passage_retrieval_en", "retrieval"},
                                                             {"passage_count", "count"},
                                                             {"lcc", "code_sim"},
                                                             {"repobench-p", "code_sim"}};
  auto it = kMetric.find(dataset);
  if (it == kMetric.end()) return std::nullopt;
  return it->second;
}

double longbench_score(const std::string& dataset, const std::string& prediction,
                       const std::vector<std::string>& answers,
                       const std::vector<std::string>& all_classes) {
  auto metric = longbench_metric(dataset);
  RETAIN_CHECK(
      metric.has_value(), "longbench: dataset '", dataset,
      "' is not scored by retain (the Chinese tasks need jieba); English + code tasks only");
  std::string pred = prediction;
  if (dataset == "trec" || dataset == "triviaqa" || dataset == "samsum" || dataset == "lsht") {
    pred = pred.substr(std::min(pred.find_first_not_of('\n'), pred.size()));
    pred = pred.substr(0, pred.find('\n'));
  }
  double best = 0;
  for (const auto& answer : answers) {
    double s = 0;
    if (*metric == "qa_f1")
      s = qa_f1_score(pred, answer);
    else if (*metric == "rouge")
      s = rouge_l_score(pred, answer);
    else if (*metric == "classification")
      s = classification_score(pred, answer, all_classes);
    else if (*metric == "retrieval")
      s = retrieval_score(pred, answer);
    else if (*metric == "count")
      s = count_score(pred, answer);
    else
      s = code_sim_score(pred, answer);
    best = std::max(best, s);
  }
  return best;
}

}  // namespace retain
