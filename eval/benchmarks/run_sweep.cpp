#include <c10/core/InferenceMode.h>

#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"
#include "eval/benchmarks/benchmark.h"
#include "eval/cache_factory.h"
#include "eval/plot.h"
#include "eval/scores.h"

namespace retain {

std::unique_ptr<KvCache> UnitContext::make_cache(int64_t prompt_tokens) const {
  return make_kv_cache(model.config(), policy, budget.value_or(0.0), prompt_tokens, chunk,
                       eval_model.gates_for(policy));
}

SamplingOptions UnitContext::sampling(int64_t max_new_tokens) const {
  SamplingOptions s;
  s.max_new_tokens = max_new_tokens;
  s.prefill_chunk = chunk;
  s.stop_ids = stop_ids(model.config(), &tokenizer);
  return s;
}

Json generation_fields(const GenerationResult& r, const KvCache& cache, int64_t prompt_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"peak_kv_bytes", cache.peak_bytes()},
          // The most entries one generating query read in a KV head, and in all of them.
          {"max_attended_entries", r.max_attended_entries},
          {"max_attended_total", r.max_attended_total},
          // After the last step: with buffer 0 an evicting cache is back at its budget.
          {"live_kv_bytes", cache.live_bytes()},
          {"budget_kv_bytes", cache.budget_bytes()},
          {"prefill_tokens_per_s",
           r.prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / r.prefill_seconds : 0.0},
          {"decode_tokens_per_s", r.decode_seconds > 0 && r.tokens.size() > 1
                                      ? static_cast<double>(r.tokens.size() - 1) / r.decode_seconds
                                      : 0.0}};
}

namespace {

Json budget_json(const std::optional<double>& budget) {
  return budget ? Json(*budget) : Json(nullptr);
}

// The resume key of a (policy, budget, unit): the same strings the sweeps have always written.
std::string cell_key(const std::string& policy, const Json& budget, const std::string& unit) {
  return str_cat(policy, "|", budget.dump(), "|", unit);
}

}  // namespace

int run_sweep(Benchmark& benchmark, const SweepSettings& s) {
  const std::string command = "eval " + benchmark.name();
  RETAIN_CHECK(!s.out.empty(), command, ": --out is required");
  const auto cells = sweep_cells(s.policies, s.budgets, command);
  benchmark.load_data();
  EvalModel m = load_eval_model(s.model, s.gates, /*with_tokenizer=*/true, s.policies);
  benchmark.prepare(m);

  Json config = benchmark.config();
  config["benchmark"] = benchmark.name();
  config["model"] = s.model.model_dir;
  config["policies"] = s.policies;
  config["budgets"] = s.budgets;
  config["gates"] = s.gates;
  config["chunk"] = s.chunk;
  const fs::path out = start_run_dir(s.out, config);
  // Resume: every line already written is a finished (policy, budget, unit).
  PredictionLog log(out / "predictions.jsonl", [&](const Json& j) {
    return cell_key(j.at("policy").get<std::string>(), j.at("budget"), benchmark.record_key(j));
  });

  const size_t units = benchmark.units();
  ProgressBar bar(benchmark.name(), static_cast<int64_t>(units * cells.size()),
                  benchmark.unit_name());
  c10::InferenceMode guard;
  std::vector<ScoreRow> rows;
  for (const auto& cell : cells) {
    const PolicySpec policy = parse_policy(cell.policy);
    const UnitContext context{*m.model, *m.tokenizer, m, policy, cell.budget, s.chunk};
    const Json budget = budget_json(cell.budget);
    std::vector<Json> records;
    for (size_t i = 0; i < units; ++i) {
      if (const Json* previous = log.find(cell_key(cell.policy, budget, benchmark.unit_key(i)))) {
        records.push_back(*previous);
      } else {
        Json record = benchmark.run(i, context);
        record["policy"] = cell.policy;
        record["budget"] = budget;
        log.append(record);
        records.push_back(std::move(record));
      }
      bar.update(1);
    }
    rows.push_back({cell.policy, cell.budget, benchmark.aggregate(records)});
  }
  bar.finish();
  write_scores(out, benchmark.name(), rows);
  write_score_plot(out / "plot.png", rows, benchmark.plot_metric(), benchmark.plot_title());
  print_score_table(rows, benchmark.table_columns());
  log_info("wrote ", (out / "scores.json").string());
  return 0;
}

}  // namespace retain
