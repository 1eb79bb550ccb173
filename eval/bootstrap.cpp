#include "eval/bootstrap.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "core/error.h"
#include "core/log.h"

namespace retain {

namespace {

// SplitMix64 (Steele, Lea and Flood 2014): one 64-bit word per call, the same on every platform.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // An index in [0, n): the high word of next() * n (Lemire's multiply-shift, without his
  // rejection step: the bias is below n / 2^64).
  size_t below(size_t n) {
    return static_cast<size_t>((static_cast<unsigned __int128>(next()) * n) >> 64);
  }

 private:
  uint64_t state_;
};

// The q-quantile of sorted values, interpolated linearly between order statistics (numpy's
// default, "linear").
double quantile(const std::vector<double>& sorted, double q) {
  const double position = q * static_cast<double>(sorted.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, sorted.size() - 1);
  return sorted[below] + (position - static_cast<double>(below)) * (sorted[above] - sorted[below]);
}

double mean_of_means(const std::vector<std::vector<double>>& values) {
  double total = 0;
  for (const auto& stratum : values) {
    double sum = 0;
    for (double x : stratum) sum += x;
    total += sum / static_cast<double>(stratum.size());
  }
  return total / static_cast<double>(values.size());
}

}  // namespace

BootstrapEstimate stratified_bootstrap_percent(const std::vector<std::vector<double>>& values,
                                               const BootstrapSettings& s) {
  RETAIN_CHECK(!values.empty(), "a bootstrap interval needs at least one stratum");
  for (size_t i = 0; i < values.size(); ++i)
    RETAIN_CHECK(!values[i].empty(), "a bootstrap interval needs units in every stratum; stratum ",
                 i, " has none");
  RETAIN_CHECK(s.resamples >= 2, "a bootstrap interval needs >= 2 resamples, found ", s.resamples);
  RETAIN_CHECK(s.confidence > 0 && s.confidence < 1,
               "a bootstrap interval's confidence must be in (0, 1), found ", s.confidence);
  SplitMix64 random(s.seed);
  std::vector<double> means(static_cast<size_t>(s.resamples));
  for (double& m : means) {
    double total = 0;
    for (const auto& stratum : values) {
      double sum = 0;
      for (size_t k = 0; k < stratum.size(); ++k) sum += stratum[random.below(stratum.size())];
      total += sum / static_cast<double>(stratum.size());
    }
    m = total / static_cast<double>(values.size());
  }
  std::sort(means.begin(), means.end());
  const double tail = (1 - s.confidence) / 2;
  return {100 * mean_of_means(values), 100 * quantile(means, tail),
          100 * quantile(means, 1 - tail)};
}

void add_bootstrap_intervals(std::vector<ScoreRow>& rows,
                             const std::vector<std::vector<ScoredUnit>>& units,
                             const std::vector<BootstrapMetric>& metrics,
                             const BootstrapSettings& settings) {
  RETAIN_CHECK(units.size() == rows.size(), "bootstrap intervals: units for ", units.size(),
               " rows, but there are ", rows.size());
  // Per row: key -> unit, so strata are filled in key order whatever order the units came in
  // (the interval depends on which draw meets which unit).
  std::vector<std::map<std::string, const ScoredUnit*>> by_key(rows.size());
  for (size_t r = 0; r < rows.size(); ++r)
    for (const auto& u : units[r]) {
      RETAIN_CHECK(by_key[r].emplace(u.key, &u).second, rows[r].policy, ": unit '", u.key,
                   "' appears twice");
      RETAIN_CHECK(u.score >= 0 && u.score <= 1, rows[r].policy, ": unit '", u.key, "' scores ",
                   u.score, ", outside [0, 1]");
    }
  std::optional<size_t> full;
  for (size_t r = 0; r < rows.size(); ++r)
    if (rows[r].policy == "full" && !units[r].empty()) full = r;

  for (const auto& metric : metrics) {
    // Row r's scores per included stratum (strata in name order), and the differences to the
    // full cache's scores of the same units.
    auto strata_of = [&](size_t r, const std::function<double(const ScoredUnit&)>& score) {
      std::map<std::string, std::vector<double>> strata;
      for (const auto& [key, u] : by_key[r])
        if (metric.includes(u->stratum)) strata[u->stratum].push_back(score(*u));
      std::vector<std::vector<double>> values;
      for (auto& [_, v] : strata) values.push_back(std::move(v));
      return values;
    };
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto own = strata_of(r, [](const ScoredUnit& u) { return u.score; });
      if (own.empty()) continue;
      const BootstrapEstimate estimate = stratified_bootstrap_percent(own, settings);
      if (!rows[r].metrics.contains(metric.name)) rows[r].metrics[metric.name] = estimate.mean;
      rows[r].intervals[metric.name] = {estimate.lo, estimate.hi};
      if (!full || r == *full) continue;
      int64_t full_units = 0;
      for (const auto& [_, u] : by_key[*full]) full_units += metric.includes(u->stratum) ? 1 : 0;
      int64_t paired = 0;
      const auto difference = strata_of(r, [&](const ScoredUnit& u) {
        const auto found = by_key[*full].find(u.key);
        RETAIN_CHECK(found != by_key[*full].end(), rows[r].policy, ": unit '", u.key,
                     "' has no score under the full cache; a paired difference needs the same "
                     "units (re-run the full cache over them, or drop the extra ones)");
        RETAIN_CHECK(found->second->stratum == u.stratum, rows[r].policy, ": unit '", u.key,
                     "' is in stratum '", u.stratum, "' here and in '", found->second->stratum,
                     "' under the full cache");
        ++paired;
        return u.score - found->second->score;
      });
      // Fewer units than the full cache: a sweep that was stopped, re-scored by `eval score`.
      if (paired < full_units)
        log_warn(rows[r].policy, " at ", rows[r].budget ? str_cat(*rows[r].budget) : "-", ": ",
                 metric.name, "_vs_full is over its ", paired, " units, of the full cache's ",
                 full_units);
      const BootstrapEstimate d = stratified_bootstrap_percent(difference, settings);
      const std::string name = metric.name + "_vs_full";
      rows[r].metrics[name] = d.mean;
      rows[r].intervals[name] = {d.lo, d.hi};
    }
  }
}

}  // namespace retain
