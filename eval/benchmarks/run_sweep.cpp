#include <c10/core/InferenceMode.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "core/dir_lock.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/progress.h"
#include "eval/benchmarks/benchmark.h"
#include "eval/cache_factory.h"
#include "eval/plot.h"
#include "eval/run_inputs.h"
#include "eval/scores.h"
#include "eval/shared_context_cache.h"

namespace retain {

std::unique_ptr<KvCache> UnitContext::make_cache(int64_t prompt_tokens) const {
  // --chunk 0 reads a prompt in one step: the cache is sized for it.
  return make_kv_cache(model.config(), policy, budget.value_or(0.0), prompt_tokens,
                       chunk > 0 ? chunk : prompt_tokens, eval_model.learned_for(policy));
}

SamplingOptions UnitContext::sampling(int64_t max_new_tokens) const {
  SamplingOptions s;
  s.max_new_tokens = max_new_tokens;
  s.prefill_chunk = chunk;
  s.temperature = temperature;
  s.top_p = top_p;
  s.top_k = top_k;
  s.stop_ids = stop_ids(model.config(), &tokenizer);
  return s;
}

Json generation_fields(const GenerationResult& r, const KvCache::RowBytes& bytes,
                       const BatchRates& batch) {
  return {
      {"prompt_tokens", r.prompt_tokens},
      {"peak_kv_bytes", bytes.peak},
      // The most entries one generating query read in a KV head, and in all of them.
      {"max_attended_entries", r.max_attended_entries},
      {"max_attended_total", r.max_attended_total},
      // After the last step: with buffer 0 an evicting cache is back at its budget.
      {"live_kv_bytes", bytes.live},
      {"budget_kv_bytes", bytes.budget},
      // The batch's rates (its rows were read and decoded together).
      {"batch_size", batch.size},
      {"prefill_tokens_per_s",
       r.prefill_seconds > 0 ? static_cast<double>(batch.prompt_tokens) / r.prefill_seconds : 0.0},
      {"decode_tokens_per_s", r.decode_seconds > 0 && batch.new_tokens > 0
                                  ? static_cast<double>(batch.new_tokens) / r.decode_seconds
                                  : 0.0}};
}

Json Benchmark::failed_record(size_t /*unit*/, const std::string& error) const {
  return {{"failed", true}, {"error", error}};
}

GenerationRequest Benchmark::request(size_t /*unit*/, const UnitContext& /*context*/) const {
  RETAIN_CHECK(false, "eval ", name(), ": a benchmark of single generations must say request()");
  return {};
}

Json Benchmark::record(size_t /*unit*/, const GenerationRequest& /*request*/,
                       const GenerationResult& /*result*/, Json /*fields*/,
                       const UnitContext& /*context*/) const {
  RETAIN_CHECK(false, "eval ", name(), ": a benchmark of single generations must say record()");
  return {};
}

Json Benchmark::run(size_t unit, const UnitContext& context) const {
  return run_generations(*this, {unit}, context).front();
}

namespace {

// The most tokens one forward of `requests` appends: --chunk, or with --chunk 0 (one step) the
// longest prompt.
int64_t largest_step(const std::vector<GenerationRequest>& requests, int64_t chunk) {
  if (chunk > 0) return chunk;
  size_t longest = 1;
  for (const auto& q : requests) longest = std::max(longest, q.prompt.size());
  return static_cast<int64_t>(longest);
}

// The tokens a row reads before generate_batch when several cells share the read: keep mode's
// context (compressed then), or in evict mode the first chunk generate_batch would read of the
// prompt but its last token (its chunks count back from that token, so the first holds the
// remainder). Either is one step in which no policy or budget has touched the hidden states yet:
// eviction first acts at its end. generate_batch then reads the rest in the chunks it has alone.
int64_t shared_read_tokens(const GenerationRequest& q, int64_t chunk) {
  if (q.context_tokens > 0) return q.context_tokens;
  const auto body = static_cast<int64_t>(q.prompt.size()) - 1;
  if (body <= 0 || chunk <= 0) return std::max<int64_t>(body, 0);
  return body % chunk == 0 ? chunk : body % chunk;
}

// One policy's rows of a batch: the cell context they are generated under (the policy and the
// sweep's settings) and each row's budget. With `copies` > 1, each run of `copies` consecutive
// rows is one unit at several budgets.
struct PolicyRows {
  const UnitContext* context = nullptr;
  std::vector<double> budgets;  // one per row
  int64_t copies = 1;
};

// Generates `requests` as one batch (all compress a context first, or none): the rows of
// parts[0], then those of parts[1], ...; each row's result with the whole prompt counted, and its
// record fields. With several parts or copies, the units' contexts are read once for all of them
// (SharedContextCache) and then decoded together, each part's rows under its own policy.
std::vector<std::pair<GenerationResult, Json>> generate_requests(
    const std::vector<GenerationRequest>& requests, const std::vector<PolicyRows>& parts) {
  const UnitContext& c = *parts.front().context;
  const int64_t step = largest_step(requests, c.chunk);
  std::vector<int64_t> protect;
  bool any_protected = false;
  std::vector<SharedContextCache::Part> caches;
  size_t begin = 0;
  for (const PolicyRows& part : parts) {
    RETAIN_CHECK(begin + part.budgets.size() <= requests.size(),
                 "generate_requests: ", requests.size(), " requests for more rows (internal)");
    std::vector<int64_t> budget_tokens, extra;
    for (size_t r = begin; r < begin + part.budgets.size(); ++r) {
      const GenerationRequest& q = requests[r];
      extra.push_back(q.budget_extra);
      budget_tokens.push_back(q.budget_tokens >= 0 ? q.budget_tokens
                                                   : static_cast<int64_t>(q.prompt.size()));
      protect.push_back(q.protect_from);
      any_protected = any_protected || q.protect_from >= 0;
    }
    const UnitContext& pc = *part.context;
    caches.push_back({make_batch_kv_cache(pc.model.config(), pc.policy, part.budgets, budget_tokens,
                                          step, pc.eval_model.learned_for(pc.policy), extra),
                      part.copies});
    begin += part.budgets.size();
  }
  RETAIN_CHECK(begin == requests.size(), "generate_requests: ", requests.size(), " requests for ",
               begin, " rows (internal)");
  std::unique_ptr<KvCache> cache;
  SharedContextCache* shared = nullptr;
  if (caches.size() == 1 && caches.front().copies == 1) {
    cache = std::move(caches.front().cache);
  } else {
    auto wrapper = std::make_unique<SharedContextCache>(std::move(caches));
    shared = wrapper.get();
    cache = std::move(wrapper);
  }
  if (any_protected) cache->protect_from(protect);
  const bool keep = requests.front().context_tokens > 0;
  int64_t cells_per_read = 0;
  for (const PolicyRows& part : parts) cells_per_read += part.copies;
  // Rows read a first step before generate_batch: keep mode's context, or the shared first chunk
  // of an evict-mode prompt.
  const bool read_first = keep || shared != nullptr;
  std::vector<std::vector<int64_t>> prompts, contexts;
  std::vector<RowOptions> rows;
  const auto first_copies = static_cast<size_t>(parts.front().copies);
  for (size_t r = 0; r < requests.size(); ++r) {
    const GenerationRequest& q = requests[r];
    RowOptions row;
    row.max_new_tokens = q.max_new_tokens;
    row.extra_stop_ids = q.extra_stop_ids;
    row.multimodal = q.multimodal;
    row.seed = q.seed;
    const int64_t first = read_first ? shared_read_tokens(q, c.chunk) : 0;
    RETAIN_CHECK(!read_first || first > 0,
                 "generate_requests: a shared read of no token (internal)");
    const auto split = q.prompt.begin() + first;
    // The contexts read: one per unit, from the first part's rows (every part holds every unit).
    if (r < parts.front().budgets.size() && r % first_copies == 0)
      contexts.emplace_back(q.prompt.begin(), split);
    prompts.emplace_back(split, q.prompt.end());
    row.start_position = first;
    rows.push_back(std::move(row));
  }
  if (keep) {
    // kvpress's semantics: the context alone is read and compressed once; the question and the
    // answer go on top of it. A context longer than --chunk is read in chunks, and a budgeted
    // cache evicts after each: say so once, as kvpress reads it whole.
    static std::atomic<bool> warned{false};
    for (const GenerationRequest& q : requests)
      if (c.chunk > 0 && q.context_tokens > c.chunk && c.policy.budgeted() &&
          !warned.exchange(true))
        log_warn("--question-mode keep: a context of ", q.context_tokens,
                 " tokens is longer than "
                 "--chunk ",
                 c.chunk,
                 ", so it is compressed after each chunk; kvpress reads the "
                 "whole context before compressing it (--chunk 0 reads each context in one step)");
  }
  if (read_first) {
    prefill_batch(c.model, contexts, *cache, std::vector<int64_t>(contexts.size(), 0), c.chunk);
    RETAIN_CHECK(shared == nullptr || !shared->sharing(),
                 "a context shared by several cells took more than one step (internal)");
    if (keep) cache->compress_context();
  }
  // Every row decodes in one batch, each part over its own rows (SharedContextCache routes them):
  // the sampling settings are the sweep's, the same for every policy.
  std::vector<GenerationResult> results =
      generate_batch(c.model, prompts, *cache, c.sampling(0), rows);
  const std::vector<KvCache::RowBytes> bytes = cache->row_bytes();
  BatchRates batch;
  batch.size = static_cast<int64_t>(results.size());
  for (size_t r = 0; r < results.size(); ++r) {
    batch.prompt_tokens += static_cast<int64_t>(prompts[r].size());
    batch.new_tokens += std::max<int64_t>(static_cast<int64_t>(results[r].tokens.size()) - 1, 0);
    results[r].prompt_tokens = static_cast<int64_t>(requests[r].prompt.size());
  }
  std::vector<std::pair<GenerationResult, Json>> out;
  for (size_t r = 0; r < results.size(); ++r) {
    Json fields = generation_fields(results[r], bytes.at(r), batch);
    // The cells (policy, budget) whose rows read this unit's context together (1: its own).
    if (read_first) fields["context_read_by"] = cells_per_read;
    out.emplace_back(std::move(results[r]), std::move(fields));
  }
  return out;
}

GenerationRequest checked_request(const Benchmark& benchmark, size_t unit, const UnitContext& c) {
  GenerationRequest q = benchmark.request(unit, c);
  RETAIN_CHECK(!q.prompt.empty(), "eval ", benchmark.name(), ": unit ", unit, " has no prompt");
  RETAIN_CHECK(q.context_tokens < static_cast<int64_t>(q.prompt.size()), "eval ", benchmark.name(),
               ": unit ", unit, "'s context is its whole prompt");
  RETAIN_CHECK(!q.multimodal || (q.context_tokens == 0 && q.multimodal->ids == q.prompt), "eval ",
               benchmark.name(), ": unit ", unit,
               "'s images need its prompt to be the multimodal prompt's ids, read whole");
  return q;
}

// Whether every cell of a unit can share its first read: keep mode's context in one step
// (kvpress's semantics) or evict mode's first chunk, and the same generation whatever the cell.
bool shares_context(const std::vector<GenerationRequest>& per_budget, int64_t chunk) {
  const GenerationRequest& q = per_budget.front();
  if ((chunk > 0 && q.context_tokens > chunk) || q.multimodal || shared_read_tokens(q, chunk) <= 0)
    return false;
  for (const auto& other : per_budget)
    if (other.prompt != q.prompt || other.context_tokens != q.context_tokens ||
        other.budget_tokens != q.budget_tokens || other.budget_extra != q.budget_extra ||
        other.protect_from != q.protect_from || other.max_new_tokens != q.max_new_tokens ||
        other.extra_stop_ids != q.extra_stop_ids || other.multimodal || other.seed != q.seed)
      return false;
  return true;
}

// Whether `unit` is read once for all of `cells` (run_generations_shared's test).
bool unit_shares_context(const Benchmark& benchmark, size_t unit,
                         const std::vector<UnitContext>& cells) {
  std::vector<GenerationRequest> per_cell;
  try {
    for (const auto& c : cells) per_cell.push_back(checked_request(benchmark, unit, c));
  } catch (const Error&) {
    if (!benchmark.records_failures()) throw;
    return false;  // it fails in every cell, on its own
  }
  return cells.size() > 1 && shares_context(per_cell, cells.front().chunk);
}

}  // namespace

std::vector<Json> run_generations(const Benchmark& benchmark, const std::vector<size_t>& units,
                                  const UnitContext& c) {
  std::vector<GenerationRequest> requests;
  std::vector<Json> records(units.size());
  std::vector<bool> failed(units.size(), false);
  for (size_t k = 0; k < units.size(); ++k) {
    try {
      requests.push_back(checked_request(benchmark, units[k], c));
    } catch (const Error& e) {
      if (!benchmark.records_failures()) throw;
      log_warn("eval ", benchmark.name(), ": ", benchmark.unit_key(units[k]).substr(0, 80),
               " failed: ", e.what());
      records[k] = benchmark.failed_record(units[k], e.what());
      failed[k] = true;
      requests.emplace_back();
    }
  }
  // Rows that compress a context first and rows that do not are generated as two batches.
  for (const bool keep : {false, true}) {
    std::vector<size_t> part;
    std::vector<GenerationRequest> part_requests;
    for (size_t k = 0; k < units.size(); ++k)
      if (!failed[k] && (requests[k].context_tokens > 0) == keep) {
        part.push_back(k);
        part_requests.push_back(requests[k]);
      }
    if (part.empty()) continue;
    auto generated = generate_requests(
        part_requests, {{&c, std::vector<double>(part.size(), c.budget.value_or(0.0)), 1}});
    for (size_t j = 0; j < part.size(); ++j)
      records[part[j]] = benchmark.record(units[part[j]], part_requests[j], generated[j].first,
                                          std::move(generated[j].second), c);
  }
  return records;
}

std::vector<std::vector<Json>> run_generations_shared(const Benchmark& benchmark,
                                                      const std::vector<size_t>& units,
                                                      const std::vector<UnitContext>& cells,
                                                      int64_t read_bytes) {
  std::vector<std::vector<Json>> records(cells.size(), std::vector<Json>(units.size()));
  std::vector<size_t> shared, alone;  // positions in `units`
  std::vector<std::vector<GenerationRequest>> shared_requests;
  for (size_t u = 0; u < units.size(); ++u) {
    std::vector<GenerationRequest> per_cell;
    try {
      for (const auto& c : cells) per_cell.push_back(checked_request(benchmark, units[u], c));
    } catch (const Error& e) {
      if (!benchmark.records_failures()) throw;
      // run_generations below records it in every cell.
      alone.push_back(u);
      continue;
    }
    if (cells.size() > 1 && shares_context(per_cell, cells.front().chunk)) {
      shared.push_back(u);
      shared_requests.push_back(std::move(per_cell));
    } else {
      alone.push_back(u);
    }
  }
  if (!shared.empty()) {
    // The policies: runs of consecutive cells with one policy spec (its budgets).
    std::vector<std::pair<size_t, size_t>> policies;  // [first, end) in `cells`
    for (size_t k = 0; k < cells.size(); ++k) {
      if (k == 0 || cells[k].policy.text != cells[k - 1].policy.text) policies.push_back({k, k});
      ++policies.back().second;
    }
    // What one row holds of the units' contexts while they are read: every row is a full copy
    // until the read ends.
    const ModelConfig& config = cells.front().model.config();
    const int64_t token_bytes = 2 * config.num_layers * config.num_kv_heads * config.head_dim *
                                static_cast<int64_t>(c10::elementSize(cells.front().model.dtype()));
    int64_t context_bytes = 0;
    for (const auto& per_cell : shared_requests)
      context_bytes += shared_read_tokens(per_cell.front(), cells.front().chunk) * token_bytes;
    // One read per group of whole policies whose rows' copies fit `read_bytes` (a policy alone
    // always reads, as its budgets need one read between them).
    for (size_t p = 0; p < policies.size();) {
      size_t q = p;
      int64_t held = 0;
      for (; q < policies.size(); ++q) {
        const auto budgets = static_cast<int64_t>(policies[q].second - policies[q].first);
        if (q > p && held + budgets * context_bytes > read_bytes) break;
        held += budgets * context_bytes;
      }
      // Rows part-major (one part per policy), then unit-major: one per (unit, budget).
      std::vector<GenerationRequest> rows;
      std::vector<PolicyRows> parts;
      for (size_t i = p; i < q; ++i) {
        const auto [first, end] = policies[i];
        PolicyRows part{&cells[first], {}, static_cast<int64_t>(end - first)};
        for (const auto& per_cell : shared_requests)
          for (size_t k = first; k < end; ++k) {
            rows.push_back(per_cell[k]);
            part.budgets.push_back(cells[k].budget.value_or(0.0));
          }
        parts.push_back(std::move(part));
      }
      auto generated = generate_requests(rows, parts);
      size_t row = 0;
      for (size_t i = p; i < q; ++i)
        for (size_t j = 0; j < shared.size(); ++j)
          for (size_t k = policies[i].first; k < policies[i].second; ++k) {
            auto& [result, fields] = generated.at(row++);
            records[k][shared[j]] = benchmark.record(units[shared[j]], shared_requests[j][k],
                                                     result, std::move(fields), cells[k]);
          }
      p = q;
    }
  }
  if (!alone.empty()) {
    std::vector<size_t> alone_units;
    for (size_t u : alone) alone_units.push_back(units[u]);
    for (size_t k = 0; k < cells.size(); ++k) {
      auto done = run_generations(benchmark, alone_units, cells[k]);
      for (size_t j = 0; j < alone.size(); ++j) records[k][alone[j]] = std::move(done[j]);
    }
  }
  return records;
}

namespace {

Json budget_json(const std::optional<double>& budget) {
  return budget ? Json(*budget) : Json(nullptr);
}

// The resume key of a (policy, budget, unit): the same strings the sweeps have always written.
std::string cell_key(const std::string& policy, const Json& budget, const std::string& unit) {
  return str_cat(policy, "|", budget.dump(), "|", unit);
}

// The files a sweep's answers depend on: the model directory, the data and --gates for every
// cell; a policy's own gates= and scorer= files (relative to --gates-dir) for its cells.
Json inputs_of(const Json& config, const SweepSettings& s, const std::vector<SweepCell>& cells) {
  std::vector<fs::path> shared = {s.model.model_dir};
  if (config.contains("data") && config.at("data").is_string())
    shared.push_back(config.at("data").get<std::string>());
  if (!s.gates.empty()) shared.push_back(s.gates);
  std::map<std::string, std::vector<fs::path>> own;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i > 0 && cells[i].policy == cells[i - 1].policy) continue;  // the policy's other budgets
    for (const std::string& file : {cells[i].spec.gates(), cells[i].spec.scorer()})
      if (!file.empty()) own[cells[i].policy].push_back(learned_file(s.model, file));
  }
  return sweep_inputs(config, shared, own);
}

// --write-prompts: one line per unit, its request under `c` (the first cell: a single generation's
// prompt is the same in every cell) with the ids generation stops at, written whole or not at all.
void write_prompts(const fs::path& path, const Benchmark& benchmark, const UnitContext& c) {
  RETAIN_CHECK(benchmark.single_generation(), "eval ", benchmark.name(),
               ": --write-prompts needs one generation per unit (a unit here is several dependent "
               "generations)");
  const std::vector<int64_t> stops = stop_ids(c.model.config(), &c.tokenizer);
  std::string lines;
  for (size_t i = 0; i < benchmark.units(); ++i) {
    const GenerationRequest q = checked_request(benchmark, i, c);
    RETAIN_CHECK(!q.multimodal, "eval ", benchmark.name(), ": --write-prompts: unit ",
                 benchmark.unit_key(i),
                 " has images, which token ids alone do not give a peer (text prompts only)");
    std::vector<int64_t> stop = stops;
    stop.insert(stop.end(), q.extra_stop_ids.begin(), q.extra_stop_ids.end());
    const Json line = {{"unit", benchmark.unit_key(i)},      {"prompt_ids", q.prompt},
                       {"context_tokens", q.context_tokens}, {"budget_tokens", q.budget_tokens},
                       {"max_new_tokens", q.max_new_tokens}, {"stop_ids", stop}};
    lines += line.dump() + "\n";
  }
  write_text_file_atomic(path, lines);
  log_info("wrote ", path.string(), " (", benchmark.units(), " prompts)");
}

// Whether each unit of a cell was answered right, in unit order (nullopt: the benchmark does not
// pair its units).
std::optional<std::vector<bool>> unit_outcomes(const Benchmark& benchmark,
                                               const std::vector<Json>& records) {
  std::vector<bool> right;
  for (const auto& record : records) {
    const std::optional<bool> correct = benchmark.unit_correct(record);
    if (!correct) return std::nullopt;
    right.push_back(*correct);
  }
  return right;
}

// Each unit's share-valued score where the benchmark has one (empty otherwise).
std::vector<ScoredUnit> scored_units(const Benchmark& benchmark, const std::vector<Json>& records) {
  std::vector<ScoredUnit> units;
  for (const auto& record : records)
    if (auto unit = benchmark.unit_score(record)) units.push_back(std::move(*unit));
  return units;
}

}  // namespace

int run_sweep(Benchmark& benchmark, const SweepSettings& s) {
  const std::string command = "eval " + benchmark.name();
  RETAIN_CHECK(!s.out.empty(), command, ": --out is required");
  ensure_writable_dir(s.out, command + ": --out");
  const auto cells = sweep_cells(s.policies, s.budgets, command);
  benchmark.load_data();
  // Each policy once, parsed once (by sweep_cells).
  std::vector<PolicySpec> specs;
  for (size_t i = 0; i < cells.size(); ++i)
    if (i == 0 || cells[i].policy != cells[i - 1].policy) specs.push_back(cells[i].spec);
  EvalModel m = load_eval_model(s.model, s.gates, /*with_tokenizer=*/true, specs);
  benchmark.prepare(m);

  Json config = benchmark.config();
  config["benchmark"] = benchmark.name();
  config["model"] = s.model.model_dir;
  config["policies"] = s.policies;
  config["budgets"] = s.budgets;
  config["gates"] = s.gates;
  config["chunk"] = s.chunk;
  config["batch_size"] = s.batch_size;
  config["workers"] = s.model.workers;
  // --tp: every rank runs the same cells in step (the model's layers need the whole group); rank
  // 0 writes. The others read the resume state once rank 0 has settled it (a torn last line
  // dropped), so all skip the same finished units.
  const bool leader = m.leader();
  // Held to the end: a second sweep into the same --out refuses rather than interleave records.
  std::optional<DirLock> lock;
  if (leader) lock.emplace(s.out, command + ": --out");
  const fs::path out = leader ? start_run_dir(s.out, config) : fs::path(s.out);
  if (leader)
    check_and_record_sweep_inputs(out, inputs_of(config, s, cells), !benchmark.settings_in_keys());
  // Resume: every line already written is a finished (policy, budget, unit).
  auto key = [&](const Json& j) {
    return cell_key(j.at("policy").get<std::string>(), j.at("budget"), benchmark.record_key(j));
  };
  std::optional<PredictionLog> leader_log;
  if (leader) leader_log.emplace(out / "predictions.jsonl", key);
  if (m.world) m.world->barrier();
  std::optional<PredictionLog> reader_log;
  if (!leader) reader_log.emplace(out / "predictions.jsonl", key, /*writer=*/false);
  PredictionLog& log = leader ? *leader_log : *reader_log;
  if (leader && s.write_prompts)
    write_prompts(out / "prompts.jsonl", benchmark,
                  {*m.model, *m.tokenizer, m, cells.front().spec, cells.front().budget, s.chunk,
                   s.temperature, s.top_p, s.top_k});

  const size_t units = benchmark.units();
  std::optional<ProgressBar> bar;
  if (leader)
    bar.emplace(benchmark.name(), static_cast<int64_t>(units * cells.size()),
                benchmark.unit_name());
  c10::InferenceMode guard;
  RETAIN_CHECK(s.batch_size >= 1, command, ": --batch-size must be >= 1, found ", s.batch_size);
  RETAIN_CHECK(s.batch_size == 1 || benchmark.single_generation(), command,
               ": --batch-size must be 1: a unit is several dependent generations");
  const int workers = s.model.workers;
  RETAIN_CHECK(workers >= 1, command, ": --workers must be >= 1, found ", workers);
  RETAIN_CHECK(workers == 1 || (m.model->device().is_cpu() && !m.world), command,
               ": --workers splits the CPU's cores between batches; on a GPU or with --tp use "
               "--batch-size");
  // With --question-mode keep, every cell runs as one group: a unit whose context can be read once
  // for all of them (run_generations_shared) is, a --shared-context-gib at a time.
  const bool share = s.share_context && benchmark.single_generation();
  RETAIN_CHECK(s.shared_context_gib > 0, command, ": --shared-context-gib must be > 0, found ",
               s.shared_context_gib);
  const auto read_bytes = static_cast<int64_t>(s.shared_context_gib * (int64_t{1} << 30));
  struct Group {
    size_t first = 0, n = 0;  // cells [first, first + n)
    std::vector<UnitContext> contexts;
    std::vector<Json> budgets;
    std::vector<std::vector<std::optional<Json>>> records;  // [cell][unit]
  };
  std::vector<std::unique_ptr<Group>> groups;  // stable addresses: contexts point into them
  // One batch of work: consecutive pending units (some cell of the group lacks them) of a group,
  // under every cell of the group or under one.
  struct Work {
    Group* group = nullptr;
    std::vector<size_t> units;
    std::optional<size_t> cell;  // the group's cell, or none: all of them
  };
  std::vector<Work> work;
  for (size_t first = 0; first < cells.size();) {
    const size_t last = share ? cells.size() : first + 1;
    auto g = std::make_unique<Group>();
    g->first = first;
    g->n = last - first;
    g->records.assign(g->n, std::vector<std::optional<Json>>(units));
    for (size_t k = 0; k < g->n; ++k) {
      const SweepCell& cell = cells[first + k];
      g->contexts.push_back({*m.model, *m.tokenizer, m, cell.spec, cell.budget, s.chunk,
                             s.temperature, s.top_p, s.top_k});
      g->budgets.push_back(budget_json(cell.budget));
      int64_t finished = 0;
      for (size_t i = 0; i < units; ++i)
        if (const Json* previous =
                log.find(cell_key(cell.policy, g->budgets[k], benchmark.unit_key(i)))) {
          g->records[k][i] = *previous;
          ++finished;
        }
      if (bar) bar->skip(finished);
    }
    std::vector<size_t> pending;
    for (size_t i = 0; i < units; ++i)
      for (size_t k = 0; k < g->n; ++k)
        if (!g->records[k][i]) {
          pending.push_back(i);
          break;
        }
    // Units read once for the group's cells go as batches of about --batch-size rows (a row per
    // cell); the others cell by cell in batches of --batch-size units, as without sharing.
    std::vector<size_t> shared_units, alone_units;
    for (size_t i : pending)
      (g->n > 1 && unit_shares_context(benchmark, i, g->contexts) ? shared_units : alone_units)
          .push_back(i);
    const auto batches = [&](const std::vector<size_t>& list, size_t size,
                             std::optional<size_t> cell) {
      for (size_t begin = 0; begin < list.size(); begin += size)
        work.push_back({g.get(),
                        std::vector<size_t>(list.begin() + begin,
                                            list.begin() + std::min(list.size(), begin + size)),
                        cell});
    };
    const auto batch = static_cast<size_t>(s.batch_size);
    batches(shared_units, std::max<size_t>(1, batch / g->n), std::nullopt);
    if (g->n == 1) {
      batches(alone_units, batch, std::nullopt);
    } else {
      for (size_t k = 0; k < g->n; ++k) {
        std::vector<size_t> lacking;  // a resumed sweep redoes no finished cell
        for (size_t i : alone_units)
          if (!g->records[k][i]) lacking.push_back(i);
        batches(lacking, batch, k);
      }
    }
    groups.push_back(std::move(g));
    first = last;
  }

  // What this run generated (resumed records aside), and how long generation took: the model
  // load and set-up are not in it.
  int64_t generated = 0;
  std::mutex done_mutex;  // the log, the records, the bar and the count, with --workers
  auto run_batch = [&](const Work& w) {
    Group& g = *w.group;
    const std::vector<size_t>& batch = w.units;
    // The cells some unit of the batch lacks: a resumed or widened sweep redoes no finished cell.
    std::vector<size_t> todo;
    std::vector<UnitContext> contexts;
    for (size_t k = w.cell.value_or(0); k < (w.cell ? *w.cell + 1 : g.n); ++k)
      for (size_t unit : batch)
        if (!g.records[k][unit]) {
          todo.push_back(k);
          contexts.push_back(g.contexts[k]);
          break;
        }
    std::vector<std::vector<Json>> done;  // [todo][unit of the batch]
    if (todo.size() > 1)
      done = run_generations_shared(benchmark, batch, contexts, read_bytes);
    else if (benchmark.single_generation())
      done.push_back(run_generations(benchmark, batch, contexts.front()));
    else
      done.push_back({benchmark.run(batch.front(), contexts.front())});
    std::lock_guard<std::mutex> lock(done_mutex);
    int64_t appended = 0;
    for (size_t t = 0; t < todo.size(); ++t)
      for (size_t j = 0; j < batch.size(); ++j) {
        const size_t k = todo[t];
        if (g.records[k][batch[j]]) continue;  // resumed: the record written before stands
        done[t][j]["policy"] = cells[g.first + k].policy;
        done[t][j]["budget"] = g.budgets[k];
        log.append(done[t][j]);
        g.records[k][batch[j]] = std::move(done[t][j]);
        ++appended;
      }
    generated += appended;
    if (bar) bar->update(appended);
  };
  const auto started = std::chrono::steady_clock::now();
  if (workers == 1) {
    for (const Work& w : work) run_batch(w);
  } else {
    // Batches shared out to workers, each with its share of the threads: a tiny model's products
    // keep one core busy better than they split over two (the demo's sweep: 16.3 answers/s on one
    // thread, 26.6 on two).
    const int all_threads = at::get_num_threads();
    const int threads = std::max(1, all_threads / workers);
    std::atomic<size_t> next{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::vector<std::thread> pool;
    for (int w = 0; w < workers; ++w)
      pool.emplace_back([&] {
        c10::InferenceMode worker_guard;
        at::set_num_threads(threads);
        try {
          for (size_t i = next++; i < work.size() && !failed; i = next++) run_batch(work[i]);
        } catch (...) {
          std::lock_guard<std::mutex> lock(done_mutex);
          if (!error) error = std::current_exception();
          failed = true;
        }
      });
    for (auto& t : pool) t.join();
    at::set_num_threads(all_threads);  // the workers' setting is process-wide in part
    if (error) std::rethrow_exception(error);
  }
  const double generation_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  std::vector<ScoreRow> rows;
  std::vector<std::optional<std::vector<bool>>> outcomes;  // per row: unit_correct of each unit
  std::vector<std::vector<ScoredUnit>> shares;             // per row: unit_score of each unit
  for (auto& g : groups)
    for (size_t k = 0; k < g->n; ++k) {
      std::vector<Json> cell_records;
      for (auto& r : g->records[k]) cell_records.push_back(std::move(*r));
      outcomes.push_back(unit_outcomes(benchmark, cell_records));
      shares.push_back(scored_units(benchmark, cell_records));
      rows.push_back(score_row(cells[g->first + k].policy, cells[g->first + k].budget,
                               benchmark.aggregate(cell_records)));
    }
  if (m.world) m.world->shutdown();  // rank 0 hosts the store: it waits for the others
  if (!leader) return 0;
  add_differences_to_full(rows, outcomes, benchmark.plot().panels.front().metric);
  add_bootstrap_intervals(rows, shares, benchmark.bootstrap_metrics());
  bar->finish();
  const double rate =
      generation_seconds > 0 ? static_cast<double>(generated) / generation_seconds : 0.0;
  write_scores(out, benchmark.name(), rows,
               {{"generated", generated},
                {"generation_seconds", generation_seconds},
                {"generated_per_s", rate},
                {"batch_size", s.batch_size},
                {"workers", workers}});
  write_score_plots(out, rows, benchmark.plot());
  print_score_table(rows, benchmark.table_columns());
  log_info("generated ", generated, " ", benchmark.unit_name(), " in ", generation_seconds, " s (",
           rate, " per s, batch size ", s.batch_size, ", ", workers,
           workers == 1 ? " worker" : " workers", ", model load and set-up aside)");
  log_info("wrote ", (out / "scores.json").string());
  return 0;
}

}  // namespace retain
