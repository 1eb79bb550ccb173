#include "eval/score_command.h"

#include <fstream>

#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "eval/benchmarks/scoring.h"
#include "eval/bootstrap.h"
#include "eval/plot.h"
#include "eval/scores.h"

namespace retain {

namespace {

struct Group {
  std::string policy;
  Json budget;
  std::vector<Json> records;
};

std::vector<Json> read_predictions(const std::string& path) {
  std::ifstream in(path);
  RETAIN_CHECK(in.good(), path, ": cannot open");
  std::vector<Json> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    Json j = parse_json(line, str_cat(path, ":", n));
    RETAIN_CHECK(j.is_object(), path, ":", n, ": expected a JSON object");
    j["__line"] = n;
    out.push_back(std::move(j));
  }
  RETAIN_CHECK(!out.empty(), path, ": no predictions");
  return out;
}

}  // namespace

int run_score_command(const ScoreCommandOptions& o) {
  const BenchmarkScoring& scoring = find_scoring(o.benchmark);
  auto lines = read_predictions(o.predictions);
  // Grouped by (policy, budget) in the order they first appear; a file without them (LongBench's
  // own) is one group.
  std::vector<Group> groups;
  auto group_of = [&](const Json& j) -> Group& {
    std::string policy = j.value("policy", "pred");
    Json budget = j.contains("budget") ? j["budget"] : Json(nullptr);
    for (auto& g : groups)
      if (g.policy == policy && g.budget == budget) return g;
    groups.push_back({policy, budget, {}});
    return groups.back();
  };
  for (auto& j : lines) {
    const std::string where = str_cat(o.predictions, ":", j["__line"].get<int64_t>());
    if (scoring.prepare) scoring.prepare(j, o.predictions, o.e, where);
    group_of(j).records.push_back(j);
  }
  if (scoring.one_setting_per_group)
    for (const auto& g : groups)
      for (const auto& j : g.records)
        RETAIN_CHECK(j.value("setting", "") == g.records.front().value("setting", ""),
                     o.predictions, ":", j["__line"].get<int64_t>(), ": policy ", g.policy,
                     " has predictions made under other settings (a run re-used with other "
                     "--images / --max-pixels / --budget-scope / --max-new-tokens; see each "
                     "record's \"setting\"); re-score them apart");
  if (scoring.order)
    for (auto& g : groups) scoring.order(g.records);
  std::vector<ScoreRow> rows;
  std::vector<std::vector<ScoredUnit>> units;  // per row, where the benchmark scores shares
  for (const auto& g : groups) {
    auto where = [&](size_t i) {
      return str_cat(o.predictions, ":", g.records[i]["__line"].get<int64_t>());
    };
    std::optional<double> budget;
    if (g.budget.is_number()) budget = g.budget.get<double>();
    rows.push_back(score_row(g.policy, budget, scoring.metrics(g.records, o.e, where)));
    units.emplace_back();
    if (scoring.unit_score)
      for (size_t i = 0; i < g.records.size(); ++i)
        if (auto unit = scoring.unit_score(g.records[i], where(i)))
          units.back().push_back(std::move(*unit));
  }
  if (scoring.unit_score) add_bootstrap_intervals(rows, units, scoring.bootstrap_metrics);
  fs::path out = o.out.empty() ? fs::path(o.predictions).parent_path() : fs::path(o.out);
  if (out.empty()) out = ".";
  write_scores(out, o.benchmark, rows);
  PlotSpec plot{o.benchmark, "score", {{"overall", "overall"}}, ""};
  std::vector<std::string> columns;
  scoring.figure(rows, plot, columns);
  if (!rows.empty()) write_score_plots(out, rows, plot);
  print_score_table(rows, columns);
  log_info("wrote ", (out / "scores.json").string());
  return 0;
}

}  // namespace retain
