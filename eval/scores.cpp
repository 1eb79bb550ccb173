#include "eval/scores.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>

#include "core/error.h"

namespace retain {

ScoreRow score_row(std::string policy, std::optional<double> budget, Json aggregate) {
  ScoreRow row{std::move(policy), budget, std::move(aggregate)};
  if (row.metrics.contains("intervals")) {
    row.intervals = std::move(row.metrics["intervals"]);
    row.metrics.erase("intervals");
  }
  return row;
}

std::pair<double, double> wilson_interval_percent(int64_t correct, int64_t total) {
  RETAIN_CHECK(total > 0 && correct >= 0 && correct <= total,
               "an interval needs 0 <= correct <= total and total > 0; got ", correct, " of ",
               total);
  constexpr double z = 1.959963984540054;  // the normal distribution's 97.5% quantile
  const double n = static_cast<double>(total), p = static_cast<double>(correct) / n;
  const double denominator = 1 + z * z / n;
  const double center = (p + z * z / (2 * n)) / denominator;
  const double half = z * std::sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator;
  // At 0 or all correct the bound is the score itself; center -/+ half reaches it only up to
  // rounding (66 of 66 gave 99.99999999999999), and an interval must hold its own score.
  const double lo = correct == 0 ? 0.0 : std::max(0.0, center - half);
  const double hi = correct == total ? 1.0 : std::min(1.0, center + half);
  return {100 * lo, 100 * hi};
}

std::pair<double, double> paired_difference_interval_percent(int64_t both, int64_t only_a,
                                                             int64_t only_b, int64_t neither) {
  RETAIN_CHECK(both >= 0 && only_a >= 0 && only_b >= 0 && neither >= 0,
               "paired counts must not be negative; got ", both, ", ", only_a, ", ", only_b, ", ",
               neither);
  const int64_t total = both + only_a + only_b + neither;
  RETAIN_CHECK(total > 0, "a paired interval needs at least one unit");
  const double n = static_cast<double>(total);
  const double a = static_cast<double>(both), b = static_cast<double>(only_a),
               c = static_cast<double>(only_b), d = static_cast<double>(neither);
  const double p1 = (a + b) / n, p2 = (a + c) / n;
  const auto [l1, u1] = wilson_interval_percent(both + only_a, total);
  const auto [l2, u2] = wilson_interval_percent(both + only_b, total);
  // The correlation of the pairs: Newcombe's phi of the 2x2 table with his continuity correction
  // (a positive ad - bc is reduced by n / 2, down to 0), 0 where a margin is empty.
  const double margins = (a + b) * (c + d) * (a + c) * (b + d);
  const double ad_bc = a * d - b * c;
  const double corrected = ad_bc > n / 2 ? ad_bc - n / 2 : (ad_bc >= 0 ? 0.0 : ad_bc);
  const double phi = margins > 0 ? corrected / std::sqrt(margins) : 0.0;
  const double down1 = p1 - l1 / 100, up1 = u1 / 100 - p1;
  const double down2 = p2 - l2 / 100, up2 = u2 / 100 - p2;
  const double lower = std::sqrt(std::max(0.0, down1 * down1 - 2 * phi * down1 * up2 + up2 * up2));
  const double upper = std::sqrt(std::max(0.0, up1 * up1 - 2 * phi * up1 * down2 + down2 * down2));
  return {100 * (p1 - p2 - lower), 100 * (p1 - p2 + upper)};
}

void add_differences_to_full(std::vector<ScoreRow>& rows,
                             const std::vector<std::optional<std::vector<bool>>>& outcomes,
                             const std::string& headline) {
  std::optional<size_t> full;
  for (size_t r = 0; r < rows.size(); ++r)
    if (rows[r].policy == "full" && outcomes[r] && !outcomes[r]->empty()) full = r;
  if (!full) return;
  const std::vector<bool>& reference = *outcomes[*full];
  const std::string metric = headline + "_vs_full";
  for (size_t r = 0; r < rows.size(); ++r) {
    if (r == *full || !outcomes[r]) continue;
    const std::vector<bool>& own = *outcomes[r];
    RETAIN_CHECK(own.size() == reference.size(), rows[r].policy, ": ", own.size(),
                 " units against the full cache's ", reference.size());
    int64_t counts[2][2] = {{0, 0}, {0, 0}};  // [this policy right][full cache right]
    for (size_t i = 0; i < own.size(); ++i) ++counts[own[i]][reference[i]];
    const auto [lo, hi] =
        paired_difference_interval_percent(counts[1][1], counts[1][0], counts[0][1], counts[0][0]);
    rows[r].metrics[metric] =
        100.0 * static_cast<double>(counts[1][0] - counts[0][1]) / static_cast<double>(own.size());
    rows[r].intervals[metric] = {lo, hi};
  }
}

void write_scores(const fs::path& dir, const std::string& benchmark,
                  const std::vector<ScoreRow>& rows, const Json& run) {
  Json results = Json::array();
  std::set<std::string> columns, interval_columns;
  for (const auto& row : rows) {
    Json result = {{"policy", row.policy},
                   {"budget", row.budget ? Json(*row.budget) : Json(nullptr)},
                   {"metrics", row.metrics}};
    if (!row.intervals.empty()) result["intervals"] = row.intervals;
    results.push_back(std::move(result));
    for (const auto& [key, _] : row.metrics.items()) columns.insert(key);
    for (const auto& [key, _] : row.intervals.items()) interval_columns.insert(key);
  }
  Json scores = {{"benchmark", benchmark}, {"results", results}};
  if (!run.is_null()) scores["run"] = run;
  write_json_file_atomic(dir / "scores.json", scores);

  std::ostringstream csv;
  csv << "policy,budget";
  for (const auto& c : columns) csv << "," << c;
  for (const auto& c : interval_columns) csv << "," << c << "_lo," << c << "_hi";
  csv << "\n";
  for (const auto& row : rows) {
    csv << row.policy << "," << (row.budget ? std::to_string(*row.budget) : "");
    for (const auto& c : columns)
      csv << "," << (row.metrics.contains(c) ? row.metrics[c].dump() : "");
    for (const auto& c : interval_columns) {
      if (row.intervals.contains(c))
        csv << "," << row.intervals[c][0].dump() << "," << row.intervals[c][1].dump();
      else
        csv << ",,";
    }
    csv << "\n";
  }
  write_text_file_atomic(dir / "scores.csv", csv.str());
}

void print_score_table(const std::vector<ScoreRow>& rows, std::vector<std::string> columns) {
  if (rows.empty()) return;
  if (columns.empty())  // every row's metrics: the full cache's row lacks its difference to itself
    for (const auto& r : rows)
      for (const auto& [name, _] : r.metrics.items())
        if (std::find(columns.begin(), columns.end(), name) == columns.end())
          columns.push_back(name);
  int policy_width = 6;
  for (const auto& r : rows)
    policy_width = std::max(policy_width, static_cast<int>(r.policy.size()));
  std::printf("%-*s %-8s", policy_width, "policy", "budget");
  // A cell: the value with two decimals, and "(lo-hi)" rounded to integers where known.
  auto cell = [](const ScoreRow& r, const std::string& column) -> std::string {
    if (!r.metrics.contains(column) || !r.metrics[column].is_number()) return "-";
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.2f", r.metrics[column].get<double>());
    std::string out = buf;
    if (r.intervals.contains(column)) {
      const double lo = r.intervals[column][0].get<double>();
      const double hi = r.intervals[column][1].get<double>();
      // A difference's interval crosses zero: signed bounds with a decimal, not "(-5--1)".
      if (lo < 0)
        std::snprintf(buf, sizeof(buf), " (%.1f, %.1f)", lo, hi);
      else
        std::snprintf(buf, sizeof(buf), " (%.0f-%.0f)", lo, hi);
      out += buf;
    }
    return out;
  };
  std::vector<int> widths;
  for (const auto& c : columns) {
    int width = std::max(10, static_cast<int>(c.size()));
    for (const auto& r : rows) width = std::max(width, static_cast<int>(cell(r, c).size()));
    widths.push_back(width);
    std::printf(" %*s", widths.back(), c.c_str());
  }
  std::printf("\n");
  for (const auto& r : rows) {
    std::printf("%-*s %-8s", policy_width, r.policy.c_str(),
                r.budget ? str_cat(*r.budget).c_str() : "-");
    for (size_t c = 0; c < columns.size(); ++c)
      std::printf(" %*s", widths[c], cell(r, columns[c]).c_str());
    std::printf("\n");
  }
}

}  // namespace retain
