// The results every evaluation writes: intervals, the score files, the figures and their legend
// names.
#include <fstream>
#include <sstream>

#include "core/json.h"
#include "eval/plot.h"
#include "eval/scores.h"
#include "test_util.h"

namespace retain {
namespace {

TEST(Scores, WilsonIntervalsMatchNewcombesTable) {
  // Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table I,
  // method 3 (score interval without continuity correction), to four decimals.
  struct Case {
    int64_t correct, total;
    double lo, hi;
  };
  for (const Case& c :
       {Case{81, 263, 25.53, 36.62}, Case{15, 148, 6.24, 16.05}, Case{0, 20, 0.0, 16.11},
        Case{1, 29, 0.61, 17.18}, Case{29, 29, 88.30, 100.0}}) {
    const auto [lo, hi] = wilson_interval_percent(c.correct, c.total);
    EXPECT_NEAR(lo, c.lo, 0.006) << c.correct << "/" << c.total;
    EXPECT_NEAR(hi, c.hi, 0.006) << c.correct << "/" << c.total;
  }
  EXPECT_THROW(wilson_interval_percent(0, 0), Error);
  EXPECT_THROW(wilson_interval_percent(3, 2), Error);
}

TEST(Scores, IntervalsTravelFromTheAggregateToEveryOutput) {
  testing::TempDir tmp;
  const fs::path& dir = tmp.path();
  Json aggregate = {{"em", 50.0}, {"peak_kv_bytes", 2048.0}, {"intervals", {{"em", {25.4, 74.6}}}}};
  std::vector<ScoreRow> rows = {score_row("full", std::nullopt, aggregate),
                                score_row("snapkv:window=4", 0.1, {{"em", 25.0}})};
  EXPECT_FALSE(rows[0].metrics.contains("intervals"));
  EXPECT_EQ(rows[0].intervals["em"][1].get<double>(), 74.6);
  EXPECT_TRUE(rows[1].intervals.empty());
  write_scores(dir, "synthetic", rows);

  const Json scores = read_json_file(dir / "scores.json");
  EXPECT_EQ(scores["results"][0]["intervals"]["em"][0].get<double>(), 25.4);
  EXPECT_FALSE(scores["results"][1].contains("intervals"));
  std::ifstream csv(dir / "scores.csv");
  std::string header, full, snapkv;
  std::getline(csv, header), std::getline(csv, full), std::getline(csv, snapkv);
  EXPECT_EQ(header, "policy,budget,em,peak_kv_bytes,em_lo,em_hi");
  EXPECT_EQ(full, "full,,50.0,2048.0,25.4,74.6");
  EXPECT_EQ(snapkv, "snapkv:window=4,0.100000,25.0,,,");

  ::testing::internal::CaptureStdout();
  print_score_table(rows, {"em"});
  const std::string table = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(table.find("50.00 (25-75)"), std::string::npos) << table;
  EXPECT_NE(table.find("25.00"), std::string::npos) << table;
}

TEST(Plot, ShortPolicyNamesKeepOnlyWhatTellsSpecsApart) {
  const auto labels = short_policy_labels(
      {"full", "streaming:buffer=0", "dbtrimkv:buffer=0,gates=runs/demo/dbtrimkv.safetensors",
       "snapkv:buffer=0,window=8", "snapkv:buffer=0,window=32", "trimkv:gates=a/one.safetensors",
       "trimkv:gates=b/two.safetensors", "h2o", "h2o:buffer=0"});
  EXPECT_EQ(labels.at("full"), "full");
  EXPECT_EQ(labels.at("streaming:buffer=0"), "streaming");
  EXPECT_EQ(labels.at("dbtrimkv:buffer=0,gates=runs/demo/dbtrimkv.safetensors"), "dbtrimkv");
  EXPECT_EQ(labels.at("snapkv:buffer=0,window=8"), "snapkv:window=8");
  EXPECT_EQ(labels.at("snapkv:buffer=0,window=32"), "snapkv:window=32");
  EXPECT_EQ(labels.at("trimkv:gates=a/one.safetensors"), "trimkv:gates=one");
  EXPECT_EQ(labels.at("trimkv:gates=b/two.safetensors"), "trimkv:gates=two");
  EXPECT_EQ(labels.at("h2o"), "h2o");
  EXPECT_EQ(labels.at("h2o:buffer=0"), "h2o:buffer=0");
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Plot, WritesSmallMultiplesAndTheMemoryFigureAsPngAndSvg) {
  testing::TempDir tmp;
  const fs::path& dir = tmp.path();
  std::vector<ScoreRow> rows;
  rows.push_back(score_row("full", std::nullopt,
                           {{"em", 80.0},
                            {"em_kv", 90.0},
                            {"peak_kv_bytes", 1.0e6},
                            {"intervals", {{"em", {70.0, 88.0}}}}}));
  for (double b : {0.05, 0.1, 0.2})
    for (const std::string policy : {"streaming:buffer=0", "dbtrimkv:gates=x/g.safetensors"})
      rows.push_back(score_row(policy, b,
                               {{"em", 100 * b},
                                {"em_kv", 200 * b},
                                {"peak_kv_bytes", 1.0e6 * b},
                                {"intervals", {{"em", {50 * b, 150 * b}}}}}));
  write_score_plots(
      dir, rows,
      {"synthetic", "exact match (%)", {{"em", "all"}, {"em_kv", "kv"}}, "peak_kv_bytes"});
  for (const std::string stem : {"plot", "memory"}) {
    const std::string png = read_all(dir / (stem + ".png"));
    ASSERT_GT(png.size(), 1000u) << stem;
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << stem;
    const std::string svg = read_all(dir / (stem + ".svg"));
    EXPECT_NE(svg.find("<svg"), std::string::npos) << stem;
    EXPECT_NE(svg.find("</svg>"), std::string::npos) << stem;
    EXPECT_FALSE(fs::exists(dir / (stem + ".png.tmp"))) << stem;
  }
  EXPECT_THROW(write_score_plots(dir, rows, {"t", "y", {}, ""}), Error);
}

}  // namespace
}  // namespace retain
