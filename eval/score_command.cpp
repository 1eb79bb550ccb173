#include "eval/score_command.h"

#include <algorithm>
#include <fstream>
#include <map>

#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "eval/benchmarks/longbench.h"
#include "eval/benchmarks/longbench_v2.h"
#include "eval/benchmarks/mmstar.h"
#include "eval/math/math_grading.h"
#include "eval/mmmu/mmmu_data.h"
#include "eval/mmmu/mmmu_scoring.h"
#include "eval/plot.h"
#include "eval/scores.h"
#include "model/tokenizers/regex.h"

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

std::string extract_choice(const std::string& response) {
  std::string text;
  for (char c : response)
    if (c != '*') text.push_back(c);
  static const Regex with_parens("The correct answer is \\(([A-D])\\)", "longbench-v2");
  static const Regex bare("The correct answer is ([A-D])", "longbench-v2");
  for (const Regex* r : {&with_parens, &bare}) {
    auto hits = r->find_all(text);
    if (!hits.empty()) return text.substr(hits[0].second - (r == &with_parens ? 2 : 1), 1);
  }
  return "";
}

int run_score_command(const ScoreCommandOptions& o) {
  RETAIN_CHECK(o.benchmark == "longbench" || o.benchmark == "longbench-v2" ||
                   o.benchmark == "mmmu" || o.benchmark == "mmstar" || o.benchmark == "math",
               "eval score: --benchmark '", o.benchmark,
               "' is not supported (expected longbench, longbench-v2, mmmu, mmstar or math)");
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
    // LongBench's own pred files are named after their dataset and carry no "dataset" field.
    if (o.benchmark == "longbench" && !j.contains("dataset"))
      j["dataset"] = fs::path(o.predictions).stem().string();
    if (o.benchmark == "longbench" && o.e) json_get<double>(j, "length", where);  // required
    group_of(j).records.push_back(j);
  }

  if (o.benchmark == "mmmu" || o.benchmark == "mmstar")
    for (const auto& g : groups)
      for (const auto& j : g.records)
        RETAIN_CHECK(j.value("setting", "") == g.records.front().value("setting", ""),
                     o.predictions, ":", j["__line"].get<int64_t>(), ": policy ", g.policy,
                     " has predictions made under other settings (a run re-used with other "
                     "--images / --max-pixels / --budget-scope / --max-new-tokens; see each "
                     "record's \"setting\"); re-score them apart");
  if (o.benchmark == "mmmu")
    for (auto& g : groups) {
      // The official parser draws its random fallbacks in the official question order: subjects
      // as CAT_SHORT2LONG lists them, each subject's questions as stored (the file's order).
      const auto& subjects = mmmu_subjects();
      auto rank = [&](const Json& j) {
        const std::string s = j.value("subject", "");
        return std::find(subjects.begin(), subjects.end(), s) - subjects.begin();
      };
      std::stable_sort(g.records.begin(), g.records.end(),
                       [&](const Json& a, const Json& b) { return rank(a) < rank(b); });
    }
  std::vector<ScoreRow> rows;
  for (const auto& g : groups) {
    auto where = [&](size_t i) {
      return str_cat(o.predictions, ":", g.records[i]["__line"].get<int64_t>());
    };
    std::optional<double> budget;
    if (g.budget.is_number()) budget = g.budget.get<double>();
    if (o.benchmark == "math") {
      const auto kind = parse_math_benchmark(
          json_get<std::string>(g.records.front(), "math_benchmark", where(0)));
      rows.push_back(score_row(g.policy, budget, math_metrics(kind, g.records, where)));
      continue;
    }
    Json metrics = o.benchmark == "longbench" ? longbench_metrics(g.records, o.e, where)
                   : o.benchmark == "mmmu"    ? mmmu_metrics(g.records, where)
                   : o.benchmark == "mmstar"  ? mmstar_metrics(g.records, where)
                                              : longbench_v2_metrics(g.records, where);
    rows.push_back({g.policy, budget, metrics});
  }
  fs::path out = o.out.empty() ? fs::path(o.predictions).parent_path() : fs::path(o.out);
  if (out.empty()) out = ".";
  write_scores(out, o.benchmark, rows);
  PlotSpec plot{
      o.benchmark, "score", {{o.benchmark == "longbench" ? "avg" : "overall", "overall"}}, ""};
  std::vector<std::string> columns;
  if (o.benchmark == "math") {
    plot = {"math", "accuracy (%)", {{"pass@1", "pass@1"}, {"maj@n", "maj@N"}}, ""};
    columns = {"pass@1", "maj@n", "unparsed", "truncated", "mean_new_tokens"};
    if (!rows.empty()) write_score_plots(out, rows, plot);
  } else if (o.benchmark == "mmmu") {
    // The disciplines; the 30 subjects stay in scores.json / scores.csv.
    columns.push_back("overall");
    for (const auto& [discipline, subjects] : mmmu_disciplines()) {
      plot.panels.push_back({discipline, discipline});
      columns.push_back(discipline);
    }
    if (!rows.empty()) write_score_plots(out, rows, plot);
  } else if (o.benchmark == "mmstar") {
    // The categories; "category(l2)" stays in scores.json / scores.csv.
    columns.push_back("overall");
    if (!rows.empty()) {
      for (const auto& [metric, value] : rows.front().metrics.items())
        if (metric != "overall" && metric != "questions" && metric.find('(') == std::string::npos) {
          plot.panels.push_back({metric, metric});
          columns.push_back(metric);
        }
      write_score_plots(out, rows, plot);
    }
  } else if (!rows.empty()) {
    // One panel per dataset or split; LongBench-E's length buckets ("hotpotqa/0-4k") stay in
    // the table.
    for (const auto& [metric, value] : rows.front().metrics.items())
      if (metric != plot.panels.front().metric && value.is_number() &&
          metric.find('/') == std::string::npos)
        plot.panels.push_back({metric, metric});
    write_score_plots(out, rows, plot);
  }
  print_score_table(rows, columns);
  log_info("wrote ", (out / "scores.json").string());
  return 0;
}

}  // namespace retain
