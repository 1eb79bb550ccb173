#include "eval/sweep.h"

#include <ATen/Parallel.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "checkpoints/gate_file.h"
#include "checkpoints/scorer_file.h"
#include "core/device.h"
#include "core/error.h"
#include "core/fs.h"
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

std::vector<SweepCell> sweep_cells(const std::vector<std::string>& policies,
                                   const std::vector<double>& budgets,
                                   const std::string& benchmark) {
  RETAIN_CHECK(!policies.empty(), benchmark, ": --policy needs at least one policy");
  std::vector<SweepCell> cells;
  for (const auto& spec : policies) {
    PolicySpec p = parse_policy(spec);
    RETAIN_CHECK(!p.needs_scorer() || !p.scorer().empty(), benchmark, ": --policy ", spec,
                 " needs its learned scorer: ", p.name(), ":scorer=FILE (retain export of a ",
                 p.name(), " run)");
    if (!p.budgeted()) {
      cells.push_back({spec, std::nullopt, p});
      continue;
    }
    RETAIN_CHECK(!budgets.empty(), benchmark, ": --policy ", spec, " needs --budget");
    for (double b : budgets) cells.push_back({spec, b, p});
  }
  return cells;
}

PredictionLog::PredictionLog(const fs::path& path, std::function<std::string(const Json&)> key,
                             bool writer)
    : key_(std::move(key)) {
  if (fs::exists(path)) {
    std::string text = read_text_file(path);
    // Lines are written whole (one write each), so only a crash of the machine can leave a last
    // line without its newline: drop it, and redo that prediction.
    const size_t complete = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    if (!writer) text.resize(complete);
    if (complete < text.size()) {
      log_warn(path.string(), ": dropping an incomplete last line (", text.size() - complete,
               " bytes) left by an interrupted write");
      fs::resize_file(path, complete);
      text.resize(complete);
    }
    std::istringstream in(text);
    std::string line;
    for (int64_t n = 1; std::getline(in, line); ++n) {
      if (line.empty()) continue;
      Json j = parse_json(line, str_cat(path.string(), ":", n));
      done_[key_(j)] = j;
    }
    if (!done_.empty() && writer)
      log_info("resuming: ", done_.size(), " predictions already in ", path.string());
  }
  if (!writer) return;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  RETAIN_CHECK(fd_ >= 0, path.string(), ": cannot open for appending");
  path_ = path.string();
}

PredictionLog::~PredictionLog() {
  if (fd_ >= 0) ::close(fd_);
}

const Json* PredictionLog::find(const std::string& key) const {
  auto it = done_.find(key);
  return it == done_.end() ? nullptr : &it->second;
}

void PredictionLog::append(const Json& record) {
  // One write(2) per line: a process killed at any moment leaves whole lines only (a regular
  // file's write is not cut short by a signal), so a resumed run never meets a torn record.
  if (fd_ < 0) return;  // a reader
  const std::string line = record.dump() + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    RETAIN_CHECK(n > 0, path_, ": write failed (", std::strerror(errno), ")");
    done += static_cast<size_t>(n);
  }
}

fs::path start_run_dir(const std::string& out, const Json& config) {
  fs::path dir(out);
  fs::create_directories(dir);
  const std::string text = config.dump(2) + "\n";
  log_info("resolved config (", (dir / "config.yaml").string(), "):\n", text);
  write_text_file_atomic(dir / "config.yaml", text);
  return dir;
}

int64_t question_start(const Tokenizer& tokenizer, const std::string& text,
                       const std::string& question, bool with_bos) {
  size_t at = text.rfind(question);
  RETAIN_CHECK(at != std::string::npos, "the question is not in the prompt (internal)");
  const std::string before = text.substr(0, at);
  int64_t count = before.empty() ? 0 : static_cast<int64_t>(tokenizer.encode(before).size());
  if (with_bos) count += static_cast<int64_t>(tokenizer.prefix_ids().size());
  return count;
}

std::vector<int64_t> stop_ids(const ModelConfig& config, const Tokenizer* tokenizer) {
  std::vector<int64_t> ids = config.eos_token_ids;
  if (tokenizer != nullptr && tokenizer->eos_id() &&
      std::find(ids.begin(), ids.end(), *tokenizer->eos_id()) == ids.end())
    ids.push_back(*tokenizer->eos_id());
  return ids;
}

}  // namespace retain
