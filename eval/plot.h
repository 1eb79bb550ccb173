// The figures every `retain eval` writes, drawn with cairo into PNG and SVG from one drawing:
//   DIR/plot.{png,svg}    small multiples, one panel per metric (the benchmark's headline first):
//                         the metric against the budget, a line per policy, 95% intervals as bars
//                         where the rows carry them, the full cache as a dashed line over its band;
//   DIR/memory.{png,svg}  with a memory metric: the headline metric against the peak KV bytes,
//                         one line per policy through its budgets, the full cache as a star.
// Legends use short policy names (short_policy_labels).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/fs.h"
#include "eval/scores.h"

namespace retain {

struct PlotPanel {
  std::string metric;  // a key of ScoreRow::metrics
  std::string label;   // the panel's title
};

struct PlotSpec {
  std::string title;
  std::string y_label;  // e.g. "exact match (%)"
  std::vector<PlotPanel> panels;
  std::string memory_metric;  // e.g. "peak_kv_bytes"; empty: no memory figure
  // Every panel's metric is a percentage (RULER's and LongBench's task scores): a y axis runs
  // from 0 to 100 when its values and intervals lie within it (panel_y_range), so panels and runs
  // compare at a glance.
  bool percent = false;
};

void write_score_plots(const fs::path& dir, const std::vector<ScoreRow>& rows,
                       const PlotSpec& spec);

// The y range a panel of `metric` gets: 0-100 for a percentage (`percent`, or a metric named as
// one, e.g. em_*, *acc*) whose values and intervals lie within it, else the data's range with a
// 6% margin.
std::pair<double, double> panel_y_range(const std::vector<ScoreRow>& rows,
                                        const std::string& metric, bool percent);

// How the i-th policy of a figure is drawn: a colour of Tableau 10 and a marker; past the ten
// colours the markers change (a circle for the first ten series, then a square, then a triangle),
// so every pair of up to 30 series differs.
enum class MarkerShape { kCircle, kSquare, kTriangle };
struct SeriesStyle {
  double r, g, b;
  MarkerShape shape;
};
SeriesStyle series_style(size_t index);

// Legend names for policy specs: the policy's name alone where no other spec shares it, else the
// name and the arguments that tell the specs of that name apart (a gate file by its stem), e.g.
// "dbtrimkv:buffer=0,gates=runs/demo/dbtrimkv.safetensors" -> "dbtrimkv".
std::map<std::string, std::string> short_policy_labels(const std::vector<std::string>& specs);

}  // namespace retain
