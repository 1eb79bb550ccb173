#include "eval/eval_model.h"

#include <ATen/Parallel.h>

#include <chrono>

#include "checkpoints/gate_file.h"
#include "checkpoints/scorer_file.h"
#include "core/device.h"
#include "core/error.h"
#include "core/log.h"
#include "dist/parallel_groups.h"

namespace retain {

const GateBank* EvalModel::gates_for(const PolicySpec& policy) const {
  if (!policy.gates().empty()) return policy_gates.at(policy.gates()).get();
  return gates.get();
}

LearnedModules EvalModel::learned_for(const PolicySpec& policy) const {
  const ScorerBank* scorer =
      policy.scorer().empty() ? nullptr : policy_scorers.at(policy.scorer()).get();
  return {gates_for(policy), scorer};
}

EvalModel load_eval_model(const ModelFlags& flags, const std::string& gates_file,
                          bool with_tokenizer, const std::vector<std::string>& policies) {
  std::vector<PolicySpec> specs;
  for (const auto& spec : policies) specs.push_back(parse_policy(spec));
  return load_eval_model(flags, gates_file, with_tokenizer, specs);
}

EvalModel load_eval_model(const ModelFlags& flags, const std::string& gates_file,
                          bool with_tokenizer, const std::vector<PolicySpec>& policies) {
  if (flags.threads > 0) at::set_num_threads(flags.threads);
  ModelConfig config = ModelConfig::load(flags.model_dir);
  c10::Device device = resolve_device(flags.device);
  LoadOptions load{resolve_dtype(flags.dtype, device, config.dtype), device};
  EvalModel m;
  if (flags.tensor_parallel > 1) {
    ParallelGroups groups = join_tensor_parallel(flags.tensor_parallel, device,
                                                 std::chrono::seconds(flags.dist_timeout_s));
    load.device = device;
    m.world = groups.world;
    load.tensor_parallel = groups.tp;
  }
  log_info("loading ", flags.model_dir, " (", config.model_type, ", ", config.num_layers,
           " layers) on ", device.str(), " in ", c10::toString(load.dtype),
           flags.tensor_parallel > 1 ? str_cat(", tensor parallel ", flags.tensor_parallel)
                                     : std::string());
  m.model = std::make_unique<Decoder>(Decoder::load(flags.model_dir, load));
  if (with_tokenizer) m.tokenizer = load_tokenizer(flags.model_dir);
  if (!gates_file.empty()) m.gates = load_gate_file(gates_file, m.model->config(), device);
  for (const PolicySpec& p : policies) {
    RETAIN_CHECK(flags.tensor_parallel == 1 || !p.needs_scorer(), "--policy ", p.text,
                 ": learned scorers read every head of a layer; run them with --tp 1");
    auto resolved = [&](const std::string& written) { return learned_file(flags, written); };
    if (!p.scorer().empty() && !m.policy_scorers.count(p.scorer()))
      m.policy_scorers[p.scorer()] =
          load_scorer_file(resolved(p.scorer()), m.model->config(), device, p.name());
    if (p.gates().empty() || m.policy_gates.count(p.gates())) continue;
    m.policy_gates[p.gates()] = load_gate_file(resolved(p.gates()), m.model->config(), device);
  }
  return m;
}

fs::path learned_file(const ModelFlags& flags, const std::string& written) {
  fs::path file = written;
  if (file.is_relative() && !flags.gates_dir.empty()) file = fs::path(flags.gates_dir) / file;
  return file;
}

}  // namespace retain
