// What every benchmark sweep shares: loading the model (with its tokenizer and optional gates)
// once, the list of (policy, budget) cells (`full` once, every other policy at every budget), a
// predictions.jsonl that is appended as results come and read back to resume, and the peak KV
// bytes of a cache.
#pragma once

#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "dist/collectives.h"
#include "eval/policies/policy_registry.h"
#include "gates/gate_bank.h"
#include "model/decoder.h"
#include "model/kv_cache.h"
#include "model/tokenizer.h"

namespace retain {

// Creates the run directory `out`, saves `config` (the resolved options; JSON is valid YAML) as
// out/config.yaml and prints it, so a run's log and its directory both say what it ran.
fs::path start_run_dir(const std::string& out, const Json& config);

struct ModelFlags {
  std::string model_dir;
  std::string device = "auto";
  std::string dtype = "auto";
  int threads = 0;  // 0: LibTorch's default
  // Sweeps (eval ...): batches run by this many threads at once on the CPU, the --threads split
  // between them.
  int workers = 1;
  // Relative "policy:gates=FILE" paths are resolved against this directory (default: the
  // working directory), so a sweep's recipe can name gate files by their place in a run.
  std::string gates_dir;
  // --tp N: the model's heads split over N ranks started by a launcher (retain launch, torchrun,
  // srun), WORLD_SIZE == N; rank 0 prints. 1: one process.
  int tensor_parallel = 1;
  int dist_timeout_s = 600;
};

struct EvalModel {
  std::unique_ptr<Decoder> model;
  std::shared_ptr<Collectives> world;  // --tp N: every rank (null for one process)
  // Whether this process reports (prints, writes results): rank 0 of a tensor-parallel run.
  bool leader() const { return !world || world->rank() == 0; }
  std::unique_ptr<Tokenizer> tokenizer;                           // null when not asked for
  std::unique_ptr<GateBank> gates;                                // null without --gates
  std::map<std::string, std::unique_ptr<GateBank>> policy_gates;  // "policy:gates=FILE" files
  // "locret:scorer=FILE" files, by the path as written.
  std::map<std::string, std::shared_ptr<const ScorerBank>> policy_scorers;

  // The gates a policy runs with: its own gates= file, else --gates (null when neither).
  const GateBank* gates_for(const PolicySpec& policy) const;
  // What a policy's cache reads: its gates (above) and its scorer= file (null when none).
  LearnedModules learned_for(const PolicySpec& policy) const;
};

// Where a policy's gates= or scorer= file is: a relative path is relative to --gates-dir.
fs::path learned_file(const ModelFlags& flags, const std::string& written);

// Loads the model, its tokenizer, --gates and every gates= file named in `policies`.
EvalModel load_eval_model(const ModelFlags& flags, const std::string& gates_file,
                          bool with_tokenizer = true,
                          const std::vector<std::string>& policies = {});
// The same for policies already parsed.
EvalModel load_eval_model(const ModelFlags& flags, const std::string& gates_file,
                          bool with_tokenizer, const std::vector<PolicySpec>& policies);

struct SweepCell {
  std::string policy;            // the spec as given
  std::optional<double> budget;  // none for full
  PolicySpec spec;               // `policy` parsed (once, by sweep_cells)
};

// The flags every sweep takes (each benchmark's options embed one; run_sweep reads it).
struct SweepSettings {
  ModelFlags model;
  std::vector<std::string> policies = {"full"};
  std::vector<double> budgets;
  std::string gates;
  int64_t chunk = 512;
  int64_t batch_size = 1;  // units of a cell generated at once
  std::string out;
  // The budgets of a policy read a unit's context once when they can (run_generations_shared).
  bool share_context = true;
  // How new tokens are drawn (greedy by default; eval math samples): every cell alike, each unit
  // with its request's seed.
  double temperature = 0.0;
  double top_p = 1.0;
  int64_t top_k = 0;
};

// A benchmark's defaults: every field's, with its own prefill chunk.
inline SweepSettings sweep_defaults(int64_t chunk) {
  SweepSettings s;
  s.chunk = chunk;
  return s;
}

// Checks every policy spec and that the budgeted ones have budgets; `benchmark` names errors.
std::vector<SweepCell> sweep_cells(const std::vector<std::string>& policies,
                                   const std::vector<double>& budgets,
                                   const std::string& benchmark);

// predictions.jsonl: records already present (from a killed run) are found by key and not redone.
class PredictionLog {
 public:
  // `key` maps a record to its identity (policy, budget and the example). A reader (writer =
  // false: the other ranks of a tensor-parallel run) only reads what is there: it neither repairs
  // the file nor appends.
  PredictionLog(const fs::path& path, std::function<std::string(const Json&)> key,
                bool writer = true);
  ~PredictionLog();
  PredictionLog(const PredictionLog&) = delete;
  PredictionLog& operator=(const PredictionLog&) = delete;
  const Json* find(const std::string& key) const;
  void append(const Json& record);
  size_t resumed() const { return done_.size(); }

 private:
  std::function<std::string(const Json&)> key_;
  std::map<std::string, Json> done_;
  std::string path_;
  int fd_ = -1;
};

// --protect-question: the index of the question's first token in the encoded `text` (with_bos:
// the prompt starts with BOS when the tokenizer adds one, as encode_prompt makes it; a rendered
// chat template has none): the token count of the text before the last occurrence of `question`,
// which must be a suffix boundary of `text`.
int64_t question_start(const Tokenizer& tokenizer, const std::string& text,
                       const std::string& question, bool with_bos);

// What generation stops at: the tokenizer's EOS (when it has one) and config.json's EOS ids, for
// every benchmark and `generate`.
std::vector<int64_t> stop_ids(const ModelConfig& config, const Tokenizer* tokenizer);

}  // namespace retain
