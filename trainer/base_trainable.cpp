// train.trainable: base. Every parameter of a small model with the next-token loss (loss.base is
// ntp only): how tests and recipes pretrain a base from nothing; export-checkpoint turns a step
// directory into an HF model directory.
#include <cstdio>

#include "trainer/language_model_loss.h"
#include "trainer/trainable.h"

namespace retain {

namespace {

class BaseTrainable : public Trainable {
 public:
  BaseTrainable(const TrainSettings& s, Decoder& model) : s_(s), model_(model) {
    // Separates fused projections (their gradients would not reach the named weights).
    model.set_trainable(true);
  }

  const std::vector<std::pair<std::string, at::Tensor>>& named_parameters() const override {
    return model_.named_parameters();
  }
  std::string checkpoint_kind() const override { return "base"; }
  std::string description() const override { return "the whole model"; }

  BatchLoss forward(const MicroBatch& batch, int64_t targets, bool with_stats,
                    Collectives& comm) const override {
    (void)comm;  // nothing normalised over the ranks beyond the targets
    BatchLoss out =
        language_model_loss(model_, nullptr, batch, targets, with_stats, s_, phase_mark()).loss;
    mark_phase("losses");
    return out;
  }

  void add_metrics(const StepStats& stats, Json& line) const override {
    if (s_.terms.ntp) line["ntp"] = stats.ntp;
  }

  std::string postfix(const StepStats& stats, double tokens_per_s) const override {
    char text[128];
    std::snprintf(text, sizeof(text), "loss=%.4f ntp=%.4f tok/s=%.0f", stats.loss, stats.ntp,
                  tokens_per_s);
    return text;
  }

 private:
  const TrainSettings& s_;
  Decoder& model_;
};

}  // namespace

std::unique_ptr<Trainable> make_base_trainable(const TrainSettings& settings, Decoder& model) {
  return std::make_unique<BaseTrainable>(settings, model);
}

}  // namespace retain
