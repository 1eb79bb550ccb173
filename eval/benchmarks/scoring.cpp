#include "eval/benchmarks/scoring.h"

#include "core/error.h"

namespace retain {

const std::vector<BenchmarkScoring>& scoring_registry() {
  static const std::vector<BenchmarkScoring> registry = {
      longbench_scoring(), longbench_v2_scoring(), mmmu_scoring(),    mmstar_scoring(),
      math_scoring(),      ruler_scoring(),        videomme_scoring()};
  return registry;
}

const BenchmarkScoring& find_scoring(const std::string& name) {
  std::string names;
  for (const auto& s : scoring_registry()) {
    if (s.name == name) return s;
    names += (names.empty() ? "" : ", ") + s.name;
  }
  RETAIN_CHECK(false, "eval score: --benchmark '", name, "' is not supported (expected ", names,
               ")");
  return scoring_registry().front();
}

void add_metric_panels(const std::vector<ScoreRow>& rows, PlotSpec& plot,
                       const std::function<bool(const std::string&)>& panel) {
  if (rows.empty()) return;
  for (const auto& [metric, value] : rows.front().metrics.items())
    if (metric != plot.panels.front().metric && value.is_number() && panel(metric))
      plot.panels.push_back({metric, metric});
}

}  // namespace retain
