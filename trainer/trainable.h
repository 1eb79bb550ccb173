// What `retain train` optimizes (train.trainable): retention gates on the frozen model, the base
// model itself (pretraining a small one), or a learned eviction scorer (locret, kvzap). Each is one
// Trainable that owns its parameters, computes its loss of a micro-batch, names its checkpoints,
// writes the file a user runs and says what the log shows; the Trainer's loop (trainer.h) knows
// none of them by name.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/fs.h"
#include "core/json.h"
#include "dist/collectives.h"
#include "model/decoder.h"
#include "model/forward_context.h"
#include "trainer/train_settings.h"

namespace retain {

// What one optimizer step measured, over the whole global batch.
struct StepStats {
  double loss = 0, capacity = 0, kl = 0, ntp = 0;  // each rank's share of a global mean, summed
  double mean_beta = 1, live = 0;                  // each rank's mean, averaged over the ranks
  double tokens = 0;                               // document tokens in the global batch
  double lr = 0, grad_norm = 0;
  bool finite = true;
  // Completes the fields above (all but lr, grad_norm, finite) over the ranks: one all-reduce.
  void all_reduce(Collectives& comm);
};

// One micro-batch on the model's device.
struct MicroBatch {
  at::Tensor ids, positions, segments, loss_mask;  // (B, T)
  // Vision-language documents: the frozen vision tower's features and 3-D rotary positions.
  const MultimodalInputs* multimodal = nullptr;
};

// What one forward of a micro-batch yields: the loss parts, normalised by the step's count of
// targets (loss_targets).
struct BatchLoss {
  at::Tensor base;      // averaged base loss (the scorers': their regression loss)
  at::Tensor capacity;  // capacity loss of this micro-batch (zero but for gates)
  double kl = 0, ntp = 0, mean_beta = 1, live = 0;  // with_stats only
  // The student's hook: with activation checkpointing, the backward pass re-runs each layer
  // through it, so it must live until backward() has returned.
  std::shared_ptr<LayerHook> student_hook;
};

// Called at the end of each named phase of a forward (student_forward, teacher_forward, losses):
// bench train times the trainer's own step phase by phase; training leaves it unset.
using PhaseMark = std::function<void(const char* phase)>;

class Trainable {
 public:
  virtual ~Trainable() = default;
  void set_phase_mark(PhaseMark mark) { phase_mark_ = std::move(mark); }

  // What the optimizer updates, by name: saved in a step directory's params.safetensors and
  // restored into these tensors in place (the optimizer holds them).
  virtual const std::vector<std::pair<std::string, at::Tensor>>& named_parameters() const = 0;
  std::vector<at::Tensor> parameters() const;
  // A step directory's manifest kind (gates | base | scorer): a run resumes only its own kind.
  virtual std::string checkpoint_kind() const = 0;
  // What the start of a run says it trains ("gates only", ...).
  virtual std::string description() const = 0;
  // Whether dist.tensor_parallel > 1 can train it (each rank holding a slice of the heads).
  virtual bool tensor_parallel_ok() const { return false; }

  // The loss of one micro-batch, each term normalised by the step's count of targets; `comm`: the
  // ranks whose micro-batches make up the step (normalisers counted over all of them).
  virtual BatchLoss forward(const MicroBatch& batch, int64_t targets, bool with_stats,
                            Collectives& comm) const = 0;

  // Writes, beside params.safetensors, the file a user runs (a gate file, a scorer file); the
  // base writes nothing (export-checkpoint makes its HF directory).
  virtual void write_artifacts(const fs::path& dir) const { (void)dir; }
  // A step's fields of metrics.jsonl beyond loss, lr, grad_norm and throughput.
  virtual void add_metrics(const StepStats& stats, Json& line) const = 0;
  // The progress bar's postfix.
  virtual std::string postfix(const StepStats& stats, double tokens_per_s) const = 0;

 protected:
  void mark_phase(const char* phase) const {
    if (phase_mark_) phase_mark_(phase);
  }
  const PhaseMark& phase_mark() const { return phase_mark_; }

 private:
  PhaseMark phase_mark_;
};

// The trainable train.trainable names, made (or, for gates with train.init_from, read) on the
// model's device. `model` and `settings` outlive it; `recipe_sha` goes into the files it writes.
std::unique_ptr<Trainable> make_trainable(const TrainSettings& settings, const Decoder& model,
                                          const std::string& recipe_sha);

}  // namespace retain
