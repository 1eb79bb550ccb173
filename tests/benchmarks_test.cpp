// The benchmarks end to end on tiny models: synthetic tasks (seeded, scored, resumed), streaming
// perplexity (the full cache equals transformers' loss), dialogue (a persistent cache equals
// re-reading the history).
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

#include "checkpoints/gate_file.h"
#include "checkpoints/scorer_file.h"
#include "core/json.h"
#include "core/safetensors.h"
#include "data/synthetic.h"
#include "eval/benchmarks/dialogue.h"
#include "eval/benchmarks/synthetic.h"
#include "eval/budgeted_cache.h"
#include "eval/cache_factory.h"
#include "eval/perplexity.h"
#include "eval/run_inputs.h"
#include "eval/sweep.h"
#include "eviction_fixtures.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "model/init_model.h"
#include "model/tokenizers/tokenizer.h"
#include "test_util.h"

namespace retain {
namespace {

using namespace eviction_testing;

// A machine crash can leave predictions.jsonl's last line without its newline: resuming drops
// it (that prediction is redone) and keeps every whole line.
TEST(PredictionLog, ResumesFromWholeLinesAndDropsATornLastOne) {
  testing::TempDir dir;
  const fs::path path = dir / "predictions.jsonl";
  write_text_file_atomic(path, "{\"id\": \"a\"}\n{\"id\": \"b\"}\n{\"id\": \"c");
  {
    PredictionLog log(path, [](const Json& j) { return j.at("id").get<std::string>(); });
    EXPECT_EQ(log.resumed(), 2u);
    EXPECT_NE(log.find("b"), nullptr);
    EXPECT_EQ(log.find("c"), nullptr);
    log.append({{"id", "c"}});
  }
  EXPECT_EQ(read_text_file(path), "{\"id\": \"a\"}\n{\"id\": \"b\"}\n{\"id\":\"c\"}\n");
}

// A resumed sweep reuses predictions only while the model, data, options and each policy's gates
// are those they were made with: a base retrained in place (same path) must not leave the old
// model's answers among the new ones. Adding a policy or budget still resumes.
TEST(SweepInputs, ResumingWithChangedModelDataOptionsOrGatesIsRefused) {
  testing::TempDir dir;
  const fs::path model = dir / "model", out = dir / "run";
  fs::create_directories(model);
  fs::create_directories(out);
  write_text_file_atomic(model / "model.safetensors", "weights v1");
  write_text_file_atomic(dir / "data.jsonl", "{}\n");
  write_text_file_atomic(dir / "g.safetensors", "gates v1");
  const Json config = {{"chunk", 256}, {"policies", {"full"}}, {"limit", 5}};
  auto inputs = [&](const Json& options, const std::vector<std::string>& specs) {
    std::map<std::string, std::vector<fs::path>> own;
    for (const auto& spec : specs)
      own[spec] = spec == "full" ? std::vector<fs::path>{} : std::vector{dir / "g.safetensors"};
    return sweep_inputs(options, {model, dir / "data.jsonl"}, own);
  };
  // Nothing predicted yet: anything goes, and the inputs are recorded.
  check_and_record_sweep_inputs(out, inputs(config, {"full", "trimkv:gates=g"}));
  write_text_file_atomic(out / "predictions.jsonl", "{\"id\": \"a\"}\n");
  // The same inputs; more policies, budgets or a higher limit extend the sweep.
  Json more = config;
  more["limit"] = 50;
  more["policies"] = {"full", "h2o"};
  check_and_record_sweep_inputs(out, inputs(more, {"full", "h2o", "trimkv:gates=g"}));
  // A changed option, model file, data file or policy's gates file is refused, saying which.
  Json other = config;
  other["chunk"] = 64;
  EXPECT_ERROR_CONTAINS(check_and_record_sweep_inputs(out, inputs(other, {"full"})),
                        "option chunk: was 256, now 64");
  // ...unless the benchmark's resume keys carry its settings (mmmu: other settings, other keys).
  check_and_record_sweep_inputs(out, inputs(other, {"full"}), /*check_options=*/false);
  check_and_record_sweep_inputs(out, inputs(config, {"full"}), /*check_options=*/false);
  write_text_file_atomic(model / "model.safetensors", "weights v2");
  EXPECT_ERROR_CONTAINS(check_and_record_sweep_inputs(out, inputs(config, {"full"})),
                        "model.safetensors: was \"sha256 ");
  write_text_file_atomic(model / "model.safetensors", "weights v1");
  check_and_record_sweep_inputs(out, inputs(config, {"full"}));  // restored: resumes again
  write_text_file_atomic(dir / "g.safetensors", "gates v2");
  EXPECT_ERROR_CONTAINS(check_and_record_sweep_inputs(out, inputs(config, {"trimkv:gates=g"})),
                        "file of trimkv:gates=g");
  // A run that does not use that policy is not stopped by its gates.
  check_and_record_sweep_inputs(out, inputs(config, {"full"}));
  // An older run without inputs.json resumes (with a warning) and gets one.
  fs::remove(out / "inputs.json");
  check_and_record_sweep_inputs(out, inputs(config, {"full"}));
  EXPECT_TRUE(fs::exists(out / "inputs.json"));
  // Another retain build resumes (a warning), and the record keeps both builds from then on.
  const Json this_build = inputs(config, {"full"}).at("retain_builds");
  ASSERT_EQ(this_build.size(), 1u);
  EXPECT_NE(this_build[0], "unknown");
  Json rebuilt = inputs(config, {"full"});
  rebuilt["retain_builds"] = {"size 1, modified 2"};
  check_and_record_sweep_inputs(out, rebuilt);
  check_and_record_sweep_inputs(out, inputs(config, {"full"}));
  const Json record = parse_json(read_text_file(out / "inputs.json"), "inputs.json");
  EXPECT_EQ(record.at("retain_builds"), Json({this_build[0], "size 1, modified 2"}));
}

TEST(Synthetic, TasksAreSeededAndHoldTheirAnswers) {
  for (const auto& task : synthetic_task_names()) {
    auto a = make_synthetic(task, 4, 300, 11);
    auto b = make_synthetic(task, 6, 300, 11);
    ASSERT_EQ(a.size(), 4u);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].context, b[i].context) << task;  // more examples never change earlier ones
      for (const auto& [q, answer] : a[i].turns)
        EXPECT_NE(a[i].context.find(answer), std::string::npos) << task;
      EXPECT_GE(std::count(a[i].context.begin(), a[i].context.end(), ' '), 290) << task;
    }
    EXPECT_NE(make_synthetic(task, 1, 300, 12)[0].context, a[0].context) << task;
  }
  EXPECT_EQ(make_synthetic("multi", 1, 100, 0)[0].turns.size(), 3u);
  auto ex = make_synthetic("multi", 1, 100, 0)[0];
  auto prompt = synthetic_prompt(ex, 1);
  EXPECT_NE(prompt.find("Answer: " + ex.turns[0].second + "\nQuestion: " + ex.turns[1].first +
                        "\nAnswer:"),
            std::string::npos);
  EXPECT_ERROR_CONTAINS(make_synthetic("sudoku", 1, 10, 0), "task 'sudoku' is not known");
  EXPECT_EQ(first_line_trimmed("  4821 \nmore"), "4821");
}

TEST(Synthetic, SpecShapesKeysValuesAndQuestions) {
  SyntheticSpec spec;
  spec.key_chars = 2;
  spec.key_alphabet = "bcdfg";
  spec.value_digits = 2;
  spec.multi_facts = 1;
  spec.multi_facts_max = 5;
  spec.multi_questions = 8;
  std::set<size_t> fact_counts;
  for (const auto& ex : make_synthetic("multi", 40, 30, 3, spec)) {
    std::set<std::string> keys;
    for (const auto& [q, a] : ex.turns) {
      const std::string key = q.substr(q.size() - 3, 2);  // "... of key XY?"
      for (char c : key) EXPECT_NE(spec.key_alphabet.find(c), std::string::npos) << q;
      EXPECT_TRUE(keys.insert(key).second) << "a key asked twice in " << ex.id;
      ASSERT_EQ(a.size(), 2u);
      EXPECT_NE(a[0], '0');
      EXPECT_NE(ex.context.find("Key " + key + ": value " + a + "."), std::string::npos);
    }
    // Never more questions than facts, every fact asked: the turn count is the fact count.
    fact_counts.insert(ex.turns.size());
  }
  EXPECT_EQ(fact_counts, (std::set<size_t>{1, 2, 3, 4, 5}));
  // Lengths drawn from a range stay inside it.
  for (const auto& ex : make_synthetic("needle", 10, 50, 3, spec, 200)) {
    const auto words = std::count(ex.context.begin(), ex.context.end(), ' ') + 1;
    EXPECT_GE(words, 50);
    EXPECT_LE(words, 210);
  }
  EXPECT_EQ(SyntheticSpec::from_json(spec.to_json(), "t").to_json(), spec.to_json());
  EXPECT_ERROR_CONTAINS(SyntheticSpec::from_json(Json{{"key_char", 2}}, "spec.json"),
                        "spec.json: unknown task spec key 'key_char'");
  SyntheticSpec bad = spec;
  bad.key_alphabet = "bb";
  EXPECT_ERROR_CONTAINS(bad.validate("x"), "none repeated");
  bad.key_alphabet = "b-";
  EXPECT_ERROR_CONTAINS(bad.validate("x"), "only hold letters and digits");
  bad.key_alphabet = "bc";
  bad.key_chars = 1;
  EXPECT_ERROR_CONTAINS(bad.validate("x"), "distinct keys");
}

TEST(Synthetic, DocumentsMarkTheirAnswersAndTaskFilesRoundTrip) {
  SyntheticSpec spec;
  spec.multi_questions = 4;
  for (const auto& task : synthetic_task_names()) {
    for (const auto& ex : make_synthetic(task, 3, 40, 5, spec)) {
      std::vector<std::pair<int64_t, int64_t>> spans;
      const std::string doc = synthetic_document(ex, &spans);
      ASSERT_EQ(spans.size(), ex.turns.size());
      for (size_t t = 0; t < spans.size(); ++t) {
        const std::string text = doc.substr(spans[t].first, spans[t].second - spans[t].first);
        const std::string answer = ": " + ex.turns[t].second;
        EXPECT_EQ(text, t + 1 < spans.size() ? answer + "\n" : answer) << ex.id;
        // The span starts where the prompt of that turn ends.
        EXPECT_EQ(synthetic_prompt(ex, t).size(), static_cast<size_t>(spans[t].first) + 1);
      }
      SyntheticExample back = synthetic_from_json(synthetic_to_json(ex), "t");
      EXPECT_EQ(back.id, ex.id);
      EXPECT_EQ(back.context, ex.context);
      EXPECT_EQ(back.turns, ex.turns);
    }
  }
  EXPECT_ERROR_CONTAINS(synthetic_from_json(Json{{"id", "a"}, {"task", "kv"}}, "f.jsonl:3"),
                        "f.jsonl:3: expected a string field 'context'");
  EXPECT_ERROR_CONTAINS(
      synthetic_from_json(Json{{"id", "a"}, {"task", "kv"}, {"context", "c"}, {"turns", {Json{}}}},
                          "f.jsonl:4"),
      "f.jsonl:4: turns[0]: expected a string field");
}

// A random tiny llama with its SentencePiece tokenizer, in DIR/model.
std::string make_tiny_llama(const testing::TempDir& dir) {
  InitModelOptions init;
  init.arch = "llama";
  init.preset = "tiny";
  init.out = (dir / "model").string();
  init_model(init);
  return init.out;
}

TEST(Synthetic, SweepWritesScoresAndResumes) {
  testing::TempDir dir;
  SyntheticEvalOptions o;
  o.sweep.model.model_dir = make_tiny_llama(dir);
  o.sweep.policies = {"full", "streaming", "knorm"};
  o.sweep.budgets = {0.2, 40};
  o.count = 2;
  o.context_words = 120;
  o.max_new_tokens = 3;
  o.sweep.chunk = 64;
  o.sweep.out = (dir / "run").string();
  ASSERT_EQ(run_synthetic_eval(o), 0);
  Json scores = read_json_file(dir / "run" / "scores.json");
  EXPECT_EQ(scores["benchmark"], "synthetic");
  ASSERT_EQ(scores["results"].size(), 5u);  // full once + 2 policies x 2 budgets
  EXPECT_TRUE(scores["results"][0]["budget"].is_null());
  EXPECT_EQ(scores["results"][1]["budget"].get<double>(), 0.2);
  for (const auto& r : scores["results"]) {
    for (const char* k : {"em", "em_kv", "em_vars", "em_needle", "em_multi", "peak_kv_bytes"})
      EXPECT_TRUE(r["metrics"].contains(k)) << k;
  }
  // Every cell but the full cache's carries its paired difference to it over the same questions:
  // its em minus the full cache's, inside its own interval.
  EXPECT_FALSE(scores["results"][0]["metrics"].contains("em_vs_full"));
  const double full_em = scores["results"][0]["metrics"]["em"].get<double>();
  for (size_t i = 1; i < scores["results"].size(); ++i) {
    const Json& r = scores["results"][i];
    const double difference = r["metrics"]["em_vs_full"].get<double>();
    EXPECT_NEAR(difference, r["metrics"]["em"].get<double>() - full_em, 1e-9);
    EXPECT_LE(r["intervals"]["em_vs_full"][0].get<double>(), difference);
    EXPECT_GE(r["intervals"]["em_vs_full"][1].get<double>(), difference);
  }
  // The budgeted runs hold less KV memory at their peak than the full cache.
  EXPECT_LT(scores["results"][1]["metrics"]["peak_kv_bytes"].get<double>(),
            scores["results"][0]["metrics"]["peak_kv_bytes"].get<double>());
  const std::string first = read_text_file(dir / "run" / "predictions.jsonl");
  const auto lines = std::count(first.begin(), first.end(), '\n');
  EXPECT_EQ(lines, 5 * (2 + 2 + 2 + 2 * 3));
  // A killed run keeps its finished lines: cut the file, rerun, get the same file back.
  write_text_file_atomic(dir / "run" / "predictions.jsonl",
                         first.substr(0, first.find('\n', first.size() / 2) + 1));
  ASSERT_EQ(run_synthetic_eval(o), 0);
  // Same predictions (timings aside), each exactly once.
  auto strip = [](const std::string& text) {
    std::multiset<std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      Json j = Json::parse(line);
      out.insert(j["policy"].dump() + j["budget"].dump() + j["id"].dump() + j["turn"].dump() +
                 j["pred"].dump() + j["peak_kv_bytes"].dump());
    }
    return out;
  };
  EXPECT_EQ(strip(read_text_file(dir / "run" / "predictions.jsonl")), strip(first));
  Json again = read_json_file(dir / "run" / "scores.json");
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(again["results"][i]["metrics"]["em"], scores["results"][i]["metrics"]["em"]);
    EXPECT_EQ(again["results"][i]["metrics"]["peak_kv_bytes"],
              scores["results"][i]["metrics"]["peak_kv_bytes"]);
  }
}

// Every budgeted policy of the registry (and a few options) on the tiny Llama in `dir`, its
// random gates and learned scorers written there: options for a synthetic sweep of them.
SyntheticEvalOptions every_policy_sweep(const testing::TempDir& dir) {
  const std::string model_dir = make_tiny_llama(dir);
  const ModelConfig config = ModelConfig::load(model_dir);
  GateConfig gate_config;
  gate_config.arch = GateArch::kMlp2;
  gate_config.width = 8;
  gate_config.bias_init = 0;  // well-separated retention scores, not all ~1
  gate_config.init_std = 0.5;
  GateBank gates(gate_config, config, at::kCPU, 3);
  write_gate_file(dir / "gates.safetensors", gates,
                  {gate_config, base_fingerprint(config), 0, "global", ""});

  SyntheticEvalOptions o;
  o.sweep.model.model_dir = model_dir;
  o.sweep.gates = (dir / "gates.safetensors").string();
  o.sweep.policies = {"full"};
  // The learned competitors with random scorers of their kind (relative to --gates-dir).
  o.sweep.model.gates_dir = dir.path().string();
  for (const std::string kind : {"locret", "kvzap"}) {
    ScorerConfig scorer_config;
    scorer_config.kind = parse_scorer_kind(kind, "test");
    scorer_config.width = 8;
    scorer_config.init_std = 0.5;
    write_scorer_file(dir / (kind + ".safetensors"), ScorerBank(scorer_config, config, at::kCPU, 4),
                      {scorer_config, base_fingerprint(config), ""});
  }
  for (const auto& r : policy_registry())
    if (r.budgeted)
      o.sweep.policies.push_back(r.name + ":buffer=3" +
                                 (r.needs_scorer ? ",scorer=" + r.name + ".safetensors" : ""));
  o.sweep.policies.push_back("snapkv:pool=avg,buffer=0");
  o.sweep.policies.push_back("trimkv:threshold=0.5,buffer=2");
  o.count = 2;
  o.context_words = 60;
  o.max_new_tokens = 4;
  return o;
}

// What each record of a predictions.jsonl says of its generation, timings and batch size aside.
std::map<std::string, std::string> generation_records(const fs::path& file) {
  std::map<std::string, std::string> out;
  std::istringstream in(read_text_file(file));
  std::string line;
  while (std::getline(in, line)) {
    Json j = Json::parse(line);
    std::string key = j["policy"].dump() + j["budget"].dump() + j["id"].dump() + j["turn"].dump();
    std::string value;
    for (const char* field : {"pred", "prompt_tokens", "peak_kv_bytes", "live_kv_bytes",
                              "budget_kv_bytes", "max_attended_entries", "max_attended_total"})
      value += j[field].dump() + " ";
    out[key] = value;
  }
  return out;
}

// --batch-size N generates N examples of a cell at once. Each row keeps its own budget (a
// fractional budget resolves per prompt), its own protected question or compressed context, and
// is read in the chunks it is read in alone: every policy predicts the same answers, with the
// same KV bytes and the same most-entries-read, as one example at a time.
TEST(Synthetic, BatchedSweepPredictsWhatEachExampleAloneDoes) {
  testing::TempDir dir;
  SyntheticEvalOptions o = every_policy_sweep(dir);
  o.sweep.budgets = {0.15, 9};
  o.sweep.chunk = 7;  // several chunks, a partial one first, rows of different lengths padded
  const std::vector<std::string> every_policy = o.sweep.policies;
  for (const std::string mode : {"evict", "protect", "keep"}) {
    o.question_mode = mode == "keep" ? "keep" : "evict";
    o.protect_question = mode == "protect";
    // Every policy evicting; the two question modes on the policies they change most.
    o.sweep.policies = mode == "evict"
                           ? every_policy
                           : std::vector<std::string>{"full", "h2o:buffer=3", "snapkv:buffer=3",
                                                      "dbtrimkv:buffer=3", "streaming:buffer=3"};
    std::map<std::string, std::string> runs[2];
    for (int b : {0, 1}) {
      o.sweep.batch_size = b == 0 ? 1 : 5;
      o.sweep.out = (dir / (mode + std::to_string(o.sweep.batch_size))).string();
      ASSERT_EQ(run_synthetic_eval(o), 0);
      runs[b] = generation_records(fs::path(o.sweep.out) / "predictions.jsonl");
    }
    ASSERT_EQ(runs[0].size(), runs[1].size());
    ASSERT_EQ(runs[0].size(), o.sweep.policies.size() * 2 * 12 - 12);  // full runs once
    for (const auto& [key, alone] : runs[0]) EXPECT_EQ(runs[1][key], alone) << mode << " " << key;
  }
}

// --workers N runs N batches at once (threads of one process sharing the model): every record is
// written once, and is the one a single worker writes; a second run resumes every one of them.
TEST(Synthetic, WorkersPredictWhatOneWorkerDoes) {
  testing::TempDir dir;
  SyntheticEvalOptions o = every_policy_sweep(dir);
  o.sweep.budgets = {0.15, 9};
  o.sweep.chunk = 7;
  o.sweep.batch_size = 2;
  std::map<std::string, std::string> runs[2];
  for (int w : {0, 1}) {
    o.sweep.model.workers = w == 0 ? 1 : 3;
    o.sweep.out = (dir / ("workers" + std::to_string(o.sweep.model.workers))).string();
    ASSERT_EQ(run_synthetic_eval(o), 0);
    const fs::path predictions = fs::path(o.sweep.out) / "predictions.jsonl";
    runs[w] = generation_records(predictions);
    const std::string text = read_text_file(predictions);
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'),
              static_cast<std::ptrdiff_t>(runs[w].size()));  // no record twice
  }
  ASSERT_EQ(runs[0].size(), o.sweep.policies.size() * 2 * 12 - 12);
  ASSERT_EQ(runs[1].size(), runs[0].size());
  for (const auto& [key, one] : runs[0]) EXPECT_EQ(runs[1][key], one) << key;
  ASSERT_EQ(run_synthetic_eval(o), 0);  // resumed: nothing left to generate
  const Json scores =
      parse_json(read_text_file(fs::path(o.sweep.out) / "scores.json"), "scores.json");
  EXPECT_EQ(scores["run"]["generated"].get<int64_t>(), 0);
  EXPECT_EQ(scores["run"]["workers"].get<int64_t>(), 3);
}

// Under --question-mode keep with the context read in one step, every cell (each policy at each
// budget) reads a unit's context once with the others (SharedContextCache), alone or batched, or
// a policy's budgets at a time when --shared-context-gib holds no more: every policy predicts
// what each (policy, budget) cell predicts reading the context itself, with the same KV bytes and
// entries read. A run killed half-way resumes to the same records.
TEST(Synthetic, CellsSharingAContextReadPredictWhatEachCellDoesAlone) {
  testing::TempDir dir;
  SyntheticEvalOptions o = every_policy_sweep(dir);
  o.sweep.budgets = {0.15, 9, 0.3};
  o.question_mode = "keep";
  o.sweep.chunk = 4096;  // every context in one step
  o.sweep.share_context = false;
  o.sweep.out = (dir / "alone").string();
  ASSERT_EQ(run_synthetic_eval(o), 0);
  const auto alone = generation_records(fs::path(o.sweep.out) / "predictions.jsonl");
  ASSERT_EQ(alone.size(), (o.sweep.policies.size() - 1) * 3 * 12 + 12);
  {
    std::istringstream lines(read_text_file(fs::path(o.sweep.out) / "predictions.jsonl"));
    for (std::string line; std::getline(lines, line);)
      EXPECT_EQ(Json::parse(line)["context_read_by"], 1) << line;
  }
  o.sweep.share_context = true;
  // --batch-size counts a shared read's rows (a row per unit and cell): `batch` units a read.
  const auto cells = static_cast<int64_t>(alone.size() / 12);
  // --chunk 0 also reads each prompt in one step (the caches sized for it).
  for (int64_t batch : {1, 3, 2}) {
    o.sweep.batch_size = batch * cells;
    o.sweep.chunk = batch == 2 ? 0 : 4096;
    o.sweep.out = (dir / ("shared" + std::to_string(batch))).string();
    ASSERT_EQ(run_synthetic_eval(o), 0);
    const auto shared = generation_records(fs::path(o.sweep.out) / "predictions.jsonl");
    ASSERT_EQ(shared.size(), alone.size());
    // Every cell read the context together and decoded in one batch: a row per cell of each unit.
    std::istringstream lines(read_text_file(fs::path(o.sweep.out) / "predictions.jsonl"));
    for (std::string line; std::getline(lines, line);) {
      const Json j = Json::parse(line);
      EXPECT_EQ(j["context_read_by"], cells) << line;
      EXPECT_EQ(j["batch_size"], cells * batch) << line;
    }
    for (const auto& [key, record] : alone)
      EXPECT_EQ(shared.at(key), record) << batch << " " << key;
  }
  // Room for one policy's copies of a context per read: each policy reads it for its budgets.
  o.sweep.batch_size = 2 * cells;
  o.sweep.chunk = 4096;
  o.sweep.shared_context_gib = 1e-9;
  o.sweep.out = (dir / "per-policy").string();
  ASSERT_EQ(run_synthetic_eval(o), 0);
  {
    std::istringstream lines(read_text_file(fs::path(o.sweep.out) / "predictions.jsonl"));
    for (std::string line; std::getline(lines, line);) {
      const Json j = Json::parse(line);
      EXPECT_EQ(j["context_read_by"], j["policy"] == "full" ? 1 : 3) << line;
      EXPECT_EQ(j["batch_size"], (j["policy"] == "full" ? 1 : 3) * 2) << line;
    }
    EXPECT_EQ(generation_records(fs::path(o.sweep.out) / "predictions.jsonl"), alone);
  }
  o.sweep.shared_context_gib = 8;
  // Resume: keep the first 40 lines (some budgets of a unit written, others not).
  o.sweep.batch_size = 3;
  o.sweep.chunk = 4096;
  o.sweep.out = (dir / "shared3").string();
  const fs::path log = fs::path(o.sweep.out) / "predictions.jsonl";
  std::istringstream in(read_text_file(log));
  std::string kept, line;
  for (int n = 0; n < 40 && std::getline(in, line); ++n) kept += line + "\n";
  write_text_file_atomic(log, kept);
  ASSERT_EQ(run_synthetic_eval(o), 0);
  EXPECT_EQ(generation_records(log), alone);
}

// Under --question-mode evict, the cells of a unit read its prompt's first chunk once together
// (the chunk generate_batch reads first, counted back from the last token: no policy has evicted
// anything before its end) and each goes on in its own rows of one batch: every policy predicts
// what each cell predicts reading the whole prompt itself, with the same KV bytes and entries
// read: several chunks with a partial one first, batched rows of different lengths padded, the
// prompt in one step (--chunk 0), and a protected question.
TEST(Synthetic, CellsSharingAnEvictModeFirstChunkPredictWhatEachCellDoesAlone) {
  testing::TempDir dir;
  SyntheticEvalOptions o = every_policy_sweep(dir);
  const std::vector<std::string> every_policy = o.sweep.policies;
  o.sweep.budgets = {0.15, 9};
  o.question_mode = "evict";
  struct Case {
    bool protect;
    int64_t chunk, batch;
  };
  // Every policy in the first case; the others on the policies they change most.
  for (const Case& k : {Case{false, 7, 3}, Case{false, 0, 2}, Case{true, 7, 3}}) {
    o.protect_question = k.protect;
    o.sweep.policies = k.chunk == 7 && !k.protect
                           ? every_policy
                           : std::vector<std::string>{"full", "h2o:buffer=3", "snapkv:buffer=3",
                                                      "dbtrimkv:buffer=3"};
    o.sweep.chunk = k.chunk;
    const std::string name = std::string(k.protect ? "protect" : "evict") + "-" +
                             std::to_string(k.chunk) + "-" + std::to_string(k.batch);
    o.sweep.share_context = false;
    o.sweep.batch_size = 1;
    o.sweep.out = (dir / ("alone-" + name)).string();
    ASSERT_EQ(run_synthetic_eval(o), 0);
    const auto alone = generation_records(fs::path(o.sweep.out) / "predictions.jsonl");
    ASSERT_EQ(alone.size(), (o.sweep.policies.size() - 1) * 2 * 12 + 12);
    const auto cells = static_cast<int64_t>(alone.size() / 12);
    o.sweep.share_context = true;
    o.sweep.batch_size = k.batch * cells;  // rows: k.batch units a read
    o.sweep.out = (dir / ("shared-" + name)).string();
    ASSERT_EQ(run_synthetic_eval(o), 0);
    const auto shared = generation_records(fs::path(o.sweep.out) / "predictions.jsonl");
    std::istringstream lines(read_text_file(fs::path(o.sweep.out) / "predictions.jsonl"));
    for (std::string line; std::getline(lines, line);) {
      const Json j = Json::parse(line);
      EXPECT_EQ(j["context_read_by"], cells) << name << " " << line;
      EXPECT_EQ(j["batch_size"], cells * k.batch) << name << " " << line;
    }
    ASSERT_EQ(shared.size(), alone.size());
    for (const auto& [key, record] : alone) EXPECT_EQ(shared.at(key), record) << name << " " << key;
  }
}

// The llama GQA-4 fixture, the ids of its transformers reference and the loss it computed.
struct LlamaReference {
  Decoder model;
  std::vector<int64_t> ids;
  double nll;
};
LlamaReference llama_reference() {
  fs::path dir = testing::fixture_dir("hf") / "llama_gqa4_llama3";
  auto ref = SafetensorsFile::open(dir / "reference.safetensors");
  auto ids_t = ref->tensor("input_ids").view({-1});
  return {
      Decoder::load(dir, {}),
      std::vector<int64_t>(ids_t.data_ptr<int64_t>(), ids_t.data_ptr<int64_t>() + ids_t.numel()),
      ref->tensor("nll").item<double>()};
}

TEST(StreamingPerplexity, FullCacheEqualsTransformersLossAndPoliciesStayBounded) {
  auto [model, ids, expected] = llama_reference();
  FullKvCache full(model.config().num_layers);
  auto r = compute_streaming_perplexity(model, ids, full, 8);  // 5 chunks, the last one partial
  EXPECT_LE(std::abs(r.nll - expected) / expected, 1e-5);
  EXPECT_EQ(r.tokens, static_cast<int64_t>(ids.size()) - 1);
  BudgetedKvCache small(model.config(), parse_policy("h2o:buffer=2,window=4"), 8, 8);
  auto evicted = compute_streaming_perplexity(model, ids, small, 8);
  EXPECT_TRUE(std::isfinite(evicted.nll));
  EXPECT_NE(evicted.nll, r.nll);  // 8 entries per head of 37: the context really shrank
  EXPECT_LE(small.lengths(0).max().item<int64_t>(), 8 + 2);
}

// Scoring a subset of the tokens: the subsets' log-likelihoods add up to the whole text's, the
// first token is never a target, and a budgeted cache scores the same tokens.
TEST(StreamingPerplexity, ScoresOnlyTheFlaggedTokens) {
  auto [model, ids, reference_nll] = llama_reference();
  const auto n = ids.size();
  std::vector<uint8_t> every_third(n, 0), rest(n, 1), first_only(n, 0);
  for (size_t k = 0; k < n; k += 3) every_third[k] = 1, rest[k] = 0;
  first_only[0] = 1;
  auto run = [&](const std::vector<uint8_t>* scored) {
    FullKvCache cache(model.config().num_layers);
    return compute_streaming_perplexity(model, ids, cache, 8, scored, /*progress=*/false);
  };
  const auto all = run(nullptr), a = run(&every_third), b = run(&rest), none = run(&first_only);
  EXPECT_EQ(a.tokens + b.tokens, all.tokens);
  EXPECT_EQ(a.tokens, static_cast<int64_t>((n - 1) / 3));  // targets 3, 6, ...: token 0 is not one
  EXPECT_NEAR(a.nll * a.tokens + b.nll * b.tokens, all.nll * all.tokens, 1e-6 * all.tokens);
  EXPECT_EQ(none.tokens, 0);
  EXPECT_EQ(none.nll, 0.0);
  BudgetedKvCache small(model.config(), parse_policy("h2o:buffer=2,window=4"), 8, 8);
  const auto evicted = compute_streaming_perplexity(model, ids, small, 8, &every_third, false);
  EXPECT_EQ(evicted.tokens, a.tokens);
  EXPECT_NE(evicted.nll, a.nll);
  std::vector<uint8_t> short_mask(n - 1, 1);
  FullKvCache cache(model.config().num_layers);
  EXPECT_THROW(compute_streaming_perplexity(model, ids, cache, 8, &short_mask, false), Error);
}

// The persistent cache of a conversation gives the same answers as re-reading the whole history
// with a fresh cache, in both history modes.
TEST(Dialogue, PersistentCacheEqualsReReadingTheHistory) {
  testing::TempDir dir;
  InitModelOptions init;
  init.arch = "qwen2";
  init.preset = "tiny";
  init.seed = 5;
  init.sets = {"initializer_range=0.3"};  // peaked logits: greedy choices are not near-ties
  init.out = (dir / "model").string();
  init_model(init);
  auto record = [](const std::string& id) {
    return Json({{"id", id},
                 {"context", "The value of alpha is 17. The cat reads the door. The key is beta."},
                 {"multi_turns",
                  {{{"input", "What is alpha?"}, {"answer", "17"}},
                   {{"input", "What is the key?"}, {"answer", {"beta", "Beta"}}},
                   {{"input", "Who reads?"}, {"answer", "the cat"}}}}})
               .dump() +
           "\n";
  };
  write_text_file_atomic(dir / "d.jsonl", record("a") + record("b"));
  for (const std::string history : {"own", "gold"}) {
    DialogueOptions o;
    o.sweep.model.model_dir = init.out;
    o.data = (dir / "d.jsonl").string();
    o.history = history;
    o.sweep.policies = {"full", "streaming"};
    o.sweep.budgets = {20};
    o.sweep.chunk = 8;
    o.max_new_tokens = 4;
    o.sweep.out = (dir / history).string();
    ASSERT_EQ(run_dialogue_eval(o), 0);
    Json scores = read_json_file(dir / history / "scores.json");
    ASSERT_EQ(scores["results"].size(), 2u);
    for (const char* k : {"em", "f1", "rouge_l", "em_turn1", "f1_turn3", "rouge_l_turn2"})
      EXPECT_TRUE(scores["results"][0]["metrics"].contains(k)) << k;

    // Re-read the history from scratch for record "a" under the full cache.
    Decoder model = Decoder::load(init.out, {});
    auto tok = load_tokenizer(init.out);
    std::ifstream in(dir / history / "predictions.jsonl");
    std::string line;
    Json record_a;
    while (std::getline(in, line)) {
      Json j = Json::parse(line);
      if (j["policy"] == "full" && j["id"] == "a") record_a = j;
    }
    ASSERT_FALSE(record_a.is_null());
    const std::vector<std::string> questions = {"What is alpha?", "What is the key?", "Who reads?"};
    const std::vector<std::string> gold = {"17", "beta", "the cat"};
    auto history_ids =
        tok->encode_prompt("The value of alpha is 17. The cat reads the door. The key is beta.");
    for (size_t t = 0; t < 3; ++t) {
      auto q = tok->encode("\n\nQuestion: " + questions[t] + "\nAnswer:");
      history_ids.insert(history_ids.end(), q.begin(), q.end());
      FullKvCache fresh(model.config().num_layers);
      SamplingOptions sampling;
      sampling.max_new_tokens = 4;
      if (tok->eos_id()) sampling.stop_ids = {*tok->eos_id()};
      c10::InferenceMode guard;
      auto g = generate(model, history_ids, fresh, sampling);
      EXPECT_EQ(tok->decode(g.tokens, true), record_a["turns"][t]["pred"].get<std::string>())
          << history << " turn " << t;
      auto next = history == "own" ? g.tokens : tok->encode(" " + gold[t]);
      history_ids.insert(history_ids.end(), next.begin(), next.end());
    }
  }
}

}  // namespace
}  // namespace retain
