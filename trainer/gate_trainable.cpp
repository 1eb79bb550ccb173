// train.trainable: gates. Retention gates on the frozen model (TrimKV, DBTrimKV): the language-
// model loss of the gated student against the teacher, plus the capacity loss of the gates' log
// beta (loss.capacity local | global, weight loss.capacity_weight); its step directories hold a
// ready gate file.
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cstdio>

#include "checkpoints/gate_file.h"
#include "core/error.h"
#include "gates/losses.h"
#include "kernels/retention_attention.h"
#include "trainer/language_model_loss.h"
#include "trainer/trainable.h"

namespace retain {

namespace {

class GateTrainable : public Trainable {
 public:
  GateTrainable(const TrainSettings& s, const Decoder& model, std::string recipe_sha)
      : s_(s), model_(model), recipe_sha_(std::move(recipe_sha)) {
    for (const auto& [name, p] : model.named_parameters())
      RETAIN_CHECK(!p.requires_grad(), "internal: base parameter ", name, " is not frozen");
    if (!s.init_from.empty()) {
      GateFileInfo info;
      gates_ = load_gate_file(s.init_from, ModelConfig::load(s.model_dir), model.device(), &info);
      RETAIN_CHECK(info.config.arch == s.gates.arch && info.config.width == s.gates.width &&
                       info.config.tie_projection == s.gates.tie_projection,
                   s.init_from, ": its gate config (", info.config.to_json().dump(),
                   ") differs from the recipe's (", s.gates.to_json().dump(), ")");
      for (auto& p : gates_->parameters()) p.requires_grad_(true);
    } else {
      gates_ = std::make_unique<GateBank>(s.gates, model.config(), model.device(), s.seed);
    }
  }

  const std::vector<std::pair<std::string, at::Tensor>>& named_parameters() const override {
    return gates_->named_parameters();
  }
  std::string checkpoint_kind() const override { return "gates"; }
  std::string description() const override { return "gates only"; }

  BatchLoss forward(const MicroBatch& batch, int64_t targets, bool with_stats,
                    Collectives& comm) const override {
    LanguageModelLoss lm =
        language_model_loss(model_, gates_.get(), batch, targets, with_stats, s_, phase_mark());
    BatchLoss out = std::move(lm.loss);
    const auto& log_betas = lm.student->log_betas();
    // Mean over the positive entries of every rank's micro-batch: rank-local sums over the global
    // count, so the summed gradients equal a single process's on the whole batch.
    CapacitySums cap =
        capacity_sums(log_betas, batch.positions, batch.segments, s_.memory, s_.capacity);
    auto positive = at::full({1}, static_cast<double>(cap.positive), at::kDouble);
    comm.all_reduce_sum(positive);
    out.capacity = cap.sum / std::max(positive.item<double>(), 1.0);
    mark_phase("losses");
    if (with_stats) {
      at::NoGradGuard no_grad;
      auto valid = (batch.segments >= 0).unsqueeze(1).to(at::kFloat);  // (B, 1, T)
      double beta = 0, live = 0;
      for (const auto& lb : log_betas) {
        beta += (lb.detach().exp() * valid).sum().item<double>() /
                (valid.sum().item<double>() * lb.size(1));
        // Expected live entries per head at the last token of each row's longest document.
        auto S = retention_sum(lb.detach(), batch.positions, batch.segments);
        live += S.amax(-1).mean().item<double>();
      }
      out.mean_beta = beta / static_cast<double>(log_betas.size());
      out.live = live / static_cast<double>(log_betas.size());
    }
    return out;
  }

  void write_artifacts(const fs::path& dir) const override {
    GateFileInfo info{gates_->config(), base_fingerprint(model_.config()), s_.memory,
                      s_.capacity == CapacityMode::kLocal ? "local" : "global", recipe_sha_};
    write_gate_file(dir / "gates.safetensors", *gates_, info);
  }

  void add_metrics(const StepStats& stats, Json& line) const override {
    if (s_.terms.fwkl) line["kl"] = stats.kl;
    if (s_.terms.ntp) line["ntp"] = stats.ntp;
    line["capacity"] = stats.capacity;
    line["mean_beta"] = stats.mean_beta;
    line["live_per_head"] = stats.live;
    line["memory"] = s_.memory;
  }

  std::string postfix(const StepStats& stats, double tokens_per_s) const override {
    char text[256];
    std::snprintf(text, sizeof(text),
                  "loss=%.4f kl=%.4f ntp=%.4f cap=%.4f beta=%.4f live=%.0f/%.0f tok/s=%.0f",
                  stats.loss, stats.kl, stats.ntp, stats.capacity, stats.mean_beta, stats.live,
                  s_.memory, tokens_per_s);
    return text;
  }

 private:
  const TrainSettings& s_;
  const Decoder& model_;
  std::string recipe_sha_;
  std::unique_ptr<GateBank> gates_;
};

}  // namespace

std::unique_ptr<Trainable> make_gate_trainable(const TrainSettings& settings, const Decoder& model,
                                               const std::string& recipe_sha) {
  return std::make_unique<GateTrainable>(settings, model, recipe_sha);
}

}  // namespace retain
