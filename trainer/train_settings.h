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

struct TrainSettings {
  fs::path run_dir, model_dir, shards, heldout;
  std::string device, dtype;  // model.device, model.dtype as written (resolved at setup)
  uint64_t seed;
  bool train_base;
  // gates | base | locret | kvzap (the last two: a learned scorer, scorer.kind)
  std::string trainable;
  bool train_scorer() const { return trainable == "locret" || trainable == "kvzap"; }
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
