// How `retain eval score` scores one benchmark's predictions.jsonl again without a model: an entry
// per benchmark, defined next to the benchmark (its `*_scoring()` function) and listed in
// scoring_registry(). score_command.cpp reads the file, groups it by (policy, budget) and calls
// the entry; it knows no benchmark by name.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "eval/bootstrap.h"
#include "eval/plot.h"
#include "eval/scores.h"

namespace retain {

// Where record i of a group was read ("file:line"), for error messages.
using RecordWhere = std::function<std::string(size_t)>;

struct BenchmarkScoring {
  std::string name;  // --benchmark
  // A record as read from `file` (`e`: --e); may fill fields or check them. Optional.
  std::function<void(Json& record, const std::string& file, bool e, const std::string& where)>
      prepare;
  // Whether a (policy, budget) group must have been made under one "setting" (mmmu, mmstar: a
  // run re-used with other image settings is re-scored apart).
  bool one_setting_per_group = false;
  // Puts a group's records in the order the official scoring reads them. Optional.
  std::function<void(std::vector<Json>& records)> order;
  // A group's metrics (an "intervals" object, if any, goes to the row's intervals).
  std::function<Json(const std::vector<Json>& records, bool e, const RecordWhere& where)> metrics;
  // Where units score a share in [0, 1]: a record's unit, and the metrics given stratified-
  // bootstrap intervals and paired differences to the full cache (eval/bootstrap.h). Optional.
  std::function<std::optional<ScoredUnit>(const Json& record, const std::string& where)> unit_score;
  std::vector<BootstrapMetric> bootstrap_metrics;
  // The figure's panels and the table's columns for these rows (empty columns: every metric).
  std::function<void(const std::vector<ScoreRow>& rows, PlotSpec& plot,
                     std::vector<std::string>& columns)>
      figure;
};

// The benchmarks `eval score` knows, in the order its help lists them.
const std::vector<BenchmarkScoring>& scoring_registry();
// The entry named `name`; an error listing the names otherwise.
const BenchmarkScoring& find_scoring(const std::string& name);

// Each benchmark's entry (in its own file).
BenchmarkScoring longbench_scoring();
BenchmarkScoring longbench_v2_scoring();
BenchmarkScoring mmmu_scoring();
BenchmarkScoring mmstar_scoring();
BenchmarkScoring math_scoring();
BenchmarkScoring ruler_scoring();
BenchmarkScoring videomme_scoring();

// A panel for each numeric metric of the first row whose name `panel` accepts (after the
// headline panel already in `plot`).
void add_metric_panels(const std::vector<ScoreRow>& rows, PlotSpec& plot,
                       const std::function<bool(const std::string&)>& panel);

}  // namespace retain
