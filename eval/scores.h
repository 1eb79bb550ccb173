// The results schema every `retain eval` writes:
//   DIR/scores.json  {"benchmark": B, "results": [{"policy", "budget", "metrics": {...},
//                     "intervals": {metric: [lo, hi], ...}}, ...]}  (intervals where known)
//   DIR/scores.csv   policy,budget,<metric columns...>,<metric>_lo,<metric>_hi...
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"

namespace retain {

struct ScoreRow {
  std::string policy;
  std::optional<double> budget;     // null for the full cache
  Json metrics;                     // flat object of numbers
  Json intervals = Json::object();  // metric -> [lo, hi], a 95% interval
};

// A row from a benchmark's aggregate, whose "intervals" object (if any) moves to
// ScoreRow::intervals.
ScoreRow score_row(std::string policy, std::optional<double> budget, Json aggregate);

// The 95% Wilson score interval of a proportion, in percent: correct of total answers. Unlike
// the normal approximation it stays inside [0, 100] and is not empty at 0 or all correct.
std::pair<double, double> wilson_interval_percent(int64_t correct, int64_t total);

// Newcombe's (1998) hybrid score interval (his method 10) for the difference of two proportions
// measured on the same units, in percentage points: `both` units right under A and B, `only_a`
// right under A alone, `only_b` under B alone, `neither`. It combines each side's Wilson interval
// with the correlation of the pairs (phi, continuity-corrected as he defines it), so it stays
// inside [-100, 100] and, where A and B agree on most units, is much narrower than the two
// proportions' own intervals suggest.
std::pair<double, double> paired_difference_interval_percent(int64_t both, int64_t only_a,
                                                             int64_t only_b, int64_t neither);

// "<headline>_vs_full" on every row but the full cache's (policy "full"): its paired difference
// to the full cache over the same units, in percentage points (this row's share right minus the
// full cache's), with paired_difference_interval_percent's interval. outcomes[r]: whether each
// unit of row r was answered right, in unit order, or nullopt (a row without them gets nothing);
// nothing at all without a full-cache row.
void add_differences_to_full(std::vector<ScoreRow>& rows,
                             const std::vector<std::optional<std::vector<bool>>>& outcomes,
                             const std::string& headline);

void write_scores(const fs::path& dir, const std::string& benchmark,
                  const std::vector<ScoreRow>& rows, const Json& run = nullptr);

// Prints the rows as an aligned table on stdout: policy, budget, then `columns` (metric names;
// empty: every metric of any row), two decimals, and a metric's 95% interval as
// "(lo-hi)" beside it where the row has one. The policy column is as wide as the longest spec, so
// "dbtrimkv:buffer=0,gates=..." keeps the table straight.
void print_score_table(const std::vector<ScoreRow>& rows, std::vector<std::string> columns = {});

}  // namespace retain
