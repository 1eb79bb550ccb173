// train.trainable: locret | kvzap. A learned eviction scorer (gates/scorer_bank.h) regressing each
// entry's future attention on the frozen model: the model runs once without grad (no teacher, no
// LM head) and the hook trains the scorer on each layer's queries and keys on the way. Its step
// directories hold a ready scorer file.
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cstdio>

#include "checkpoints/gate_file.h"
#include "checkpoints/scorer_file.h"
#include "core/error.h"
#include "gates/scorer_bank.h"
#include "gates/scorer_hook.h"
#include "trainer/trainable.h"

namespace retain {

namespace {

class ScorerTrainable : public Trainable {
 public:
  ScorerTrainable(const TrainSettings& s, const Decoder& model, std::string recipe_sha)
      : s_(s),
        model_(model),
        recipe_sha_(std::move(recipe_sha)),
        scorer_(s.scorer, ModelConfig::load(s.model_dir), model.device(), s.seed) {}

  const std::vector<std::pair<std::string, at::Tensor>>& named_parameters() const override {
    return scorer_.named_parameters();
  }
  std::string checkpoint_kind() const override { return "scorer"; }
  std::string description() const override {
    return str_cat(trainable_name(s_.trainable), " scorer");
  }

  BatchLoss forward(const MicroBatch& batch, int64_t targets, bool with_stats,
                    Collectives& comm) const override {
    (void)targets;     // the regression is normalised by its own count of labelled entries
    (void)with_stats;  // its loss is all the log shows
    ScorerTrainingHook hook(scorer_, batch.segments);
    {
      at::NoGradGuard no_grad;
      ForwardContext context{nullptr, &hook};
      context.multimodal = batch.multimodal;
      model_.forward_hidden(batch.ids, batch.positions, context);
    }
    // Mean over the labelled entries of every rank's micro-batch (as the capacity loss): rank-
    // local sums over the global count, so the summed gradients equal one process's on the whole
    // batch.
    auto count = at::full({1}, static_cast<double>(hook.count()), at::kDouble);
    comm.all_reduce_sum(count);
    BatchLoss out;
    out.base = hook.loss_sum() / std::max(count.item<double>(), 1.0);
    out.capacity = at::zeros({}, out.base.options());
    return out;
  }

  void write_artifacts(const fs::path& dir) const override {
    write_scorer_file(dir / "scorer.safetensors", scorer_,
                      {scorer_.config(), base_fingerprint(model_.config()), recipe_sha_});
  }

  void add_metrics(const StepStats& stats, Json& line) const override {
    (void)stats;
    line["scorer"] = trainable_name(s_.trainable);
  }

  std::string postfix(const StepStats& stats, double tokens_per_s) const override {
    char text[128];
    std::snprintf(text, sizeof(text), "%s loss=%.4f tok/s=%.0f", trainable_name(s_.trainable),
                  stats.loss, tokens_per_s);
    return text;
  }

 private:
  const TrainSettings& s_;
  const Decoder& model_;
  std::string recipe_sha_;
  ScorerBank scorer_;
};

}  // namespace

std::unique_ptr<Trainable> make_scorer_trainable(const TrainSettings& settings,
                                                 const Decoder& model,
                                                 const std::string& recipe_sha) {
  return std::make_unique<ScorerTrainable>(settings, model, recipe_sha);
}

}  // namespace retain
