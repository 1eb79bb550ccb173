// The results schema every `retain eval` writes:
//   DIR/scores.json  {"benchmark": B, "results": [{"policy", "budget", "metrics": {...}}, ...]}
//   DIR/scores.csv   policy,budget,<metric columns...>
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/json.h"

namespace retain {

struct ScoreRow {
  std::string policy;
  std::optional<double> budget;  // null for the full cache
  Json metrics;                  // flat object of numbers
};

void write_scores(const fs::path& dir, const std::string& benchmark,
                  const std::vector<ScoreRow>& rows, const Json& run = nullptr);

// Prints the rows as an aligned table on stdout: policy, budget, then `columns` (metric names;
// empty: every metric of the first row), two decimals. The policy column is as wide as the longest
// spec, so "dbtrimkv:buffer=0,gates=..." keeps the table straight.
void print_score_table(const std::vector<ScoreRow>& rows, std::vector<std::string> columns = {});

}  // namespace retain
