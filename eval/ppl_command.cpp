#include "eval/ppl_command.h"

#include <cstdio>

#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "eval/cache_factory.h"
#include "eval/perplexity.h"
#include "eval/plot.h"
#include "eval/scores.h"

namespace retain {

int run_ppl_command(const PplCommandOptions& o) {
  RETAIN_CHECK(!o.out_dir.empty(), "eval ppl: --out is required");
  EvalModel m = load_eval_model(o.model, o.gates, true, o.policies);
  const Decoder& model = *m.model;
  std::vector<int64_t> ids = m.tokenizer->encode_prompt(read_text_file(o.text_file));
  log_info("eval ppl: ", o.text_file, " is ", ids.size(), " tokens");
  std::vector<ScoreRow> rows;
  if (o.policies.empty()) {
    PerplexityOptions options;
    options.max_length = o.max_length;
    options.stride = o.stride;
    PerplexityResult r = compute_perplexity(model, ids, options);
    rows.push_back(
        {"full",
         std::nullopt,
         {{"ppl", r.ppl}, {"nll", r.nll}, {"tokens", r.tokens}, {"windows", r.windows}}});
  } else {
    for (const auto& [spec, budget] : sweep_cells(o.policies, o.budgets, "eval ppl")) {
      const PolicySpec policy = parse_policy(spec);
      const auto n = static_cast<int64_t>(ids.size());
      auto cache = make_kv_cache(model.config(), policy, budget.value_or(0.0), n, o.chunk,
                                 m.gates_for(policy));
      PerplexityResult r = compute_streaming_perplexity(model, ids, *cache, o.chunk);
      Json metrics = {{"ppl", r.ppl}, {"nll", r.nll}, {"tokens", r.tokens}, {"chunks", r.windows}};
      if (budget) {
        int64_t kept = resolve_budget(*budget, n);
        metrics["kept_per_head"] = kept;
        metrics["eviction_rate"] =
            1.0 - std::min(1.0, static_cast<double>(kept) / static_cast<double>(n));
      }
      metrics["peak_kv_bytes"] = cache->peak_bytes();
      rows.push_back({spec, budget, metrics});
    }
  }
  write_scores(o.out_dir, "ppl", rows);
  if (!o.policies.empty())
    write_score_plots(o.out_dir, rows,
                      {"perplexity", "perplexity", {{"ppl", "perplexity"}}, "peak_kv_bytes"});
  std::printf("%-12s %-8s %10s %9s %8s\n", "policy", "budget", "ppl", "nll", "tokens");
  for (const auto& r : rows)
    std::printf("%-12s %-8s %10.4f %9.5f %8lld\n", r.policy.c_str(),
                r.budget ? str_cat(*r.budget).c_str() : "-", r.metrics["ppl"].get<double>(),
                r.metrics["nll"].get<double>(),
                static_cast<long long>(r.metrics["tokens"].get<int64_t>()));
  log_info("wrote ", (fs::path(o.out_dir) / "scores.json").string());
  return 0;
}

}  // namespace retain
