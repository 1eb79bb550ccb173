// `retain train RECIPE [key=value ...]`: trains retention gates on a frozen model (or, with
// train.trainable: base, every parameter of a small model with the next-token loss; with locret
// or kvzap, a learned scorer regressing each entry's future attention on the frozen model).
//
// The loop, the torchtitan way: setup (devices, model, gates, data, optimizer) and restore the
// newest checkpoint, then per step: train_step (micro-batches: student with gates, teacher
// without, same frozen weights; one optimizer step with warmup + cosine, clipping and a
// non-finite guard), log (with the held-out loss when due) and save.
#pragma once

#include <torch/optim/adamw.h>

#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/progress.h"
#include "data/packed_dataset.h"
#include "dist/collectives.h"
#include "dist/dist_env.h"
#include "dist/parallel_groups.h"
#include "gates/gate_bank.h"
#include "gates/scorer_bank.h"
#include "model/decoder.h"
#include "model/vision/image_processor.h"
#include "trainer/train_settings.h"

namespace retain {

int run_train(const std::string& recipe_path, const std::vector<std::string>& overrides);

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

class Trainer {
 public:
  Trainer(TrainSettings settings, Config recipe);

  // Everything from setup to the last checkpoint; 0 on success.
  int run();

  // Devices, collectives, model, gates, data and optimizer; writes the resolved recipe.
  void setup();
  // The newest checkpoint (train.resume) restored: the step to continue from (0: none).
  int64_t restore();
  // One optimizer step over grad_accum micro-batches; `with_stats` also measures beta and the
  // expected live entries (what the log shows).
  StepStats train_step(int64_t step, bool with_stats);
  // The held-out loss: the training objective on the first eval_batches held-out sequences,
  // each term normalised by the count of targets (as in training).
  double heldout_loss();
  void save_checkpoint(int64_t step);

 private:
  // What one forward of a batch yields: the loss parts, normalised by the step's count of targets
  // (loss_targets).
  struct BatchLoss {
    at::Tensor base;      // averaged base loss
    at::Tensor capacity;  // capacity loss of this micro-batch
    double kl = 0, ntp = 0, mean_beta = 1, live = 0;
    // The student's hook: with activation checkpointing, the backward pass re-runs each layer
    // through it, so it must live until backward() has returned.
    std::shared_ptr<LayerHook> student_hook;
  };
  BatchLoss forward(const PackedBatch& batch, int64_t targets, bool with_stats, Collectives& comm);
  // train.trainable locret | kvzap: the scorer's regression loss of a batch.
  BatchLoss scorer_forward(const at::Tensor& ids, const at::Tensor& positions,
                           const at::Tensor& segments, const MultimodalInputs* multimodal,
                           Collectives& comm);
  // metrics.jsonl (and the progress bar's postfix) after step `step`: a full line every
  // log.every steps, the held-out loss every eval_every.
  void log_step(int64_t step, const StepStats& stats, bool log_now);
  std::vector<at::Tensor> trainable() const;
  bool leader() const { return comm_->rank() == 0; }
  // A step directory's manifest kind: gates | base | scorer.
  std::string checkpoint_kind() const;

  TrainSettings s_;
  Config recipe_;
  std::string recipe_sha_;
  // The base's files (directory_stamps of model.path), kept in every checkpoint: a run directory
  // does not resume on a base that changed in place.
  std::map<std::string, std::string> base_files_;
  DistEnv env_;
  // Every rank (gradients, checkpoints), the tensor-parallel group sharing this rank's model
  // replica, and the data-parallel group of this shard (data, token counts, statistics).
  std::shared_ptr<Collectives> comm_, tp_, dp_;
  std::unique_ptr<Decoder> model_;
  std::unique_ptr<GateBank> gates_;
  std::unique_ptr<ScorerBank> scorer_;  // train.trainable locret | kvzap
  std::unique_ptr<PackedDataset> data_, heldout_;
  std::unique_ptr<ImageProcessorConfig> processor_;  // vision-language shards
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  int64_t consecutive_nonfinite_ = 0, skipped_steps_ = 0;
  // Leader only: metrics.jsonl, the progress bar, tokens and time since the last full log line.
  std::ofstream metrics_, samples_;
  std::optional<ProgressBar> bar_;
  double tokens_since_log_ = 0;
  std::chrono::steady_clock::time_point last_log_;
};

}  // namespace retain
