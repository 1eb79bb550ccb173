// `retain train RECIPE [key=value ...]`: trains what train.trainable names (trainer/trainable.h):
// retention gates on a frozen model, every parameter of a small model with the next-token loss, or
// a learned scorer regressing each entry's future attention on the frozen model.
//
// The loop, the torchtitan way: setup (devices, model, trainable, data, optimizer) and restore
// the newest checkpoint, then per step: train_step (the trainable's loss of each micro-batch; one
// optimizer step with warmup + cosine, clipping and a non-finite guard), log (with the held-out
// loss when due) and save.
#pragma once

#include <torch/optim/adamw.h>

#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/dir_lock.h"
#include "core/progress.h"
#include "data/packed_dataset.h"
#include "dist/collectives.h"
#include "dist/dist_env.h"
#include "dist/parallel_groups.h"
#include "model/decoder.h"
#include "model/vision/image_processor.h"
#include "trainer/train_settings.h"
#include "trainer/trainable.h"

namespace retain {

int run_train(const std::string& recipe_path, const std::vector<std::string>& overrides);

class Trainer {
 public:
  Trainer(TrainSettings settings, Config recipe);

  // Everything from setup to the last checkpoint; 0 on success.
  int run();

  // Devices, collectives, model, trainable, data and optimizer; writes the resolved recipe.
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
  // A packed batch on the model's device (with its images' features), through the trainable.
  BatchLoss forward(const PackedBatch& batch, int64_t targets, bool with_stats, Collectives& comm);
  // The step's micro-batches from the sampler; `targets` gets the global batch's count of loss
  // targets and `tokens` its local count of document tokens.
  std::vector<PackedBatch> next_micro_batches(int64_t step, int64_t* targets, double* tokens);
  // Forward and backward of every micro-batch: the gradients accumulate, `stats` gets the losses.
  void accumulate_gradients(const std::vector<PackedBatch>& micro, int64_t targets, bool with_stats,
                            StepStats& stats);
  // All-reduces the gradients and statistics, clips, and steps the optimizer unless the loss or
  // the gradient is not finite (train.max_nonfinite_steps in a row abort the run).
  void apply_gradients(int64_t step, StepStats& stats);
  // metrics.jsonl (and the progress bar's postfix) after step `step`: a full line every
  // log.every steps, the held-out loss every eval_every.
  void log_step(int64_t step, const StepStats& stats, bool log_now);
  bool leader() const { return comm_->rank() == 0; }

  TrainSettings s_;
  Config recipe_;
  std::string recipe_sha_;
  // The leader's hold on run.dir for the whole run: a second training into it refuses.
  std::optional<DirLock> run_dir_lock_;
  // The base's files (directory_stamps of model.path), kept in every checkpoint: a run directory
  // does not resume on a base that changed in place.
  std::map<std::string, std::string> base_files_;
  DistEnv env_;
  // Every rank (gradients, checkpoints), the tensor-parallel group sharing this rank's model
  // replica, and the data-parallel group of this shard (data, token counts, statistics).
  std::shared_ptr<Collectives> comm_, tp_, dp_;
  std::unique_ptr<Decoder> model_;
  std::unique_ptr<Trainable> trainable_;  // train.trainable
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
