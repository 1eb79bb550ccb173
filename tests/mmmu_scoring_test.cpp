// MMMU's answer extraction and scoring against the official evaluation (eval_utils.py): 105
// responses run through the official code in order (scripts/peers/mmmu_official_cases.py wrote
// tests/fixtures/mmmu_official_cases.json), including 17 that fall back to the seeded random draw.
#include <cmath>
#include <set>

#include "core/json.h"
#include "eval/mmmu/mmmu_scoring.h"
#include "test_util.h"

namespace retain {
namespace {

Json official_cases() {
  return read_json_file(fs::path(RETAIN_TEST_SOURCE_DIR) / "fixtures" / "mmmu_official_cases.json");
}

// The official prediction as retain's value: numbers (JSON cannot hold inf/nan: {"nonfinite"})
// or strings.
OpenValue official_value(const Json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object()) {
    const std::string kind = j["nonfinite"].get<std::string>();
    return kind == "nan" ? std::nan("") : kind == "inf" ? HUGE_VAL : -HUGE_VAL;
  }
  return j.get<double>();
}

// A set of predictions as comparable text (nan spelled out: it equals nothing, itself included).
std::multiset<std::string> spelled(const std::vector<OpenValue>& values) {
  std::multiset<std::string> out;
  for (const auto& v : values) {
    if (const auto* s = std::get_if<std::string>(&v)) {
      out.insert("s:" + *s);
    } else {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "n:%.17g", std::get<double>(v));
      out.insert(buf);
    }
  }
  return out;
}

std::vector<std::string> gold_of(const Json& answer) {
  if (answer.is_array()) return answer.get<std::vector<std::string>>();
  return {answer.get<std::string>()};
}

TEST(MmmuScoring, EveryCaseEqualsTheOfficialEvaluationInOrder) {
  const Json data = official_cases();
  ASSERT_EQ(data["cases"].size(), 105u);
  PythonRandom random(data["random_seed"].get<uint64_t>());
  std::map<std::string, std::pair<int64_t, int64_t>> per_subject;  // correct, total
  int draws = 0;
  for (const auto& c : data["cases"]) {
    const std::string id = c["id"].get<std::string>();
    bool correct = false;
    if (c["question_type"] == "multiple-choice") {
      const auto choices = c["all_choices"].get<std::vector<std::string>>();
      const auto options = c["options"].get<std::vector<std::string>>();
      const std::string pred =
          parse_multi_choice_response(c["response"].get<std::string>(), choices, options, random);
      EXPECT_EQ(pred, c["parsed_pred"].get<std::string>()) << id << ": " << c["why"];
      correct = eval_multi_choice(gold_of(c["answer"]), pred);
      draws += c["random_fallback"].get<bool>() ? 1 : 0;
    } else {
      const auto pred = parse_open_response(c["response"].get<std::string>());
      std::vector<OpenValue> want;
      for (const auto& v : c["parsed_pred"]) want.push_back(official_value(v));
      EXPECT_EQ(spelled(pred), spelled(want)) << id << ": " << c["why"];
      correct = eval_open(gold_of(c["answer"]), pred);
    }
    EXPECT_EQ(correct, c["correct"].get<bool>()) << id << ": " << c["why"];
    auto& [right, total] = per_subject[c["subject"].get<std::string>()];
    right += correct ? 1 : 0;
    ++total;
  }
  EXPECT_EQ(draws, 17);
  double weighted = 0;
  int64_t n = 0;
  for (const auto& [subject, counts] : per_subject) {
    const double acc = static_cast<double>(counts.first) / static_cast<double>(counts.second);
    EXPECT_DOUBLE_EQ(acc, data["per_subject"][subject]["acc"].get<double>()) << subject;
    weighted += acc * static_cast<double>(counts.second);
    n += counts.second;
  }
  EXPECT_NEAR(weighted / static_cast<double>(n), data["overall_acc"].get<double>(), 1e-12);
}

TEST(MmmuScoring, PythonFloatAndRandomAsPython) {
  EXPECT_EQ(python_float(" 1_000 "), 1000.0);
  EXPECT_EQ(python_float("-Infinity"), -HUGE_VAL);
  EXPECT_EQ(python_float("\xef\xbc\x93"), 3.0);  // full-width 3
  EXPECT_FALSE(python_float("1__0").has_value());
  EXPECT_FALSE(python_float("_1").has_value());
  EXPECT_FALSE(python_float("1e").has_value());
  EXPECT_FALSE(python_float(".").has_value());
  // random.seed(42); [random.randrange(10) for _ in range(5)] == [1, 0, 4, 3, 3]
  PythonRandom random(42);
  std::vector<int64_t> draws;
  for (int i = 0; i < 5; ++i) draws.push_back(random.choice_index(10));
  EXPECT_EQ(draws, (std::vector<int64_t>{1, 0, 4, 3, 3}));
}

}  // namespace
}  // namespace retain
