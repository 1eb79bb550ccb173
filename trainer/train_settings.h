// The training settings, read (typed and checked) from a resolved recipe (trainer/recipe.h).
#pragma once

#include <cstdint>
#include <string>

#include "core/config.h"
#include "core/fs.h"
#include "gates/gate_bank.h"
#include "gates/losses.h"
#include "gates/scorer_bank.h"

namespace retain {

// train.trainable: what the run optimizes (trainer/trainable.h).
enum class TrainableKind { kGates, kLocret, kKvzap };
// As a recipe writes it: gates | locret | kvzap.
const char* trainable_name(TrainableKind kind);

struct TrainSettings {
  fs::path run_dir, model_dir, shards, heldout;
  std::string device, dtype;  // model.device, model.dtype as written (resolved at setup)
  uint64_t seed;
  TrainableKind trainable = TrainableKind::kGates;
  // locret | kvzap: a learned scorer (scorer.kind says which).
  bool train_scorer() const {
    return trainable == TrainableKind::kLocret || trainable == TrainableKind::kKvzap;
  }
  GateConfig gates;
  ScorerConfig scorer;
  std::string init_from;
  BaseLossTerms terms;
  CapacityMode capacity;
  double memory, capacity_weight;
  int64_t logit_block, seq_len, steps, batch_size, grad_accum, warmup, max_nonfinite, eval_every,
      eval_batches;
  int64_t checkpoint_every, keep_last_k, log_every;
  bool shuffle, activation_checkpointing;
  double lr, min_lr, weight_decay, eps, grad_clip, beta1, beta2;
  std::string resume;
  bool log_samples;
  int64_t timeout_s;
  int64_t tensor_parallel;
};

TrainSettings read_settings(const Config& recipe);

}  // namespace retain
