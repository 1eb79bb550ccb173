// LongBench metrics against the official definitions: expected values made by
// tests/fixtures/make_metric_cases.py with the `rouge` and `fuzzywuzzy` packages LongBench uses.
#include "eval/metrics.h"
#include <fstream>

#include "core/json.h"
#include "test_util.h"

namespace retain {
namespace {

TEST(Metrics, EqualTheOfficialDefinitionsOnFixturePairs) {
  Json cases = read_json_file(testing::fixture_dir("metrics") / "metric_cases.json");
  ASSERT_GE(cases.size(), 150u);
  std::map<std::string, int> counts;
  for (const auto& c : cases) {
    const std::string metric = c["metric"];
    const double expected = c["expected"].get<double>();
    double got = 0;
    if (metric == "round2") {
      got = python_round(c["value"].get<double>(), 2);
      EXPECT_EQ(got, expected) << c["value"];
      ++counts[metric];
      continue;
    }
    const std::string p = c["prediction"], a = c["answer"];
    if (metric == "qa_f1")
      got = qa_f1_score(p, a);
    else if (metric == "rouge_l")
      got = rouge_l_score(p, a);
    else if (metric == "classification")
      got = classification_score(p, a, c["all_classes"].get<std::vector<std::string>>());
    else if (metric == "retrieval")
      got = retrieval_score(p, a);
    else if (metric == "count")
      got = count_score(p, a);
    else if (metric == "code_sim")
      got = code_sim_score(p, a);
    else
      FAIL() << "unknown metric " << metric;
    EXPECT_NEAR(got, expected, 1e-12)
        << metric << ": " << Json(p).dump() << " vs " << Json(a).dump();
    ++counts[metric];
  }
  for (const char* m :
       {"qa_f1", "rouge_l", "classification", "retrieval", "count", "code_sim", "round2"})
    EXPECT_GT(counts[m], 0) << m;
}

TEST(Metrics, LongBenchScorerRules) {
  // trec/triviaqa/samsum/lsht keep only the first line; the best answer counts.
  EXPECT_EQ(longbench_score("triviaqa", "\nParis\nand more text about Lyon", {"Lyon", "Paris"}, {}),
            1.0);
  EXPECT_LT(longbench_score("hotpotqa", "Paris\nLyon", {"Lyon"}, {}), 1.0);
  EXPECT_EQ(longbench_score("trec", "Location", {"Location"}, {"Location", "Entity"}), 1.0);
  EXPECT_EQ(longbench_metric("gov_report"), "rouge");
  EXPECT_FALSE(longbench_metric("dureader").has_value());
  EXPECT_ERROR_CONTAINS(longbench_score("vcsum", "x", {"y"}, {}), "dataset 'vcsum' is not scored");
  EXPECT_ERROR_CONTAINS(retrieval_score("3", "no paragraph"), "names no 'Paragraph N'");
  EXPECT_EQ(normalize_answer("The Quick, brown fox!"), "quick brown fox");
  EXPECT_EQ(fuzz_ratio("", ""), 100);
  EXPECT_EQ(fuzz_ratio("abc", ""), 0);
}

}  // namespace
}  // namespace retain

#include "eval/benchmarks/longbench_v2.h"
#include "eval/score_command.h"

namespace retain {
namespace {

TEST(ScoreCommand, LongBenchPerDatasetAveragesBucketsAndGroups) {
  testing::TempDir dir;
  std::string lines;
  auto line = [&](Json j) { lines += j.dump() + "\n"; };
  line({{"dataset", "hotpotqa"},
        {"pred", "Paris"},
        {"answers", {"Paris"}},
        {"length", 3000},
        {"policy", "full"},
        {"budget", nullptr}});
  line({{"dataset", "hotpotqa"},
        {"pred", "the city of Lyon"},
        {"answers", {"Lyon", "x"}},
        {"length", 5000},
        {"policy", "full"},
        {"budget", nullptr}});
  line({{"dataset", "passage_count"},
        {"pred", "3 or 4"},
        {"answers", {"3"}},
        {"length", 9000},
        {"policy", "full"},
        {"budget", nullptr}});
  line({{"dataset", "hotpotqa"},
        {"pred", "Rome"},
        {"answers", {"Paris"}},
        {"length", 3000},
        {"policy", "h2o"},
        {"budget", 0.1}});
  write_text_file_atomic(dir / "predictions.jsonl", lines);
  ScoreCommandOptions o{"longbench", (dir / "predictions.jsonl").string(), true, ""};
  ASSERT_EQ(run_score_command(o), 0);
  Json s = read_json_file(dir / "scores.json");
  ASSERT_EQ(s["results"].size(), 2u);
  const Json& full = s["results"][0]["metrics"];
  double lyon = qa_f1_score("the city of Lyon", "Lyon");
  EXPECT_EQ(full["hotpotqa"].get<double>(), python_round(100 * (1 + lyon) / 2, 2));
  EXPECT_EQ(full["passage_count"].get<double>(), 50.0);
  EXPECT_EQ(full["hotpotqa/0-4k"].get<double>(), 100.0);
  EXPECT_EQ(full["passage_count/8k+"].get<double>(), 50.0);
  EXPECT_EQ(full["avg"].get<double>(),
            python_round((full["hotpotqa"].get<double>() + 50.0) / 2, 2));
  EXPECT_EQ(s["results"][1]["policy"], "h2o");
  EXPECT_EQ(s["results"][1]["metrics"]["hotpotqa"].get<double>(), 0.0);
  EXPECT_TRUE(fs::exists(dir / "plot.png"));

  // LongBench's own file layout: <dataset>.jsonl without a dataset field.
  write_text_file_atomic(dir / "trec.jsonl", Json({{"pred", "Location\nextra"},
                                                   {"answers", {"Location"}},
                                                   {"all_classes", {"Location", "Entity"}},
                                                   {"length", 100}})
                                                     .dump() +
                                                 "\n");
  ASSERT_EQ(run_score_command(
                {"longbench", (dir / "trec.jsonl").string(), false, (dir / "trec_out").string()}),
            0);
  EXPECT_EQ(read_json_file(dir / "trec_out" / "scores.json")["results"][0]["metrics"]["trec"]
                .get<double>(),
            100.0);

  write_text_file_atomic(dir / "bad.jsonl", "{\"dataset\": \"hotpotqa\", \"pred\": \"x\"}\n");
  EXPECT_ERROR_CONTAINS(run_score_command({"longbench", (dir / "bad.jsonl").string(), false, ""}),
                        "bad.jsonl:1: required key 'answers'");
  write_text_file_atomic(dir / "broken.jsonl", "{\"dataset\": \n");
  EXPECT_ERROR_CONTAINS(
      run_score_command({"longbench", (dir / "broken.jsonl").string(), false, ""}),
      "broken.jsonl:1: invalid JSON");
}

TEST(ScoreCommand, LongBenchV2ExtractionAndSplits) {
  EXPECT_EQ(extract_choice("Reasoning... The correct answer is (B)."), "B");
  EXPECT_EQ(extract_choice("**The correct answer is C**"), "C");
  EXPECT_EQ(extract_choice("The correct answer is (E)"), "");
  EXPECT_EQ(extract_choice("I think A"), "");
  testing::TempDir dir;
  std::string lines;
  for (auto [resp, ans, diff, len] : {std::tuple{"The correct answer is (A)", "A", "easy", "short"},
                                      {"The correct answer is (B)", "A", "hard", "long"},
                                      {"The correct answer is D", "D", "hard", "medium"}})
    lines +=
        Json({{"response", resp}, {"answer", ans}, {"difficulty", diff}, {"length", len}}).dump() +
        "\n";
  write_text_file_atomic(dir / "v2.jsonl", lines);
  ASSERT_EQ(run_score_command({"longbench-v2", (dir / "v2.jsonl").string(), false, ""}), 0);
  const Json m = read_json_file(dir / "scores.json")["results"][0]["metrics"];
  EXPECT_EQ(m["overall"].get<double>(), 66.7);
  EXPECT_EQ(m["easy"].get<double>(), 100.0);
  EXPECT_EQ(m["hard"].get<double>(), 50.0);
  EXPECT_EQ(m["long"].get<double>(), 0.0);
  EXPECT_EQ(m["medium"].get<double>(), 100.0);
}

}  // namespace
}  // namespace retain

#include "eval/benchmarks/longbench.h"
#include "model/init_model.h"

namespace retain {
namespace {

// A LongBench directory in the official layout, written by the test.
void write_longbench_dir(const fs::path& dir) {
  fs::create_directories(dir / "data");
  fs::create_directories(dir / "config");
  write_text_file_atomic(dir / "config" / "dataset2prompt.json",
                         Json({{"hotpotqa",
                                "Answer the question based on the "
                                "passages.\n\n{context}\n\nQuestion: {input}\nAnswer:"},
                               {"trec", "Classify the question.\n\n{context}\n{input}"},
                               {"samsum", "Summarize the dialogue.\n\n{context}\n\n{input}"}})
                             .dump());
  write_text_file_atomic(dir / "config" / "dataset2maxlen.json",
                         Json({{"hotpotqa", 4}, {"trec", 3}, {"samsum", 5}}).dump());
  std::string long_context;
  for (int i = 0; i < 200; ++i) long_context += "The value of alpha is " + std::to_string(i) + ". ";
  auto record = [](const std::string& context, const std::string& input, Json answers, Json classes,
                   int length, int id) {
    return Json({{"input", input},
                 {"context", context},
                 {"answers", answers},
                 {"length", length},
                 {"dataset", "x"},
                 {"language", "en"},
                 {"all_classes", classes},
                 {"_id", "id" + std::to_string(id)}})
               .dump() +
           "\n";
  };
  write_text_file_atomic(dir / "data" / "hotpotqa.jsonl",
                         record(long_context, "What is alpha?", {"12"}, nullptr, 1800, 1) +
                             record("Short passage.", "Which passage?", {"short"}, nullptr, 2, 2));
  write_text_file_atomic(
      dir / "data" / "trec.jsonl",
      record("Q: where? A: Location", "Where is it?", {"Location"}, {"Location", "Entity"}, 10, 3));
  write_text_file_atomic(dir / "data" / "samsum.jsonl",
                         record("A: hi\nB: hello", "Summary:", {"They greet."}, nullptr, 5, 4));
}

TEST(LongBench, RunsTheOfficialLayoutWithPoliciesAndResumes) {
  testing::TempDir dir;
  write_longbench_dir(dir / "LongBench");
  InitModelOptions init;
  init.arch = "qwen3";
  init.preset = "tiny";
  init.out = (dir / "model").string();
  init_model(init);
  LongBenchOptions o;
  o.sweep.model.model_dir = init.out;
  o.data_dir = (dir / "LongBench").string();
  o.datasets = {"hotpotqa", "trec", "samsum"};
  o.max_length = 300;
  o.sweep.policies = {"full", "streaming"};
  o.sweep.budgets = {0.5};
  o.sweep.chunk = 128;
  o.sweep.out = (dir / "run").string();
  ASSERT_EQ(run_longbench_eval(o), 0);
  Json scores = read_json_file(dir / "run" / "scores.json");
  ASSERT_EQ(scores["results"].size(), 2u);
  for (const auto& r : scores["results"])
    for (const char* k : {"hotpotqa", "trec", "samsum", "avg"})
      EXPECT_TRUE(r["metrics"].contains(k)) << k;
  std::ifstream in(dir / "run" / "predictions.jsonl");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    Json j = Json::parse(line);
    EXPECT_LE(j["prompt_tokens"].get<int64_t>(), 300 + 1) << "middle truncation";  // + BOS
    ++n;
  }
  EXPECT_EQ(n, 2 * 4);
  EXPECT_TRUE(fs::exists(dir / "run" / "plot.png"));
  ASSERT_EQ(run_longbench_eval(o), 0);  // resumed: nothing new to run, same scores
  const Json resumed = read_json_file(dir / "run" / "scores.json");
  EXPECT_EQ(resumed["results"], scores["results"]);
  EXPECT_EQ(scores["run"]["generated"], 8);  // what each run generated itself
  EXPECT_EQ(resumed["run"]["generated"], 0);

  // --protect-question: the template's part after {context} is found in every prompt (the long
  // record's survives middle truncation) and protected from its first token on.
  LongBenchOptions protect = o;
  protect.protect_question = true;
  protect.sweep.policies = {"streaming"};
  protect.sweep.out = (dir / "run_protect").string();
  ASSERT_EQ(run_longbench_eval(protect), 0);
  std::ifstream protected_in(dir / "run_protect" / "predictions.jsonl");
  int protected_lines = 0;
  while (std::getline(protected_in, line)) {
    Json j = Json::parse(line);
    ASSERT_TRUE(j["question_start"].is_number()) << j.dump();
    EXPECT_GT(j["question_start"].get<int64_t>(), 0) << j.dump();
    EXPECT_LT(j["question_start"].get<int64_t>(), j["prompt_tokens"].get<int64_t>()) << j.dump();
    ++protected_lines;
  }
  EXPECT_EQ(protected_lines, 4);

  // LongBench-E: <dataset>_e.jsonl files and length buckets in the scores.
  for (const char* d : {"hotpotqa", "trec", "samsum"})
    fs::copy_file(dir / "LongBench" / "data" / (std::string(d) + ".jsonl"),
                  dir / "LongBench" / "data" / (std::string(d) + "_e.jsonl"));
  LongBenchOptions e = o;
  e.e = true;
  e.sweep.policies = {"full"};
  e.sweep.out = (dir / "run_e").string();
  ASSERT_EQ(run_longbench_eval(e), 0);
  const Json em = read_json_file(dir / "run_e" / "scores.json")["results"][0]["metrics"];
  EXPECT_TRUE(em.contains("hotpotqa/0-4k"));  // the 1800-word record
  EXPECT_TRUE(em.contains("trec/0-4k"));

  write_text_file_atomic(dir / "LongBench" / "data" / "trec.jsonl", "{\"input\": \"x\"}\n");
  o.sweep.out = (dir / "run2").string();
  EXPECT_ERROR_CONTAINS(run_longbench_eval(o),
                        "trec.jsonl:1: the prompt template uses {context}, which the record lacks");
  write_text_file_atomic(dir / "LongBench" / "data" / "trec.jsonl",
                         "{\"input\": \"x\", \"context\": \"c\", \"answers\": [\"a\"]}\n{broken\n");
  EXPECT_ERROR_CONTAINS(run_longbench_eval(o), "trec.jsonl:2: invalid JSON");
  fs::remove(dir / "LongBench" / "config" / "dataset2prompt.json");
  EXPECT_ERROR_CONTAINS(run_longbench_eval(o), "dataset2prompt.json is missing");
}

TEST(LongBench, PromptFormattingIsPythonFormat) {
  EXPECT_EQ(
      format_prompt("{context} and {{literal}} {input}", {{"context", "C"}, {"input", "I"}}, "t"),
      "C and {literal} I");
  EXPECT_ERROR_CONTAINS(format_prompt("{missing}", {}, "cfg"),
                        "cfg: the prompt template uses {missing}");
}

}  // namespace
}  // namespace retain

#include "eval/benchmarks/longbench_v2.h"

namespace retain {
namespace {

TEST(LongBenchV2, RunsOnTheOfficialLayoutAndScores) {
  testing::TempDir dir;
  fs::create_directories(dir / "lb2" / "prompts");
  // A template in the official placeholder format, written by the test.
  write_text_file_atomic(
      dir / "lb2" / "prompts" / "0shot.txt",
      "Read the text.\n\n<text>\n$DOC$\n</text>\n\nQuestion: $Q$\n(A) $C_A$\n(B) $C_B$\n(C) "
      "$C_C$\n(D) $C_D$\n\n"
      "Format your response as follows: \"The correct answer is (insert answer here)\".");
  Json data = Json::array();
  for (int i = 0; i < 3; ++i)
    data.push_back({{"_id", "q" + std::to_string(i)},
                    {"difficulty", i ? "hard" : "easy"},
                    {"length", i == 2 ? "long" : "short"},
                    {"question", "Which letter?"},
                    {"choice_A", "a"},
                    {"choice_B", "b"},
                    {"choice_C", "c"},
                    {"choice_D", "d"},
                    {"answer", "A"},
                    {"context", std::string(400, 'x')}});
  write_text_file_atomic(dir / "lb2" / "data.json", data.dump());
  InitModelOptions init;
  init.arch = "qwen3";
  init.preset = "tiny";
  init.out = (dir / "model").string();
  init_model(init);
  LongBenchV2Options o;
  o.sweep.model.model_dir = init.out;
  o.data = (dir / "lb2" / "data.json").string();
  o.max_length = 120;
  o.max_new_tokens = 3;
  o.sweep.policies = {"full", "knorm"};
  o.sweep.budgets = {0.5};
  o.sweep.chunk = 64;
  o.sweep.out = (dir / "run").string();
  ASSERT_EQ(run_longbench_v2_eval(o), 0);
  Json scores = read_json_file(dir / "run" / "scores.json");
  ASSERT_EQ(scores["results"].size(), 2u);
  for (const char* k : {"overall", "easy", "hard", "short", "long"})
    EXPECT_TRUE(scores["results"][0]["metrics"].contains(k)) << k;
  // knorm beside the full cache: its paired difference over the same questions, inside its interval.
  const Json& knorm = scores["results"][1];
  const double difference = knorm["metrics"]["overall_vs_full"].get<double>();
  EXPECT_NEAR(difference,
              knorm["metrics"]["overall"].get<double>() -
                  scores["results"][0]["metrics"]["overall"].get<double>(),
              0.1);  // the accuracies are rounded to one decimal, the difference is not
  EXPECT_LE(knorm["intervals"]["overall_vs_full"][0].get<double>(), difference);
  EXPECT_GE(knorm["intervals"]["overall_vs_full"][1].get<double>(), difference);
  std::ifstream in(dir / "run" / "predictions.jsonl");
  std::string line;
  while (std::getline(in, line))
    EXPECT_LE(Json::parse(line)["prompt_tokens"].get<int64_t>(), 121);  // truncated (+BOS)
  fs::remove(dir / "lb2" / "prompts" / "0shot.txt");
  o.sweep.out = (dir / "run2").string();
  EXPECT_ERROR_CONTAINS(run_longbench_v2_eval(o), "pass --template");
}

}  // namespace
}  // namespace retain
