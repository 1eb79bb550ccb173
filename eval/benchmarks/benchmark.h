// A benchmark under eviction, and the one sweep that runs every benchmark. run_sweep owns what
// benchmarks share: the (policy, budget) cells, loading the model once, config.yaml, resuming from
// predictions.jsonl (one flushed line per unit of work), a fresh cache per unit, the generation
// settings (chunk, stop ids), the record's policy and budget, the aggregation of each cell into
// scores.json/csv, the plot and the table. A benchmark says what its units of work are, what one
// generates (or how one runs, when it is several dependent generations), and how a cell's records
// aggregate; `eval score` reuses that aggregation. run_sweep generates --batch-size units of a
// cell at once, each with its own budget, protection, answer length and stop ids, so a batch
// predicts what each unit predicts alone. A new benchmark is one file in this folder and its
// command's flags.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "eval/bootstrap.h"
#include "eval/plot.h"
#include "eval/policies/policy_registry.h"
#include "eval/sweep.h"
#include "model/generate.h"
#include "model/vision/multimodal_prompt.h"

namespace retain {

// What one unit of work runs with.
struct UnitContext {
  const Decoder& model;
  const Tokenizer& tokenizer;
  const EvalModel& eval_model;
  const PolicySpec& policy;
  std::optional<double> budget;  // none for full
  int64_t chunk;
  double temperature = 0.0;  // SweepSettings' sampling
  double top_p = 1.0;
  int64_t top_k = 0;

  // A fresh cache for a prompt of `prompt_tokens` (a budget below 1 is a share of it).
  std::unique_ptr<KvCache> make_cache(int64_t prompt_tokens) const;
  // Generation of up to `max_new_tokens` in `chunk`-token prefill steps, greedy unless the sweep
  // samples, stopping at the tokenizer's EOS and config.json's EOS ids (the same for every
  // benchmark and `generate`).
  SamplingOptions sampling(int64_t max_new_tokens) const;
};

// One generation a unit asks for, and what sets it apart from the cell's settings.
struct GenerationRequest {
  std::vector<int64_t> prompt;
  int64_t budget_tokens = -1;  // what a fractional budget is a share of (-1: the prompt)
  // Entries added to the row's budget per KV head (DBTrimKV's vision-language runs add the
  // prompt's text tokens, so the budget bounds the image tokens: --budget-scope images).
  int64_t budget_extra = 0;
  // --question-mode keep: the prompt's first `context_tokens` are the context, read and
  // compressed once on their own before the rest (0: off).
  int64_t context_tokens = 0;
  int64_t protect_from = -1;  // --protect-question: entries from this position survive the prompt
  int64_t max_new_tokens = 0;
  std::vector<int64_t> extra_stop_ids;
  // A prompt with images (model/vision/multimodal_prompt.h): `prompt` must be its ids (image
  // placeholders expanded); the vision tower has run. Not with context_tokens.
  std::shared_ptr<const MultimodalPrompt> multimodal;
  // A sampled unit's seed: its own generator, so it samples the same tokens in any batch and when
  // a killed sweep resumes (eval math: --seed + the sample's index).
  std::optional<uint64_t> seed;
};

// The fields every generation record carries: prompt tokens, peak / live / budget KV bytes of the
// unit's row, the most entries one generating query read (per head and in total), the batch's
// size and its prefill and decode tokens/s (all rows together).
struct BatchRates {
  int64_t size = 1, prompt_tokens = 0, new_tokens = 0;
};
Json generation_fields(const GenerationResult& result, const KvCache::RowBytes& bytes,
                       const BatchRates& batch);

class Benchmark {
 public:
  virtual ~Benchmark() = default;

  virtual std::string name() const = 0;  // "synthetic": scores.json's benchmark, the bar's label
  virtual std::string unit_name() const { return "ex"; }  // the progress bar's unit

  // Reads and checks the benchmark's data; runs before the model loads, so a malformed file
  // fails in a second.
  virtual void load_data() = 0;
  // What needs the loaded model (its max length, chat template).
  virtual void prepare(const EvalModel& /*model*/) {}
  // config.yaml's fields beyond the sweep's (benchmark, model, policies, budgets, gates, chunk).
  virtual Json config() const = 0;

  virtual size_t units() const = 0;
  // Unit i's identity within a cell, and the same read back from its record (resume keys).
  virtual std::string unit_key(size_t unit) const = 0;
  virtual std::string record_key(const Json& record) const = 0;
  // Whether the keys above carry the settings (mmmu, mmstar: images, pixels, budget scope), so a
  // sweep with other settings into the same --out generates anew beside the old records instead
  // of being refused (the model, data and gate files are checked either way: run_inputs.h).
  virtual bool settings_in_keys() const { return false; }

  // A unit that is one generation: what it generates from, and its record from the result
  // (`fields`: generation_fields of its row). run_sweep batches these and adds the cell's policy
  // and budget to the record.
  virtual GenerationRequest request(size_t unit, const UnitContext& context) const;
  virtual Json record(size_t unit, const GenerationRequest& request, const GenerationResult& result,
                      Json fields, const UnitContext& context) const;
  // Whether a unit whose request() throws retain::Error (a video that does not decode) becomes
  // a failed record, failed_record(), and the sweep goes on; otherwise the error ends the sweep,
  // as for data checked at load. A failed record resumes as done: delete it to retry.
  virtual bool records_failures() const { return false; }
  virtual Json failed_record(size_t unit, const std::string& error) const;
  // A unit of several dependent generations (a conversation) runs whole, one at a time: such a
  // benchmark overrides run() and says single_generation() false.
  virtual bool single_generation() const { return true; }
  virtual Json run(size_t unit, const UnitContext& context) const;

  // A cell's metrics from its records, in unit order.
  virtual Json aggregate(const std::vector<Json>& records) const = 0;
  // The figures' panels (the headline metric first), title and memory metric (eval/plot.h).
  virtual PlotSpec plot() const = 0;
  // The table's metric columns (empty: every metric).
  virtual std::vector<std::string> table_columns() const { return {}; }
  // Where the headline metric (plot()'s first panel) is the share of units answered right:
  // whether this record's unit was. A sweep with the full cache then gives every other cell its
  // paired difference to it over the same units, "<headline>_vs_full" in percentage points with
  // Newcombe's 95% interval (eval/scores.h): most units agree, so it is far narrower than the two
  // scores' own intervals and says whether a gap is one. nullopt: no pairing.
  virtual std::optional<bool> unit_correct(const Json& /*record*/) const { return std::nullopt; }
  // Where a unit scores a share in [0, 1] instead (RULER: the needles of a prompt found): this
  // record's unit (key, stratum, score), and the headline metrics the sweep then gives a
  // stratified-bootstrap 95% interval and, beside a full cache, a paired "<metric>_vs_full" with
  // its interval (eval/bootstrap.h). nullopt / empty: none.
  virtual std::optional<ScoredUnit> unit_score(const Json& /*record*/) const {
    return std::nullopt;
  }
  virtual std::vector<BootstrapMetric> bootstrap_metrics() const { return {}; }
};

int run_sweep(Benchmark& benchmark, const SweepSettings& settings);

// The records of single-generation units, generated as one batch (rows that compress a context
// first and rows that do not as two): what run_sweep does with each --batch-size units.
std::vector<Json> run_generations(const Benchmark& benchmark, const std::vector<size_t>& units,
                                  const UnitContext& context);

// The records of `units` under several cells, per cell (consecutive cells of one policy spec are
// its budgets): a unit whose context is compressed once and read in one step (--question-mode
// keep, a chunk that holds it), with the same generation in every cell, is read once for several
// policies and all their budgets (SharedContextCache; one row per cell from then on, every row
// decoded in one batch, each policy over its own rows), as many policies per read as keep the
// rows' copies of the contexts within `read_bytes`; any other unit runs cell by cell. Each record
// is what run_generations gives for its cell. run_sweep gives it about --batch-size rows (a row
// per unit and cell) a call.
std::vector<std::vector<Json>> run_generations_shared(const Benchmark& benchmark,
                                                      const std::vector<size_t>& units,
                                                      const std::vector<UnitContext>& cells,
                                                      int64_t read_bytes);

}  // namespace retain
