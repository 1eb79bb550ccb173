// MMStar: the release's parquet and the JSONL layout give the same questions and images; the
// prompt is the question stripped plus the official instruction; responses are judged as the
// official MMStar_eval judges them (first character, "(X", "option X", "the answer is X",
// case-insensitive, nothing else) and aggregated per category, per l2 category and overall.
#include <ATen/ATen.h>

#include "data/parquet_table.h"
#include "eval/benchmarks/mmstar.h"
#include "model/vision/image_io.h"
#include "test_util.h"

namespace retain {
namespace {

using testing::fixture_dir;

TEST(Mmstar, ReleaseAndJsonlLayoutsAgree) {
  if (const auto why = testing::fixture_skipped("mmstar"); !why.empty()) GTEST_SKIP() << why;
  if (!ParquetTable::available()) GTEST_SKIP() << "built without Arrow (pyarrow)";
  const auto parquet = load_mmstar(fixture_dir("mmstar") / "mmstar.parquet");
  const auto from_dir = load_mmstar(fixture_dir("mmstar"));
  const auto jsonl = load_mmstar(fixture_dir("mmstar") / "jsonl");
  ASSERT_EQ(parquet.size(), 3u);
  ASSERT_EQ(jsonl.size(), 3u);
  ASSERT_EQ(from_dir.size(), 3u);
  for (size_t i = 0; i < parquet.size(); ++i) {
    EXPECT_EQ(parquet[i].index, jsonl[i].index);
    EXPECT_EQ(parquet[i].question, jsonl[i].question);
    EXPECT_EQ(parquet[i].l2_category, jsonl[i].l2_category);
    EXPECT_TRUE(at::equal(decode_image_rgb(parquet[i].image_bytes, parquet[i].where),
                          read_image_rgb(jsonl[i].image_file)));
  }
  EXPECT_EQ(parquet[1].index, 7);
  EXPECT_EQ(mmstar_prompt_text(parquet[2]),
            "What follows in the sequence?\nOptions: A: 8, B: 9, C: 10, D: 11\nAnswer with the "
            "option's letter from the given choices directly.");
  EXPECT_EQ(load_mmstar(fixture_dir("mmstar") / "jsonl", 2).size(), 2u);
  EXPECT_ERROR_CONTAINS(load_mmstar(fixture_dir("mmstar") / "bad.parquet"),
                        "bad.parquet: no column 'index' (expected MMStar's columns");
}

TEST(Mmstar, JudgedAsTheOfficialEvaluation) {
  struct Case {
    const char* response;
    const char* answer;
    bool right;
  };
  const Case cases[] = {
      {"B", "B", true},
      {"b", "B", true},
      {"  B.\n", "B", true},         // stripped, lowercased
      {"B is wrong, A", "B", true},  // the first character decides
      {"(B) a dog", "B", true},      // "(" then the letter
      {"(C) a car", "B", false},
      {"Option B", "B", true},             // "option " then the letter
      {"The answer is B.", "B", true},     // "the answer is " then the letter
      {"The answer is (B).", "B", false},  // predict[14] is "("
      {"Answer: B", "B", false},
      {"", "B", false},   // predict[0] raises: wrong
      {"(", "B", false},  // predict[1] raises: wrong
      {"option", "B", false},
      {"\n\nB", "B", true},  // stripped first
      {"AB", "AB", false},   // a two-letter answer never equals one character
  };
  for (const auto& c : cases)
    EXPECT_EQ(mmstar_correct(c.response, c.answer), c.right)
        << "'" << c.response << "' vs " << c.answer;

  std::vector<Json> records = {
      {{"category", "math"}, {"l2_category", "geometry"}, {"answer", "A"}, {"response", "A"}},
      {{"category", "math"}, {"l2_category", "geometry"}, {"answer", "A"}, {"response", "B"}},
      {{"category", "math"},
       {"l2_category", "statistical reasoning"},
       {"answer", "C"},
       {"response", "(C)"}},
      {{"category", "coarse perception"},
       {"l2_category", "image emotion"},
       {"answer", "D"},
       {"response", "no idea"}},
  };
  const Json m = mmstar_metrics(records, [](size_t i) { return str_cat("record ", i); });
  EXPECT_DOUBLE_EQ(m["overall"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(m["math"].get<double>(), 66.7);
  EXPECT_DOUBLE_EQ(m["math(geometry)"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(m["math(statistical reasoning)"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(m["coarse perception"].get<double>(), 0.0);
  EXPECT_EQ(m["questions"].get<int64_t>(), 4);
}

}  // namespace
}  // namespace retain
