// Bootstrap intervals for metrics whose units score a share in [0, 1] rather than right or wrong
// (RULER's string match over several needles), where the Wilson and Newcombe intervals of
// eval/scores.h do not apply.
//
// A metric here is the mean over strata of the mean score within each stratum (RULER: a task at
// one length; "ruler" is the mean over its tasks), in percent. Its interval is the percentile
// interval of the stratified bootstrap: each resample draws, within every stratum, as many units
// as the stratum has, with replacement, so every resample has the design of the run (the same
// units per task) and the spread comes from the prompts alone. A difference to the full cache is
// paired: the same drawn units score under both, so what the two policies share cancels.
//
// The draws come from a SplitMix64 stream with a fixed seed and an index taken as the high word of
// a 64x64-bit product, so the same predictions give the same interval on every platform and
// standard library.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "eval/scores.h"

namespace retain {

// One unit of a (policy, budget) cell: its key (the same unit under another policy has the same
// key), its stratum, and its score in [0, 1].
struct ScoredUnit {
  std::string key;
  std::string stratum;
  double score = 0;
};

// A headline the sweep gives an interval: the mean over the strata `includes` accepts.
struct BootstrapMetric {
  std::string name;
  std::function<bool(const std::string& stratum)> includes;
};

struct BootstrapSettings {
  int64_t resamples = 10000;
  uint64_t seed = 0;
  double confidence = 0.95;
};

// values[s]: the scores of stratum s (each stratum non-empty). The mean over strata of the mean
// within each, and its stratified-bootstrap percentile interval (numpy's linear interpolation
// between order statistics), all x 100.
struct BootstrapEstimate {
  double mean = 0, lo = 0, hi = 0;
};
BootstrapEstimate stratified_bootstrap_percent(const std::vector<std::vector<double>>& values,
                                               const BootstrapSettings& settings = {});

// For every row with units and every metric whose strata it has: intervals[name] (metrics[name]
// too where the aggregate has not written it: the estimate's mean); then, where a row of policy "full" has units, every other row's
// name + "_vs_full" (this row minus the full cache over the same units, resampled together) and
// its interval. units[r]: row r's units (empty: the row gets nothing). A unit the full cache has
// not scored, or scored in another stratum, is an error naming it: a paired difference over other
// prompts would mean nothing. A row with fewer units (a stopped sweep) is paired over those, with
// a warning.
void add_bootstrap_intervals(std::vector<ScoreRow>& rows,
                             const std::vector<std::vector<ScoredUnit>>& units,
                             const std::vector<BootstrapMetric>& metrics,
                             const BootstrapSettings& settings = {});

}  // namespace retain
