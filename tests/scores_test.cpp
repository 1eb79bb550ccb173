// The results every evaluation writes: intervals, the score files, the figures and their legend
// names.
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

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
  // All right or all wrong: the interval holds the score exactly, however the rounding falls.
  for (int64_t total = 1; total <= 500; ++total) {
    EXPECT_EQ(wilson_interval_percent(total, total).second, 100.0) << total;
    EXPECT_EQ(wilson_interval_percent(0, total).first, 0.0) << total;
  }
}

TEST(Scores, PairedDifferenceIntervalsMatchNewcombesMethodTen) {
  // Fagerland, Lydersen and Laake's worked example of Newcombe's square-and-add interval for
  // paired data (Cavo et al. 2012; the R package contingencytables prints -0.0621, 95% CI -0.1186
  // to -0.0046): 59 right under both, 6 under the first alone, 16 under the second alone, 80
  // under neither.
  const auto [lo, hi] = paired_difference_interval_percent(59, 6, 16, 80);
  EXPECT_NEAR(lo, -11.86, 0.006);
  EXPECT_NEAR(hi, -0.46, 0.006);
  // Swapping the two sides mirrors the interval.
  const auto [mirror_lo, mirror_hi] = paired_difference_interval_percent(59, 16, 6, 80);
  EXPECT_NEAR(mirror_lo, -hi, 1e-9);
  EXPECT_NEAR(mirror_hi, -lo, 1e-9);
  // Two sides that agree on every unit: a difference of 0 with a narrow, non-empty interval that
  // contains it, at either end of the scale too.
  for (const auto& [both, neither] : {std::pair{300, 102}, std::pair{402, 0}, std::pair{0, 402}}) {
    const auto [agree_lo, agree_hi] = paired_difference_interval_percent(both, 0, 0, neither);
    EXPECT_LT(agree_lo, 0) << both;
    EXPECT_GT(agree_hi, 0) << both;
    EXPECT_GT(agree_lo, -2) << both;
    EXPECT_LT(agree_hi, 2) << both;
  }
  // Far narrower than either proportion's own interval when most units agree.
  const auto [narrow_lo, narrow_hi] = paired_difference_interval_percent(200, 4, 14, 184);
  const auto [own_lo, own_hi] = wilson_interval_percent(204, 402);
  EXPECT_LT(narrow_hi - narrow_lo, (own_hi - own_lo) / 2);
  EXPECT_LT(narrow_hi, 0);  // 10 more wrong of 402: a gap the pairs can tell
  EXPECT_THROW(paired_difference_interval_percent(0, 0, 0, 0), Error);
  EXPECT_THROW(paired_difference_interval_percent(1, -1, 0, 0), Error);
}

TEST(Scores, DifferencesToTheFullCachePairTheSameUnits) {
  // Five units: the full cache answers 1, 2 and 5; h2o answers 1 and 4; random has no outcomes.
  std::vector<ScoreRow> rows = {score_row("h2o", 0.1, {{"em", 40.0}}),
                                score_row("full", std::nullopt, {{"em", 60.0}}),
                                score_row("random", 0.1, {{"em", 0.0}})};
  const std::vector<std::optional<std::vector<bool>>> outcomes = {
      std::vector<bool>{true, false, false, true, false},
      std::vector<bool>{true, true, false, false, true}, std::nullopt};
  add_differences_to_full(rows, outcomes, "em");
  // h2o: both right on unit 1, h2o alone on 4, the full cache alone on 2 and 5, neither on 3.
  EXPECT_DOUBLE_EQ(rows[0].metrics["em_vs_full"].get<double>(), -20.0);
  const auto [lo, hi] = paired_difference_interval_percent(1, 1, 2, 1);
  EXPECT_DOUBLE_EQ(rows[0].intervals["em_vs_full"][0].get<double>(), lo);
  EXPECT_DOUBLE_EQ(rows[0].intervals["em_vs_full"][1].get<double>(), hi);
  EXPECT_FALSE(rows[1].metrics.contains("em_vs_full"));  // not against itself
  EXPECT_FALSE(rows[2].metrics.contains("em_vs_full"));  // nothing to pair
  // Another number of units than the full cache's is an error, not a silent pairing.
  std::vector<ScoreRow> short_rows = {score_row("h2o", 0.1, {{"em", 0.0}}),
                                      score_row("full", std::nullopt, {{"em", 0.0}})};
  EXPECT_ERROR_CONTAINS(
      add_differences_to_full(short_rows, {std::vector<bool>{true}, std::vector<bool>{true, false}},
                              "em"),
      "1 units against the full cache's 2");
  // Without a full-cache row nothing is added.
  std::vector<ScoreRow> no_full = {score_row("h2o", 0.1, {{"em", 0.0}})};
  add_differences_to_full(no_full, {std::vector<bool>{true}}, "em");
  EXPECT_FALSE(no_full[0].metrics.contains("em_vs_full"));
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
  // A difference whose interval reaches below zero prints signed bounds.
  rows[1].metrics["em_vs_full"] = -2.5;
  rows[1].intervals["em_vs_full"] = {-4.61, -0.42};
  ::testing::internal::CaptureStdout();
  print_score_table(rows, {"em_vs_full"});
  const std::string differences = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(differences.find("-2.50 (-4.6, -0.4)"), std::string::npos) << differences;
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

// A task score (RULER's niah_single_1, LongBench's narrativeqa) spans 0-100 when the plot says its
// metrics are percentages, so panels of one figure and figures of two runs read alike; without
// that, or with a value outside 0-100, the axis is the data's range with a margin.
TEST(Plot, PercentPanelsSpanZeroToAHundred) {
  std::vector<ScoreRow> rows = {
      score_row("full", std::nullopt, {{"niah_single_1", 56.0}}),
      score_row("snapkv", 0.1,
                {{"niah_single_1", 12.5}, {"intervals", {{"niah_single_1", {5.0, 20.0}}}}})};
  EXPECT_EQ(panel_y_range(rows, "niah_single_1", true), std::make_pair(0.0, 100.0));
  const auto [lo, hi] = panel_y_range(rows, "niah_single_1", false);
  EXPECT_NEAR(lo, 5.0 - 0.06 * 51.0, 1e-9);
  EXPECT_NEAR(hi, 56.0 + 0.06 * 51.0, 1e-9);
  EXPECT_EQ(panel_y_range(rows, "em_kv", false), std::make_pair(0.0, 1.0));  // no data: 0-1
  rows.push_back(score_row("h2o", 0.1, {{"niah_single_1", 130.0}}));
  EXPECT_GT(panel_y_range(rows, "niah_single_1", true).second, 130.0);
}

// The legend makes room for its longest label: two gate files of one policy are told apart by
// their names, which may be long; the figure widens rather than cutting the name off.
TEST(Plot, TheFigureWidensForALongLegendLabel) {
  const auto png_width = [](const fs::path& png) {
    const std::string bytes = read_all(png);  // IHDR: the width at bytes 16-19, big-endian
    EXPECT_GT(bytes.size(), 24u);
    uint32_t w = 0;
    for (int i = 16; i < 20; ++i) w = (w << 8) | static_cast<unsigned char>(bytes[i]);
    return w;
  };
  const auto width_with = [&](const std::string& gate_file) {
    testing::TempDir tmp;
    std::vector<ScoreRow> rows = {score_row("full", std::nullopt, {{"em", 50.0}})};
    for (const std::string& gates : std::vector<std::string>{"g.safetensors", gate_file})
      rows.push_back(score_row("dbtrimkv:gates=" + gates, 0.1, {{"em", 40.0}}));
    write_score_plots(tmp.path(), rows, {"t", "y", {{"em", "all"}}, "peak_kv_bytes"});
    return png_width(tmp.path() / "plot.png");
  };
  const uint32_t short_name = width_with("h.safetensors");
  const uint32_t long_name = width_with("dbtrimkv-fine-tuned-on-3072-token-rows.safetensors");
  EXPECT_GT(long_name, short_name + 2 * 150);  // drawn at 2x; ~40 more characters at 11 px
}

// The demo draws 11 budgeted policies against a palette of 10 colours: the eleventh shares the
// first one's colour and must differ in its marker. Every pair of the first 30 series differs.
TEST(Plot, SeriesPastThePaletteDifferInTheirMarkers) {
  auto key = [](const SeriesStyle& s) {
    return std::tuple{s.r, s.g, s.b, static_cast<int>(s.shape)};
  };
  std::set<std::tuple<double, double, double, int>> seen;
  for (size_t i = 0; i < 30; ++i) EXPECT_TRUE(seen.insert(key(series_style(i))).second) << i;
  const SeriesStyle first = series_style(0), eleventh = series_style(10);
  EXPECT_EQ(std::tuple(first.r, first.g, first.b), std::tuple(eleventh.r, eleventh.g, eleventh.b));
  EXPECT_EQ(first.shape, MarkerShape::kCircle);
  EXPECT_EQ(eleventh.shape, MarkerShape::kSquare);
}

}  // namespace
}  // namespace retain
