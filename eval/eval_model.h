// The model an evaluation command runs: the decoder (whole, or this rank's slice under --tp), its
// tokenizer, --gates and every gates= / scorer= file its policies name, loaded once per run.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/fs.h"
#include "dist/collectives.h"
#include "eval/policies/policy_registry.h"
#include "gates/gate_bank.h"
#include "model/decoder.h"
#include "model/tokenizers/tokenizer.h"

namespace retain {

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

}  // namespace retain
