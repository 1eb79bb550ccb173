// MMMU's data on disk and its prompts: the HF release's parquet layout (read through Arrow) and
// the JSONL layout give the same questions; the prompts are the official construct_prompt's and
// the scores the official evaluation's, both computed by the official code on the same questions
// and responses (scripts/peers/mmmu_official_fixture.py wrote
// tests/fixtures/mmmu_official_fixture.json from tests/fixtures/make_mmmu_fixture.py's QUESTIONS);
// Python list literals are read as ast.literal_eval reads them; bad data is refused naming the
// file and record.
#include <ATen/ATen.h>

#include "core/json.h"
#include "data/parquet_table.h"
#include "eval/benchmarks/mmmu.h"
#include "eval/metrics.h"
#include "eval/mmmu/mmmu_data.h"
#include "eval/mmmu/mmmu_scoring.h"
#include "eval/mmmu/python_literal.h"
#include "model/vision/image_io.h"
#include "model/vision/multimodal_prompt.h"
#include "test_util.h"

namespace retain {
namespace {

using testing::fixture_dir;

fs::path mmmu_fixture() { return fixture_dir("mmmu"); }

Json official() {
  return read_json_file(fs::path(RETAIN_TEST_SOURCE_DIR) / "fixtures" /
                        "mmmu_official_fixture.json");
}

TEST(MmmuData, PythonListLiteralsAsAstLiteralEval) {
  if (const auto why = testing::fixture_skipped("mmmu"); !why.empty()) GTEST_SKIP() << why;
  const Json cases = read_json_file(mmmu_fixture() / "literals.json");
  ASSERT_GE(cases.size(), 20u);
  for (const auto& c : cases) {
    const std::string text = c["text"].get<std::string>();
    std::string error;
    const auto value = parse_python_string_list(text, &error);
    if (c.contains("error")) {
      EXPECT_FALSE(value.has_value()) << "accepted what Python refuses: " << text;
      EXPECT_FALSE(error.empty()) << text;
    } else {
      ASSERT_TRUE(value.has_value()) << text << ": " << error;
      EXPECT_EQ(*value, c["value"].get<std::vector<std::string>>()) << text;
    }
  }
}

TEST(MmmuData, ReleaseLayoutInTheOfficialOrderWithTheOfficialPrompts) {
  if (const auto why = testing::fixture_skipped("mmmu"); !why.empty()) GTEST_SKIP() << why;
  if (!ParquetTable::available()) GTEST_SKIP() << "built without Arrow (pyarrow)";
  const auto questions = load_mmmu(mmmu_fixture() / "release", {});
  const Json expected = official()["questions"];
  ASSERT_EQ(questions.size(), expected.size());
  for (size_t i = 0; i < questions.size(); ++i) {
    EXPECT_EQ(questions[i].id, expected[i]["id"].get<std::string>());
    EXPECT_EQ(mmmu_prompt_text(questions[i]), expected[i]["prompt"].get<std::string>())
        << questions[i].id;
  }
  // Subjects in CAT_SHORT2LONG's order although the files are read in another.
  EXPECT_EQ(questions.front().subject, "Accounting");
  EXPECT_EQ(questions[3].subject, "Art_Theory");
  EXPECT_EQ(questions.back().subject, "Math");
  EXPECT_EQ(questions[3].images.size(), 4u);
  EXPECT_EQ(questions[3].options, (std::vector<std::string>{"<image 3>", "<image 4>", "Neither"}));
  EXPECT_EQ(questions[4].options[1], "O'Keeffe");
  EXPECT_EQ(questions[5].answers, (std::vector<std::string>{"Impressionism", "impressionist"}));
  EXPECT_EQ(questions[6].options[0], "$\\frac{1}{2}$");
  EXPECT_TRUE(questions[6].images.empty());

  MmmuLoadOptions dev;
  dev.split = "dev";
  const auto dev_questions = load_mmmu(mmmu_fixture() / "release", dev);
  ASSERT_EQ(dev_questions.size(), 1u);
  EXPECT_EQ(dev_questions[0].id, "dev_Math_1");

  MmmuLoadOptions some;
  some.subjects = {"Math", "Accounting"};
  some.limit = 2;
  const auto limited = load_mmmu(mmmu_fixture() / "release", some);
  ASSERT_EQ(limited.size(), 4u);
  EXPECT_EQ(limited[0].id, "validation_Accounting_1");
  EXPECT_EQ(limited[2].id, "validation_Math_1");
}

TEST(MmmuData, JsonlLayoutEqualsTheRelease) {
  if (const auto why = testing::fixture_skipped("mmmu"); !why.empty()) GTEST_SKIP() << why;
  if (!ParquetTable::available()) GTEST_SKIP() << "built without Arrow (pyarrow)";
  const auto parquet = load_mmmu(mmmu_fixture() / "release", {});
  const auto jsonl = load_mmmu(mmmu_fixture() / "jsonl", {});
  ASSERT_EQ(parquet.size(), jsonl.size());
  for (size_t i = 0; i < parquet.size(); ++i) {
    const auto &a = parquet[i], &b = jsonl[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(mmmu_prompt_text(a), mmmu_prompt_text(b));
    EXPECT_EQ(a.answers, b.answers);
    ASSERT_EQ(a.images.size(), b.images.size()) << a.id;
    for (const auto& [n, image] : a.images) {
      ASSERT_FALSE(image.bytes.empty());
      const at::Tensor from_parquet = decode_image_rgb(image.bytes, a.where);
      const at::Tensor from_file = read_image_rgb(b.images.at(n).file);
      EXPECT_TRUE(at::equal(from_parquet, from_file)) << a.id << " image_" << n;
    }
  }
}

TEST(MmmuData, ImagesInlineOrFirst) {
  if (const auto why = testing::fixture_skipped("mmmu"); !why.empty()) GTEST_SKIP() << why;
  const auto questions = load_mmmu(mmmu_fixture() / "jsonl", {});
  const MmmuQuestion& q = questions[3];  // Art_Theory_1: <image 1> twice, images as options
  const MmmuMessage in = mmmu_message(q, "inline");
  EXPECT_EQ(in.images, (std::vector<int>{1, 2, 1, 3, 4}));
  EXPECT_EQ(in.text.find("<image"), std::string::npos);
  EXPECT_NE(in.text.find(std::string("(A) ") + kQwenImageBlock + "\n"), std::string::npos);
  const MmmuMessage first = mmmu_message(q, "first");
  EXPECT_EQ(first.images, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(first.text.rfind(kQwenImageBlock, 0), 0u);
  EXPECT_NE(first.text.find("Compare <image 1> and <image 2>."), std::string::npos);
  EXPECT_TRUE(mmmu_message(questions[6], "inline").images.empty());
  // By number, whatever order the tags come in (lmms-eval sorts them).
  MmmuQuestion reversed = q;
  reversed.question = "See <image 2> then <image 1>.";
  reversed.options = {"x", "y"};
  EXPECT_EQ(mmmu_message(reversed, "first").images, (std::vector<int>{1, 2}));
  EXPECT_EQ(mmmu_message(reversed, "inline").images, (std::vector<int>{2, 1}));
}

TEST(MmmuData, ScoresEqualTheOfficialEvaluation) {
  if (const auto why = testing::fixture_skipped("mmmu"); !why.empty()) GTEST_SKIP() << why;
  const auto questions = load_mmmu(mmmu_fixture() / "jsonl", {});
  const Json responses = read_json_file(mmmu_fixture() / "responses.json");
  std::vector<Json> records;
  for (const auto& q : questions)
    records.push_back({{"id", q.id},
                       {"subject", q.subject},
                       {"question_type", q.question_type},
                       {"answers", q.answers},
                       {"options", q.options},
                       {"response", responses.at(q.id)}});
  std::vector<MmmuJudgement> judged;
  const Json metrics = mmmu_metrics(
      records, [](size_t i) { return str_cat("record ", i); }, &judged);
  const Json expected = official();
  for (size_t i = 0; i < records.size(); ++i) {
    const Json& e = expected["questions"][i];
    EXPECT_EQ(judged[i].correct, e["correct"].get<bool>()) << e["id"];
    if (e["parsed"].is_string()) {
      EXPECT_EQ(judged[i].parsed, e["parsed"].get<std::string>());
    }
  }
  for (const auto& [key, acc] : expected["accuracy"].items())
    EXPECT_DOUBLE_EQ(metrics.at(key).get<double>(), python_round(100.0 * acc.get<double>(), 1))
        << key;
  EXPECT_EQ(metrics["questions"].get<int64_t>(), 9);
}

TEST(MmmuData, BadDataNamesTheFileAndRecord) {
  if (const auto why = testing::fixture_skipped("mmmu"); !why.empty()) GTEST_SKIP() << why;
  const fs::path bad = mmmu_fixture() / "bad";
  if (ParquetTable::available()) {
    EXPECT_ERROR_CONTAINS(load_mmmu(bad / "other_schema", {}), "no column 'id'");
    EXPECT_ERROR_CONTAINS(load_mmmu(bad / "other_schema", {}), "other_schema/validation-");
    EXPECT_ERROR_CONTAINS(load_mmmu(bad / "missing_image", {}),
                          "row 0: <image 3> is referenced but image_3 is empty");
    EXPECT_ERROR_CONTAINS(load_mmmu(bad / "bad_letter", {}),
                          "answer 'D' is not one of the option letters A-C");
    EXPECT_ERROR_CONTAINS(load_mmmu(bad / "not_parquet", {}), "not_parquet/Art/validation-");
    const auto questions = load_mmmu(bad / "bad_image", {});
    EXPECT_ERROR_CONTAINS(
        decode_image_rgb(questions[0].images.at(1).bytes, questions[0].where + " image_1"),
        "bad_image/Art/validation-00000-of-00001.parquet row 0 image_1");
    ParquetTable table(bad / "other_schema" / "validation-00000-of-00001.parquet");
    EXPECT_ERROR_CONTAINS(table.image_column("question"), "expected an image column");
    EXPECT_ERROR_CONTAINS(table.text_column("index"), "expected a string column");
    EXPECT_EQ(table.integer_column("index"), (std::vector<std::optional<int64_t>>{0, 1}));
  }
  EXPECT_ERROR_CONTAINS(load_mmmu(mmmu_fixture() / "release", {"test", {}, 0}),
                        "no test.jsonl and no test-*.parquet");
  MmmuLoadOptions unknown;
  unknown.subjects = {"Astrology"};
  EXPECT_ERROR_CONTAINS(load_mmmu(mmmu_fixture() / "jsonl", unknown),
                        "'Astrology' is not one of MMMU's 30 subjects");
  testing::TempDir dir;
  write_text_file_atomic(
      dir / "validation.jsonl",
      "{\"id\": \"validation_Math_1\", \"question\": \"q\", \"options\": "
      "\"['a', 'b'\", \"answer\": \"A\", \"question_type\": \"multiple-choice\"}\n");
  EXPECT_ERROR_CONTAINS(load_mmmu(dir.path(), {}),
                        "validation.jsonl:1: options is not a Python list of strings");
}

}  // namespace
}  // namespace retain
