#include "eval/scores.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

#include "core/error.h"

namespace retain {

void write_scores(const fs::path& dir, const std::string& benchmark,
                  const std::vector<ScoreRow>& rows, const Json& run) {
  Json results = Json::array();
  std::set<std::string> columns;
  for (const auto& row : rows) {
    results.push_back({{"policy", row.policy},
                       {"budget", row.budget ? Json(*row.budget) : Json(nullptr)},
                       {"metrics", row.metrics}});
    for (const auto& [key, _] : row.metrics.items()) columns.insert(key);
  }
  Json scores = {{"benchmark", benchmark}, {"results", results}};
  if (!run.is_null()) scores["run"] = run;
  write_json_file_atomic(dir / "scores.json", scores);

  std::ostringstream csv;
  csv << "policy,budget";
  for (const auto& c : columns) csv << "," << c;
  csv << "\n";
  for (const auto& row : rows) {
    csv << row.policy << "," << (row.budget ? std::to_string(*row.budget) : "");
    for (const auto& c : columns)
      csv << "," << (row.metrics.contains(c) ? row.metrics[c].dump() : "");
    csv << "\n";
  }
  write_text_file_atomic(dir / "scores.csv", csv.str());
}

void print_score_table(const std::vector<ScoreRow>& rows, std::vector<std::string> columns) {
  if (rows.empty()) return;
  if (columns.empty())
    for (const auto& [name, _] : rows.front().metrics.items()) columns.push_back(name);
  int policy_width = 6;
  for (const auto& r : rows)
    policy_width = std::max(policy_width, static_cast<int>(r.policy.size()));
  std::printf("%-*s %-8s", policy_width, "policy", "budget");
  std::vector<int> widths;
  for (const auto& c : columns) {
    widths.push_back(std::max(10, static_cast<int>(c.size())));
    std::printf(" %*s", widths.back(), c.c_str());
  }
  std::printf("\n");
  for (const auto& r : rows) {
    std::printf("%-*s %-8s", policy_width, r.policy.c_str(),
                r.budget ? str_cat(*r.budget).c_str() : "-");
    for (size_t c = 0; c < columns.size(); ++c) {
      const Json* v = r.metrics.contains(columns[c]) ? &r.metrics[columns[c]] : nullptr;
      if (v != nullptr && v->is_number())
        std::printf(" %*.2f", widths[c], v->get<double>());
      else
        std::printf(" %*s", widths[c], "-");
    }
    std::printf("\n");
  }
}

}  // namespace retain
