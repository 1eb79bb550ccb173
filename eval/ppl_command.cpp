#include "eval/ppl_command.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>

#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "core/progress.h"
#include "data/answer_spans.h"
#include "eval/cache_factory.h"
#include "eval/perplexity.h"
#include "eval/plot.h"
#include "eval/scores.h"

namespace retain {

namespace {

struct PplDocument {
  std::vector<int64_t> ids;
  std::vector<uint8_t> scored;  // empty: every token
};

std::vector<PplDocument> load_documents(const PplCommandOptions& o, const Tokenizer& tokenizer) {
  if (!o.text_file.empty()) {
    RETAIN_CHECK(o.score_spans.empty(), "eval ppl: --score-spans needs --jsonl");
    return {{tokenizer.encode_prompt(read_text_file(o.text_file)), {}}};
  }
  std::ifstream in(o.jsonl_file);
  RETAIN_CHECK(in.good(), "eval ppl: cannot open --jsonl ", o.jsonl_file);
  std::vector<PplDocument> docs;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = str_cat(o.jsonl_file, ":", n);
    const Json j = parse_json(line, where);
    RETAIN_CHECK(j.is_object() && j.contains(o.field) && j[o.field].is_string(), where,
                 ": expected an object with a string field '", o.field, "' (--field)");
    const std::string text = j[o.field].get<std::string>();
    PplDocument doc{tokenizer.encode_prompt(text), {}};
    RETAIN_CHECK(doc.ids.size() >= 2, where, ": the text is ", doc.ids.size(),
                 " tokens; perplexity needs at least 2");
    if (!o.score_spans.empty()) {
      RETAIN_CHECK(j.contains(o.score_spans), where, ": field '", o.score_spans,
                   "' (--score-spans) is missing");
      doc.scored =
          answer_span_mask(text, j[o.score_spans], doc.ids, tokenizer, where, o.score_spans);
    }
    docs.push_back(std::move(doc));
  }
  RETAIN_CHECK(!docs.empty(), "eval ppl: ", o.jsonl_file, " holds no document");
  return docs;
}

}  // namespace

int run_ppl_command(const PplCommandOptions& o) {
  RETAIN_CHECK(!o.out_dir.empty(), "eval ppl: --out is required");
  RETAIN_CHECK(o.text_file.empty() != o.jsonl_file.empty(),
               "eval ppl: give exactly one of --text and --jsonl");
  ensure_writable_dir(o.out_dir, "eval ppl: --out");
  EvalModel m = load_eval_model(o.model, o.gates, true, o.policies);
  const Decoder& model = *m.model;
  const std::vector<PplDocument> docs = load_documents(o, *m.tokenizer);
  int64_t total_tokens = 0;
  for (const auto& d : docs) total_tokens += static_cast<int64_t>(d.ids.size());
  log_info("eval ppl: ", o.text_file.empty() ? o.jsonl_file : o.text_file, " is ", docs.size(),
           " document(s), ", total_tokens, " tokens",
           o.score_spans.empty() ? "" : str_cat(", scored on '", o.score_spans, "' spans"));
  std::vector<ScoreRow> rows;
  if (o.policies.empty() && !o.text_file.empty()) {
    PerplexityOptions options;
    options.max_length = o.max_length;
    options.stride = o.stride;
    PerplexityResult r = compute_perplexity(model, docs.front().ids, options);
    rows.push_back(
        {"full",
         std::nullopt,
         {{"ppl", r.ppl}, {"nll", r.nll}, {"tokens", r.tokens}, {"windows", r.windows}}});
  } else {
    // Documents (or the text) stream through a fresh cache each; a budget below 1 is a share of
    // each document. Without --policy, the full cache.
    const std::vector<std::string> policies =
        o.policies.empty() ? std::vector<std::string>{"full"} : o.policies;
    const auto cells = sweep_cells(policies, o.budgets, "eval ppl");
    // One text shows its own bar over tokens; documents one bar over every (cell, document).
    std::optional<ProgressBar> bar;
    if (docs.size() > 1)
      bar.emplace("ppl", static_cast<int64_t>(cells.size() * docs.size()), "doc");
    for (const SweepCell& cell : cells) {
      const std::string& spec = cell.policy;
      const std::optional<double>& budget = cell.budget;
      const PolicySpec& policy = cell.spec;
      double nll_sum = 0, eviction_sum = 0, peak_sum = 0;
      int64_t scored = 0, chunks = 0, kept_sum = 0;
      for (const auto& doc : docs) {
        const auto n = static_cast<int64_t>(doc.ids.size());
        auto cache = make_kv_cache(model.config(), policy, budget.value_or(0.0), n, o.chunk,
                                   m.learned_for(policy));
        PerplexityResult r = compute_streaming_perplexity(
            model, doc.ids, *cache, o.chunk, doc.scored.empty() ? nullptr : &doc.scored,
            /*progress=*/docs.size() == 1);
        nll_sum += r.nll * static_cast<double>(r.tokens);
        scored += r.tokens;
        chunks += r.windows;
        peak_sum += static_cast<double>(cache->peak_bytes());
        if (budget) {
          const int64_t kept = resolve_budget(*budget, n);
          kept_sum += kept;
          eviction_sum += 1.0 - std::min(1.0, static_cast<double>(kept) / static_cast<double>(n));
        }
        if (bar) bar->update(1);
      }
      RETAIN_CHECK(scored > 0, "eval ppl: no token to score (are the '", o.score_spans,
                   "' spans empty?)");
      const auto count = static_cast<double>(docs.size());
      const double nll = nll_sum / static_cast<double>(scored);
      Json metrics = {{"ppl", std::exp(nll)}, {"nll", nll}, {"tokens", scored}, {"chunks", chunks}};
      if (docs.size() > 1) metrics["docs"] = docs.size();
      if (budget) {
        // Per document: the same for one text; the mean over documents of different lengths.
        metrics["kept_per_head"] = static_cast<double>(kept_sum) / count;
        metrics["eviction_rate"] = eviction_sum / count;
      }
      metrics["peak_kv_bytes"] = peak_sum / count;
      rows.push_back({spec, budget, metrics});
    }
    if (bar) bar->finish();
  }
  write_scores(o.out_dir, "ppl", rows);
  if (rows.size() > 1)
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
