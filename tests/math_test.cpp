// `retain eval math`: the answer extraction and the MATH equivalence against the official code run
// on the same strings (scripts/peers/math_official_cases.py wrote tests/fixtures/
// math_official_cases.json from hendrycks/math, openai/grade-school-math and
// lm-evaluation-harness), the grading per benchmark, pass@1 / maj@N, the release layouts and their
// errors, and sampling: top-k / top-p as stated, a seeded row samples the same in any batch.
#include <c10/core/InferenceMode.h>

#include <fstream>

#include "core/json.h"
#include "data/math_conversation.h"
#include "eval/cache_factory.h"
#include "eval/math/math_answer.h"
#include "eval/math/math_data.h"
#include "eval/math/math_equivalence.h"
#include "eval/math/math_grading.h"
#include "eval/policies/policy_registry.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "test_util.h"

namespace retain {
namespace {

const Json& official() {
  static const Json cases =
      read_json_file(fs::path(RETAIN_TEST_SOURCE_DIR) / "fixtures" / "math_official_cases.json");
  return cases;
}

std::optional<std::string> optional_text(const Json& j) {
  return j.is_null() ? std::nullopt : std::optional<std::string>(j.get<std::string>());
}

TEST(MathOfficial, BoxedAnswersAsHendrycksMath) {
  int64_t n = 0;
  for (const auto& c : official().at("boxed")) {
    const std::string text = c.at("text");
    EXPECT_EQ(last_boxed_only_string(text), optional_text(c.at("last_boxed_only_string"))) << text;
    EXPECT_EQ(last_boxed_answer(text), optional_text(c.at("remove_boxed"))) << text;
    ++n;
  }
  EXPECT_GE(n, 150);
}

TEST(MathOfficial, StripStringAsHendrycksMath) {
  int64_t raised = 0;
  for (const auto& c : official().at("strip")) {
    const std::string input = c.at("input");
    EXPECT_EQ(math_strip_string(input), optional_text(c.at("strip_string"))) << input;
    raised += c.at("strip_string").is_null();
  }
  EXPECT_GE(raised, 5);  // the inputs where the official function raises are covered
}

TEST(MathOfficial, IsEquivAsHendrycksMath) {
  int64_t equal = 0, n = 0;
  for (const auto& c : official().at("equiv")) {
    const auto a = optional_text(c.at("a")), b = optional_text(c.at("b"));
    EXPECT_EQ(math_is_equiv(a, b), c.at("is_equiv").get<bool>())
        << (a ? *a : "None") << " vs " << (b ? *b : "None");
    equal += c.at("is_equiv").get<bool>();
    ++n;
  }
  EXPECT_GT(equal, 50);
  EXPECT_GT(n - equal, 50);
}

TEST(MathOfficial, Gsm8kExtractAnswerAsGradeSchoolMath) {
  for (const auto& c : official().at("gsm8k_extract"))
    EXPECT_EQ(gsm8k_extract_answer(c.at("text")), optional_text(c.at("extract_answer")))
        << c.at("text");
}

TEST(MathOfficial, LastNumberAsLmEvalFlexibleExtract) {
  for (const auto& c : official().at("flexible_extract"))
    EXPECT_EQ(last_number(c.at("text")), optional_text(c.at("answer"))) << c.at("text");
}

TEST(MathGrading, ExtractionPerBenchmark) {
  using enum MathBenchmark;
  // The last box wins, nested braces kept; a thinking model's reasoning is not its answer.
  EXPECT_EQ(extract_math_answer(kMath500, "so \\boxed{1} no, \\boxed{\\frac{1}{2}}."),
            "\\frac{1}{2}");
  EXPECT_EQ(extract_math_answer(kMath500, "<think>\\boxed{3}</think>The answer is 4."),
            std::nullopt);
  EXPECT_EQ(extract_math_answer(kAime, "<think>maybe 3</think>The answer is 4."), "4");
  // GSM8K: the box, then "#### N", then the last number.
  EXPECT_EQ(extract_math_answer(kGsm8k, "#### 7 and \\boxed{8}"), "8");
  EXPECT_EQ(extract_math_answer(kGsm8k, "#### 1,000\nso 3"), "1000");
  EXPECT_EQ(extract_math_answer(kGsm8k, "she pays $1,250."), "1250");
  // MATH-500 reads boxes only; empty answers are unparsed.
  EXPECT_EQ(extract_math_answer(kMath500, "the answer is 5"), std::nullopt);
  EXPECT_EQ(extract_math_answer(kMath500, "\\boxed{ }"), std::nullopt);
  EXPECT_EQ(extract_math_answer(kAime, "no digits at all"), std::nullopt);
}

TEST(MathGrading, EquivalencePerBenchmark) {
  using enum MathBenchmark;
  EXPECT_TRUE(math_answer_correct(kMath500, "\\dfrac{1}{2}", "\\frac12"));
  EXPECT_TRUE(math_answer_correct(kMath500, "0.5", "\\frac{1}{2}"));
  // Beyond the official rule: equal exact numbers.
  EXPECT_TRUE(math_answer_correct(kMath500, "2.50", "2.5"));
  EXPECT_TRUE(math_answer_correct(kMath500, "\\frac{-1}{2}", "-\\frac{1}{2}"));
  EXPECT_TRUE(math_answer_correct(kMath500, "6/8", "\\frac{3}{4}"));
  EXPECT_TRUE(math_answer_correct(kGsm8k, "10,080", "10080"));
  EXPECT_TRUE(math_answer_correct(kGsm8k, "72.00", "72"));
  EXPECT_FALSE(math_answer_correct(kGsm8k, "72.5", "72"));
  EXPECT_FALSE(math_answer_correct(kMath500, "\\sqrt{2}", "\\sqrt{3}"));
  // AIME: integers, leading zeros allowed, anything else wrong.
  EXPECT_TRUE(math_answer_correct(kAime, "033", "33"));
  EXPECT_TRUE(math_answer_correct(kAime, "\\$33", "33"));
  EXPECT_FALSE(math_answer_correct(kAime, "33.5", "33"));
  EXPECT_FALSE(math_answer_correct(kAime, "x", "33"));
  EXPECT_EQ(math_answer_vote_key(kAime, "033"), "33");
  EXPECT_EQ(math_answer_vote_key(kMath500, "\\frac{2}{4}"), "1/2");
  EXPECT_EQ(math_answer_vote_key(kMath500, "0.5"), math_answer_vote_key(kMath500, "1/2"));
  EXPECT_THROW(parse_math_benchmark("aime25"), Error);
}

Json prediction(const std::string& id, int64_t sample, const std::string& response,
                const std::string& gold, int64_t tokens = 10, bool truncated = false) {
  return {{"id", id},
          {"sample", sample},
          {"response", response},
          {"gold", gold},
          {"new_tokens", tokens},
          {"truncated", truncated},
          {"peak_kv_bytes", 100.0 * static_cast<double>(tokens)},
          {"max_attended_entries", tokens}};
}

TEST(MathGrading, PassAtOneAndMajorityVote) {
  auto where = [](size_t i) { return str_cat("record ", i); };
  // Problem a: 2 of 3 right, the majority right. b: 1 of 3 right, the majority ("5", twice) wrong.
  // c: one right answer and two unparsed: the only vote is right.
  const std::vector<Json> records = {prediction("a", 0, "\\boxed{2}", "2"),
                                     prediction("b", 0, "\\boxed{5}", "4"),
                                     prediction("a", 1, "\\boxed{3}", "2"),
                                     prediction("b", 1, "\\boxed{4}", "4"),
                                     prediction("a", 2, "\\boxed{2.0}", "2"),
                                     prediction("b", 2, "\\boxed{5.00}", "4"),
                                     prediction("c", 0, "no answer", "7", 40, true),
                                     prediction("c", 1, "\\boxed{7}", "7"),
                                     prediction("c", 2, "\\boxed{}", "7")};
  const Json m = math_metrics(MathBenchmark::kMath500, records, where);
  EXPECT_NEAR(m.at("pass@1").get<double>(), 100.0 * (2.0 / 3 + 1.0 / 3 + 1.0 / 3) / 3, 1e-9);
  EXPECT_NEAR(m.at("maj@n").get<double>(), 100.0 * 2 / 3, 1e-9);
  EXPECT_NEAR(m.at("unparsed").get<double>(), 100.0 * 2 / 9, 1e-9);
  EXPECT_NEAR(m.at("truncated").get<double>(), 100.0 / 9, 1e-9);
  EXPECT_EQ(m.at("max_new_tokens").get<int64_t>(), 40);
  EXPECT_EQ(m.at("max_attended_entries").get<int64_t>(), 40);
  EXPECT_EQ(m.at("problems").get<int64_t>(), 3);
  // The interval is the normal one over the three problems' shares (2/3, 1/3, 1/3).
  const auto interval = m.at("intervals").at("pass@1");
  const double mean = 100.0 * 4.0 / 9;
  const double shares[] = {2.0 / 3, 1.0 / 3, 1.0 / 3};
  double s = 0, ss = 0;
  for (double x : shares) s += x, ss += x * x;
  const double variance = (ss - s * s / 3) / 2;
  const double half = 100.0 * 1.959964 * std::sqrt(variance / 3);
  EXPECT_NEAR(interval[0].get<double>(), std::max(0.0, mean - half), 1e-9);
  EXPECT_NEAR(interval[1].get<double>(), mean + half, 1e-9);
  // Ties go to the answer seen first (Counter.most_common): "3" before "2".
  const Json tie = math_metrics(
      MathBenchmark::kAime,
      {prediction("t", 0, "\\boxed{3}", "2"), prediction("t", 1, "\\boxed{2}", "2")}, where);
  EXPECT_EQ(tie.at("maj@n").get<double>(), 0.0);
  EXPECT_EQ(tie.at("pass@1").get<double>(), 50.0);
  // One sample per problem: Wilson's interval.
  const Json single =
      math_metrics(MathBenchmark::kGsm8k,
                   {prediction("x", 0, "#### 1", "1"), prediction("y", 0, "#### 1", "2")}, where);
  EXPECT_EQ(single.at("pass@1").get<double>(), 50.0);
  EXPECT_GT(single.at("intervals").at("pass@1")[0].get<double>(), 0.0);
  // A record without a field its grading needs is named.
  Json broken = prediction("z", 0, "1", "1");
  broken.erase("gold");
  try {
    math_metrics(MathBenchmark::kGsm8k, {broken}, where);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("record 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("gold"), std::string::npos) << e.what();
  }
}

fs::path write_file(const testing::TempDir& dir, const std::string& name, const std::string& text) {
  const fs::path path = dir / name;
  std::ofstream(path) << text;
  return path;
}

TEST(MathData, ReleasedLayouts) {
  testing::TempDir dir;
  const auto gsm =
      load_math_problems(write_file(dir, "gsm8k.jsonl",
                                    "{\"question\": \"q1\", \"answer\": \"x\\n#### 1,234\"}\n\n"
                                    "{\"question\": \"q2\", \"answer\": \"#### -5\"}\n"),
                         MathBenchmark::kGsm8k);
  ASSERT_EQ(gsm.size(), 2u);
  EXPECT_EQ(gsm[0].gold, "1234");
  EXPECT_EQ(gsm[1].gold, "-5");
  EXPECT_EQ(gsm[1].id, "1");
  const auto math = load_math_problems(
      write_file(dir, "math500.jsonl",
                 "{\"problem\": \"p\", \"solution\": \"s\", \"answer\": \"\\\\frac{1}{2}\", "
                 "\"subject\": \"Algebra\", \"level\": 3, \"unique_id\": \"test/algebra/1.json\"}\n"
                 "{\"problem\": \"p2\", \"solution\": \"so \\\\boxed{\\\\sqrt{2}}\", \"type\": "
                 "\"Geometry\", \"level\": \"Level 5\"}\n"),
      MathBenchmark::kMath500);
  EXPECT_EQ(math[0].gold, "\\frac{1}{2}");
  EXPECT_EQ(math[0].id, "test/algebra/1.json");
  EXPECT_EQ(math[0].level, 3);
  EXPECT_EQ(math[1].gold, "\\sqrt{2}");  // the MATH release: the solution's last box
  EXPECT_EQ(math[1].subject, "Geometry");
  EXPECT_EQ(math[1].level, 5);
  const auto aime = load_math_problems(
      write_file(dir, "aime.jsonl",
                 "{\"id\": 60, \"problem\": \"p\", \"answer\": 204}\n"
                 "{\"ID\": \"2025-I-1\", \"question\": \"p\", \"answer\": \"70\"}\n"),
      MathBenchmark::kAime, 0);
  EXPECT_EQ(aime[0].id, "60");
  EXPECT_EQ(aime[0].gold, "204");
  EXPECT_EQ(aime[1].id, "2025-I-1");
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const auto& part : parts)
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(MathData, BadInputNamesTheFieldAndTheLine) {
  testing::TempDir dir;
  const auto bad = write_file(dir, "bad_gsm8k.jsonl",
                              "{\"question\": \"q\", \"answer\": \"#### 1\"}\n"
                              "{\"problem\": \"q\", \"answer\": \"#### 1\"}\n");
  expect_error([&] { load_math_problems(bad, MathBenchmark::kGsm8k); },
               {"bad_gsm8k.jsonl:2", "'question'", "GSM8K"});
  const auto no_hashes =
      write_file(dir, "nohash.jsonl", "{\"question\": \"q\", \"answer\": \"7\"}\n");
  expect_error([&] { load_math_problems(no_hashes, MathBenchmark::kGsm8k); },
               {"nohash.jsonl:1", "####"});
  const auto aime = write_file(dir, "aime_bad.jsonl", "{\"problem\": \"p\", \"answer\": [1]}\n");
  expect_error([&] { load_math_problems(aime, MathBenchmark::kAime); },
               {"aime_bad.jsonl:1", "'answer'", "string"});
  const auto twice = write_file(dir, "twice.jsonl",
                                "{\"id\": 1, \"problem\": \"p\", \"answer\": 1}\n"
                                "{\"id\": 1, \"problem\": \"q\", \"answer\": 2}\n");
  expect_error([&] { load_math_problems(twice, MathBenchmark::kAime); },
               {"twice.jsonl:2", "id '1' again", "twice.jsonl:1"});
  const auto text = write_file(dir, "problems.txt", "x");
  expect_error([&] { load_math_problems(text, MathBenchmark::kAime); }, {".jsonl or .parquet"});
  const auto broken = write_file(dir, "broken.jsonl", "{\"problem\": \n");
  expect_error([&] { load_math_problems(broken, MathBenchmark::kAime); }, {"broken.jsonl:1"});
}

TEST(MathData, TrainingRowsBecomeTheConversationsEvalMathPrompts) {
  // problem + solution: the instruction eval math appends, then the solution as the answer.
  const Json c = math_conversation({{"problem", "P?"}, {"solution", "S"}}, kMathInstruction, "f:1");
  EXPECT_EQ(c.dump(),
            Json({{"messages",
                   {{{"role", "user"}, {"content", std::string("P?\n") + kMathInstruction}},
                    {{"role", "assistant"}, {"content", "S"}}}}})
                .dump());
  EXPECT_EQ(math_conversation({{"problem", "P?"}, {"solution", "S"}}, "",
                              "f:1")["messages"][0]["content"],
            "P?");
  // OpenR1-Math's messages stay as they are (problem and solution beside them are not read).
  const Json messages = {{{"role", "user"}, {"content", "P?"}},
                         {{"role", "assistant"}, {"content", "<think>t</think>A"}}};
  EXPECT_EQ(math_conversation({{"messages", messages}, {"problem", "x"}, {"solution", "y"}},
                              kMathInstruction, "f:1")["messages"],
            messages);
  expect_error(
      [] {
        math_conversation({{"question", "q"}}, "", "f.jsonl:4");
      },
      {"f.jsonl:4", "'problem'", "'messages'"});
  expect_error(
      [] {
        math_conversation({{"messages", {{{"role", "user"}, {"content", "q"}}}}}, "", "f row 2");
      },
      {"f row 2", "no assistant turn"});
}

TEST(Sampling, TopKAndTopPKeepWhatTheyState) {
  // Probabilities 0.5, 0.3, 0.2 at ids 2, 0, 1.
  const auto logits = at::log(at::tensor({0.3, 0.2, 0.5}, at::kFloat));
  auto draw_counts = [&](SamplingOptions o) {
    auto generator = at::make_generator<at::CPUGeneratorImpl>(7);
    std::vector<int64_t> counts(3, 0);
    for (int i = 0; i < 3000; ++i) ++counts[sample_next_token(logits, o, generator)];
    return counts;
  };
  SamplingOptions o;
  o.temperature = 1.0;
  auto all = draw_counts(o);
  EXPECT_NEAR(all[2] / 3000.0, 0.5, 0.04);
  EXPECT_NEAR(all[1] / 3000.0, 0.2, 0.04);
  o.top_k = 1;  // the argmax, whatever the generator
  EXPECT_EQ(draw_counts(o), (std::vector<int64_t>{0, 0, 3000}));
  o.top_k = 2;  // ids 2 and 0, renormalised: 5/8 and 3/8
  auto two = draw_counts(o);
  EXPECT_EQ(two[1], 0);
  EXPECT_NEAR(two[0] / 3000.0, 0.375, 0.04);
  o.top_k = 0;
  o.top_p = 0.75;  // 0.5 does not reach it, 0.5 + 0.3 does: ids 2 and 0
  EXPECT_EQ(draw_counts(o)[1], 0);
  o.top_p = 0.85;  // all three
  EXPECT_GT(draw_counts(o)[1], 0);
  o.top_p = 0.4;  // the most likely token alone
  EXPECT_EQ(draw_counts(o), (std::vector<int64_t>{0, 0, 3000}));
  o.top_p = 1.0;
  o.temperature = 0.0;  // greedy
  EXPECT_EQ(draw_counts(o), (std::vector<int64_t>{0, 0, 3000}));
}

TEST(Sampling, ASeededRowSamplesTheSameInAnyBatch) {
  c10::InferenceMode guard;
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "qwen2_bias_yarn", {});
  const std::vector<std::vector<int64_t>> prompts = {
      {5, 9, 33, 71, 2, 400, 8}, {17, 3}, {250, 251, 252, 253, 254}};
  SamplingOptions o;
  o.max_new_tokens = 24;
  o.temperature = 1.0;
  o.top_p = 0.95;
  o.top_k = 50;
  o.prefill_chunk = 4;
  std::vector<RowOptions> rows(prompts.size());
  for (size_t r = 0; r < rows.size(); ++r) rows[r].seed = 100 + r;
  const PolicySpec policy = parse_policy("streaming:buffer=1");
  std::vector<int64_t> lengths;
  for (const auto& p : prompts) lengths.push_back(static_cast<int64_t>(p.size()));
  auto cache = make_batch_kv_cache(model.config(), policy, 6, lengths, 4, LearnedModules{});
  const auto batch = generate_batch(model, prompts, *cache, o, rows);
  for (size_t r = 0; r < prompts.size(); ++r) {
    auto alone_cache =
        make_batch_kv_cache(model.config(), policy, 6, {lengths[r]}, 4, LearnedModules{});
    const auto alone = generate_batch(model, {prompts[r]}, *alone_cache, o, {rows[r]});
    EXPECT_EQ(batch[r].tokens, alone[0].tokens) << "row " << r;
  }
  // Another seed samples other tokens; the same seed again the same ones.
  auto again_cache =
      make_batch_kv_cache(model.config(), policy, 6, {lengths[0]}, 4, LearnedModules{});
  RowOptions other = rows[0];
  other.seed = 999;
  const auto differently = generate_batch(model, {prompts[0]}, *again_cache, o, {other});
  EXPECT_NE(differently[0].tokens, batch[0].tokens);
}

}  // namespace
}  // namespace retain
