#include "eval/math/math_grading.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "eval/math/math_answer.h"
#include "eval/math/math_equivalence.h"
#include "eval/scores.h"

namespace retain {

MathBenchmark parse_math_benchmark(const std::string& name) {
  if (name == "gsm8k") return MathBenchmark::kGsm8k;
  if (name == "math500") return MathBenchmark::kMath500;
  if (name == "aime") return MathBenchmark::kAime;
  RETAIN_CHECK(false, "eval math: unknown --benchmark '", name,
               "' (expected gsm8k, math500 or aime)");
  return MathBenchmark::kGsm8k;
}

std::string math_benchmark_name(MathBenchmark benchmark) {
  switch (benchmark) {
    case MathBenchmark::kGsm8k:
      return "gsm8k";
    case MathBenchmark::kMath500:
      return "math500";
    case MathBenchmark::kAime:
      return "aime";
  }
  return "";
}

std::optional<std::string> extract_math_answer(MathBenchmark benchmark,
                                               const std::string& response) {
  const std::string text = answer_text(response);
  std::optional<std::string> answer = last_boxed_answer(text);
  if (!answer && benchmark == MathBenchmark::kGsm8k) answer = gsm8k_extract_answer(text);
  if (!answer && benchmark != MathBenchmark::kMath500) answer = last_number(text);
  // "\boxed{}" or a bare "$$": nothing the official comparison could find equal to a gold answer.
  if (answer && answer->find_first_not_of(" \t\r\n") == std::string::npos) return std::nullopt;
  return answer;
}

namespace {

// An AIME answer as an integer: MATH's normalisation, then an exact number whose denominator is 1.
std::optional<int64_t> aime_integer(const std::string& answer) {
  const auto number = parse_math_number(math_strip_string(answer).value_or(answer));
  if (!number || number->denominator != 1) return std::nullopt;
  return number->numerator;
}

}  // namespace

bool math_answer_correct(MathBenchmark benchmark, const std::string& answer,
                         const std::string& gold) {
  if (benchmark == MathBenchmark::kAime) {
    const auto a = aime_integer(answer), g = aime_integer(gold);
    return a && g && *a == *g;
  }
  return math_answers_equal(answer, gold);
}

std::string math_answer_vote_key(MathBenchmark benchmark, const std::string& answer) {
  if (benchmark == MathBenchmark::kAime) {
    const auto a = aime_integer(answer);
    return a ? std::to_string(*a) : "not an integer: " + answer;
  }
  return math_vote_key(answer);
}

Json math_metrics(MathBenchmark benchmark, const std::vector<Json>& records,
                  const std::function<std::string(size_t)>& where) {
  struct Problem {
    int64_t samples = 0, right = 0;
    // Vote key -> (votes, first sample's order, whether that answer is right).
    std::map<std::string, std::tuple<int64_t, size_t, bool>> votes;
  };
  std::map<std::string, Problem> problems;
  std::vector<std::string> order;  // problems in the order first seen
  int64_t unparsed = 0, truncated = 0, tokens = 0, longest = 0, most_read = -1;
  double peak_sum = 0;
  int64_t peaks = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const Json& r = records[i];
    const std::string id = json_get<std::string>(r, "id", where(i));
    const std::string gold = json_get<std::string>(r, "gold", where(i));
    const auto answer =
        extract_math_answer(benchmark, json_get<std::string>(r, "response", where(i)));
    const int64_t n = json_get<int64_t>(r, "new_tokens", where(i));
    tokens += n;
    longest = std::max(longest, n);
    truncated += json_get<bool>(r, "truncated", where(i));
    // A sweep's records carry the cache's memory and the budget's bound; `eval score` may read
    // records without them.
    if (const auto peak = json_get_optional<double>(r, "peak_kv_bytes", where(i))) {
      peak_sum += *peak;
      ++peaks;
    }
    most_read = std::max(
        most_read, json_get_optional<int64_t>(r, "max_attended_entries", where(i)).value_or(-1));
    auto [it, fresh] = problems.try_emplace(id);
    if (fresh) order.push_back(id);
    Problem& p = it->second;
    ++p.samples;
    if (!answer) {
      ++unparsed;
      continue;
    }
    const bool right = math_answer_correct(benchmark, *answer, gold);
    p.right += right;
    auto [vote, first] = p.votes.try_emplace(math_answer_vote_key(benchmark, *answer), 0, i, right);
    ++std::get<0>(vote->second);
  }
  RETAIN_CHECK(!records.empty(), "eval math: no predictions to score");
  double sum = 0, sum_squares = 0;
  int64_t majority_right = 0, single = 0, all_right = 0;
  for (const auto& id : order) {
    const Problem& p = problems.at(id);
    const double share = static_cast<double>(p.right) / static_cast<double>(p.samples);
    sum += share;
    sum_squares += share * share;
    all_right += p.right;
    single += p.samples == 1;
    // The most votes; among equals, the answer seen first (Counter.most_common's order).
    const std::tuple<int64_t, size_t, bool>* best = nullptr;
    for (const auto& [key, vote] : p.votes)
      if (!best || std::get<0>(vote) > std::get<0>(*best) ||
          (std::get<0>(vote) == std::get<0>(*best) && std::get<1>(vote) < std::get<1>(*best)))
        best = &vote;
    majority_right += best && std::get<2>(*best);
  }
  const auto n = static_cast<double>(order.size());
  const double pass1 = 100.0 * sum / n;
  std::pair<double, double> interval;
  if (single == static_cast<int64_t>(order.size())) {
    interval = wilson_interval_percent(all_right, static_cast<int64_t>(order.size()));
  } else {
    // The normal interval of a mean over problems: each problem's share is one observation.
    const double variance = order.size() > 1 ? (sum_squares - sum * sum / n) / (n - 1) : 0.0;
    const double half = 100.0 * 1.959964 * std::sqrt(std::max(variance, 0.0) / n);
    interval = {std::max(0.0, pass1 - half), std::min(100.0, pass1 + half)};
  }
  const double predictions = static_cast<double>(records.size());
  Json metrics = {{"pass@1", pass1},
                  {"maj@n", 100.0 * static_cast<double>(majority_right) / n},
                  {"unparsed", 100.0 * static_cast<double>(unparsed) / predictions},
                  {"truncated", 100.0 * static_cast<double>(truncated) / predictions},
                  {"mean_new_tokens", static_cast<double>(tokens) / predictions},
                  {"max_new_tokens", longest},
                  {"problems", static_cast<int64_t>(order.size())},
                  {"predictions", static_cast<int64_t>(records.size())}};
  if (peaks > 0) metrics["peak_kv_bytes"] = peak_sum / static_cast<double>(peaks);
  if (most_read >= 0) metrics["max_attended_entries"] = most_read;
  metrics["intervals"] = {{"pass@1", {interval.first, interval.second}}};
  return metrics;
}

}  // namespace retain
