#include "eval/benchmarks/math.h"

#include "core/error.h"
#include "core/log.h"
#include "eval/benchmarks/benchmark.h"
#include "eval/benchmarks/scoring.h"
#include "eval/math/math_data.h"
#include "eval/math/math_grading.h"
#include "model/decoder.h"

namespace retain {

namespace {

class Math final : public Benchmark {
 public:
  explicit Math(const MathOptions& o) : o_(o), kind_(parse_math_benchmark(o.benchmark)) {}

  std::string name() const override { return "math"; }
  std::string unit_name() const override { return "gen"; }

  void load_data() override {
    problems_ = load_math_problems(o_.data, kind_, o_.limit);
    log_info("math: ", problems_.size(), " ", math_benchmark_name(kind_), " problems from ",
             o_.data, ", ", o_.samples, " sample", o_.samples == 1 ? "" : "s", " each");
  }

  void prepare(const EvalModel& m) override {
    // Every cell and sample reads the same prompt: render and encode each once.
    prompts_.reserve(problems_.size());
    const PromptEncoder encoder(o_.sweep.model.model_dir, o_.chat);
    int64_t longest = 0;
    for (const auto& p : problems_) {
      const std::string text =
          o_.instruction.empty() ? p.problem : p.problem + "\n" + o_.instruction;
      prompts_.push_back(encoder.encode(*m.tokenizer, text));
      longest = std::max<int64_t>(longest, static_cast<int64_t>(prompts_.back().size()));
    }
    const int64_t positions = m.model->config().max_position_embeddings;
    if (longest + o_.max_new_tokens > positions)
      log_warn("eval math: the longest prompt (", longest, " tokens) + --max-new-tokens ",
               o_.max_new_tokens, " passes the model's ", positions,
               " positions: a long generation runs past them");
  }

  Json config() const override {
    return {{"data", o_.data},
            {"math_benchmark", math_benchmark_name(kind_)},
            {"instruction", o_.instruction},
            {"system", o_.chat.system ? Json(*o_.chat.system) : Json(nullptr)},
            {"thinking", !o_.chat.no_thinking},
            {"samples", o_.samples},
            {"temperature", o_.sweep.temperature},
            {"top_p", o_.sweep.top_p},
            {"top_k", o_.sweep.top_k},
            {"seed", o_.seed},
            {"max_new_tokens", o_.max_new_tokens},
            {"limit", o_.limit},
            {"problems", problems_.size()}};
  }

  size_t units() const override { return problems_.size() * static_cast<size_t>(o_.samples); }
  std::string unit_key(size_t i) const override { return str_cat(problem(i).id, "|", sample(i)); }
  std::string record_key(const Json& j) const override {
    return str_cat(j.at("id").get<std::string>(), "|", j.at("sample").get<int64_t>());
  }

  GenerationRequest request(size_t i, const UnitContext& /*context*/) const override {
    GenerationRequest q;
    q.prompt = prompts_[i / static_cast<size_t>(o_.samples)];
    q.max_new_tokens = o_.max_new_tokens;
    if (o_.sweep.temperature > 0) q.seed = seed(i);
    return q;
  }

  Json record(size_t i, const GenerationRequest& /*request*/, const GenerationResult& g,
              Json fields, const UnitContext& c) const override {
    const MathProblem& p = problem(i);
    const std::string response = c.tokenizer.decode(g.tokens, true);
    const auto answer = extract_math_answer(kind_, response);
    fields.update({{"id", p.id},
                   {"sample", sample(i)},
                   {"math_benchmark", math_benchmark_name(kind_)},
                   {"gold", p.gold},
                   {"answer", answer ? Json(*answer) : Json(nullptr)},
                   {"unparsed", !answer.has_value()},
                   {"correct", answer && math_answer_correct(kind_, *answer, p.gold)},
                   {"new_tokens", static_cast<int64_t>(g.tokens.size())},
                   {"truncated", g.finish_reason == "length"},
                   {"response", response}});
    if (o_.sweep.temperature > 0) fields["seed"] = seed(i);
    if (!p.subject.empty()) fields.update({{"subject", p.subject}, {"level", p.level}});
    return fields;
  }

  Json aggregate(const std::vector<Json>& records) const override {
    return math_metrics(kind_, records,
                        [](size_t i) { return str_cat("predictions.jsonl record ", i); });
  }
  std::optional<bool> unit_correct(const Json& record) const override {
    const auto answer =
        extract_math_answer(kind_, json_get<std::string>(record, "response", "a math record"));
    return answer &&
           math_answer_correct(kind_, *answer, json_get<std::string>(record, "gold", "a record"));
  }
  PlotSpec plot() const override {
    return {str_cat("math (", math_benchmark_name(kind_), ")"),
            "accuracy (%)",
            {{"pass@1", "pass@1"}, {"maj@n", str_cat("maj@", o_.samples)}},
            "peak_kv_bytes",
            true};
  }
  std::vector<std::string> table_columns() const override {
    return {"pass@1", "maj@n", "unparsed", "truncated", "mean_new_tokens"};
  }

 private:
  const MathProblem& problem(size_t unit) const {
    return problems_[unit / static_cast<size_t>(o_.samples)];
  }
  int64_t sample(size_t unit) const {
    return static_cast<int64_t>(unit % static_cast<size_t>(o_.samples));
  }
  uint64_t seed(size_t unit) const { return o_.seed + static_cast<uint64_t>(sample(unit)); }

  MathOptions o_;
  MathBenchmark kind_;
  std::vector<MathProblem> problems_;
  std::vector<std::vector<int64_t>> prompts_;
};

}  // namespace

int run_math_eval(const MathOptions& o) {
  RETAIN_CHECK(o.samples == 1 || o.sweep.temperature > 0, "eval math: --samples ", o.samples,
               " with --temperature 0 would generate the same greedy text ", o.samples,
               " times; give --temperature (the papers: 0.6) or --samples 1");
  RETAIN_CHECK(o.sweep.top_p > 0 && o.sweep.top_p <= 1,
               "eval math: --top-p must be in (0, 1], found ", o.sweep.top_p);
  Math benchmark(o);
  return run_sweep(benchmark, o.sweep);
}

BenchmarkScoring math_scoring() {
  BenchmarkScoring s;
  s.name = "math";
  s.metrics = [](const std::vector<Json>& records, bool, const RecordWhere& where) {
    const auto kind =
        parse_math_benchmark(json_get<std::string>(records.front(), "math_benchmark", where(0)));
    return math_metrics(kind, records, where);
  };
  s.figure = [](const std::vector<ScoreRow>&, PlotSpec& plot, std::vector<std::string>& columns) {
    plot = {"math", "accuracy (%)", {{"pass@1", "pass@1"}, {"maj@n", "maj@N"}}, "", true};
    columns = {"pass@1", "maj@n", "unparsed", "truncated", "mean_new_tokens"};
  };
  return s;
}

}  // namespace retain
