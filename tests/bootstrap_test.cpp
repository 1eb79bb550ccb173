// Stratified-bootstrap intervals for share-valued scores (RULER) and their paired differences to
// the full cache.
#include <cmath>

#include "eval/bootstrap.h"
#include "test_util.h"

namespace retain {
namespace {

TEST(Bootstrap, ConstantScoresGiveAnIntervalOfNoWidth) {
  const auto e = stratified_bootstrap_percent({{0.25, 0.25, 0.25}});
  EXPECT_DOUBLE_EQ(e.mean, 25);
  EXPECT_DOUBLE_EQ(e.lo, 25);
  EXPECT_DOUBLE_EQ(e.hi, 25);
}

TEST(Bootstrap, ResamplesWithinEachStratum) {
  // Two tasks, one always right and one always wrong: the design fixes the mean at 50, so a
  // stratified bootstrap has nothing to vary. Drawing over all eight units together would give
  // about 50 +- 35.
  const auto e = stratified_bootstrap_percent({{1, 1, 1, 1}, {0, 0, 0, 0}});
  EXPECT_DOUBLE_EQ(e.mean, 50);
  EXPECT_DOUBLE_EQ(e.lo, 50);
  EXPECT_DOUBLE_EQ(e.hi, 50);
  // The mean is over strata, not units: a stratum of one unit weighs as much as one of four.
  EXPECT_DOUBLE_EQ(stratified_bootstrap_percent({{1}, {0, 0, 0, 0}}).mean, 50);
}

TEST(Bootstrap, AgreesWithTheNormalApproximationOnManyUnits) {
  // 400 evenly spread scores in [0, 1]: mean 50, standard error sd / sqrt(n) = 1.446 points, so
  // the 95% interval is about 50 -+ 2.83. 10,000 resamples put each bound within ~0.1 of it.
  std::vector<double> scores;
  for (int i = 0; i < 400; ++i) scores.push_back(i / 399.0);
  double variance = 0;
  for (double x : scores) variance += (x - 0.5) * (x - 0.5);
  variance /= static_cast<double>(scores.size());
  const double half = 100 * 1.959964 * std::sqrt(variance / 400.0);
  const auto e = stratified_bootstrap_percent({scores});
  EXPECT_NEAR(e.mean, 50, 1e-9);
  EXPECT_NEAR(e.lo, 50 - half, 0.25);
  EXPECT_NEAR(e.hi, 50 + half, 0.25);
  // A narrower confidence gives a narrower interval inside it.
  const auto narrow = stratified_bootstrap_percent({scores}, {10000, 0, 0.5});
  EXPECT_GT(narrow.lo, e.lo);
  EXPECT_LT(narrow.hi, e.hi);
  EXPECT_NEAR(narrow.hi - narrow.lo, 2 * 0.6745 * half / 1.959964, 0.25);
}

TEST(Bootstrap, TheSameSeedGivesTheSameIntervalAndAnotherSeedAnother) {
  const std::vector<std::vector<double>> values = {{0, 1, 0.5, 1, 0}, {1, 1, 0, 0.25}};
  const auto a = stratified_bootstrap_percent(values, {2000, 7, 0.95});
  const auto b = stratified_bootstrap_percent(values, {2000, 7, 0.95});
  const auto c = stratified_bootstrap_percent(values, {2000, 8, 0.95});
  EXPECT_EQ(a.lo, b.lo);
  EXPECT_EQ(a.hi, b.hi);
  EXPECT_TRUE(a.lo != c.lo || a.hi != c.hi);
  EXPECT_THROW(stratified_bootstrap_percent({}), Error);
  EXPECT_THROW(stratified_bootstrap_percent({{1}, {}}), Error);
  EXPECT_THROW(stratified_bootstrap_percent(values, {1, 0, 0.95}), Error);
  EXPECT_THROW(stratified_bootstrap_percent(values, {100, 0, 1.0}), Error);
}

// Eight prompts of two needle tasks and one chain task under the full cache, a policy that finds a
// quarter more of every needle prompt, and one whose prompts are not the full cache's.
std::vector<ScoredUnit> units(double shift) {
  std::vector<ScoredUnit> out;
  const double full[] = {0, 0.5, 0.25, 0.75, 0, 0.25, 0.5, 0};
  for (int i = 0; i < 8; ++i) {
    const std::string task = i < 4 ? "niah_single_1" : "niah_multivalue";
    out.push_back({str_cat(task, "-", i), task + "@2048", full[i] + shift});
  }
  out.push_back({"vt-0", "vt@2048", 1});
  out.push_back({"vt-1", "vt@2048", 0});
  return out;
}

const std::vector<BootstrapMetric> kMetrics = {
    {"ruler", [](const std::string&) { return true; }},
    {"niah", [](const std::string& s) { return s.rfind("niah", 0) == 0; }}};

TEST(Bootstrap, PairedDifferencesCancelWhatThePoliciesShare) {
  std::vector<ScoreRow> rows = {{"full", std::nullopt, {{"ruler", 12.5}}},
                                {"dbtrimkv", 0.25, Json::object()},
                                {"none", 0.25, Json::object()}};
  add_bootstrap_intervals(rows, {units(0), units(0.25), {}}, kMetrics);
  // The aggregate's own value stays; a missing one is the estimate's mean.
  EXPECT_EQ(rows[0].metrics["ruler"].get<double>(), 12.5);
  EXPECT_NEAR(rows[0].metrics["niah"].get<double>(), 28.125, 1e-9);
  EXPECT_NEAR(rows[1].metrics["niah"].get<double>(), 53.125, 1e-9);
  // Each row's own interval is wide (the prompts differ a lot)...
  const double own_lo = rows[1].intervals["niah"][0].get<double>();
  const double own_hi = rows[1].intervals["niah"][1].get<double>();
  EXPECT_LT(own_lo, 45);
  EXPECT_GT(own_hi, 60);
  // ...but the same prompts gain exactly 25 points each: the paired difference has no spread.
  EXPECT_NEAR(rows[1].metrics["niah_vs_full"].get<double>(), 25, 1e-9);
  EXPECT_NEAR(rows[1].intervals["niah_vs_full"][0].get<double>(), 25, 1e-9);
  EXPECT_NEAR(rows[1].intervals["niah_vs_full"][1].get<double>(), 25, 1e-9);
  // Over all tasks vt gains nothing: 25 on two strata of three.
  EXPECT_NEAR(rows[1].metrics["ruler_vs_full"].get<double>(), 50.0 / 3, 1e-9);
  EXPECT_FALSE(rows[0].metrics.contains("niah_vs_full"));
  EXPECT_TRUE(rows[2].metrics.empty());
  EXPECT_TRUE(rows[2].intervals.empty());
}

TEST(Bootstrap, AStoppedSweepsRowIsPairedOverTheUnitsItHas) {
  // The first needle prompt is missing: the difference is over the other seven, each 0.25 up.
  auto fewer = units(0.25);
  fewer.erase(fewer.begin());
  std::vector<ScoreRow> rows = {{"full", std::nullopt, Json::object()},
                                {"snapkv", 0.1, Json::object()}};
  add_bootstrap_intervals(rows, {units(0), fewer}, kMetrics);
  EXPECT_NEAR(rows[1].metrics["niah_vs_full"].get<double>(), 25, 1e-9);
  EXPECT_NEAR(rows[1].intervals["niah_vs_full"][0].get<double>(), 25, 1e-9);
}

TEST(Bootstrap, AnotherPolicysUnitsAreRefusedNamingTheUnit) {
  auto run = [](std::vector<ScoredUnit> other) {
    std::vector<ScoreRow> rows = {{"full", std::nullopt, Json::object()},
                                  {"snapkv", 0.1, Json::object()}};
    add_bootstrap_intervals(rows, {units(0), std::move(other)}, kMetrics);
  };
  auto extra = units(0);
  extra.push_back({"niah_single_1-9", "niah_single_1@2048", 1});
  EXPECT_ERROR_CONTAINS(run(extra), "unit 'niah_single_1-9' has no score under the full cache");
  auto moved = units(0);
  moved[0].stratum = "niah_single_1@4096";
  EXPECT_ERROR_CONTAINS(run(moved), "is in stratum 'niah_single_1@4096' here");
  auto twice = units(0);
  twice.push_back(twice.front());
  EXPECT_ERROR_CONTAINS(run(twice), "unit 'niah_single_1-0' appears twice");
  auto above = units(0);
  above[1].score = 1.5;
  EXPECT_ERROR_CONTAINS(run(above), "outside [0, 1]");
}

}  // namespace
}  // namespace retain
