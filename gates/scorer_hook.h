// The layer hook that trains a learned scorer (gates/scorer_bank.h) on the frozen model: every
// layer runs plain attention (the model is not changed), and on the way the layer's scorer
// predicts each token's score from what the layer computed while the target (future_attention)
// is computed from its queries and keys. The model runs without grad; only the scorer's forward
// records one, so the loss's backward reaches the scorer's parameters alone.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "gates/gated_attention.h"
#include "gates/scorer_bank.h"
#include "model/layer_hook.h"

namespace retain {

class ScorerTrainingHook : public LayerHook {
 public:
  // segments: (B, T) document ids, -1 padding.
  ScorerTrainingHook(const ScorerBank& scorer, at::Tensor segments)
      : scorer_(scorer), segments_(segments), plain_(nullptr, segments) {}

  at::Tensor attend(const LayerTensors& t) override;

  // The loss summed over every layer's labelled entries (with grad), and their count.
  const at::Tensor& loss_sum() const { return loss_sum_; }
  int64_t count() const { return count_; }

 private:
  const ScorerBank& scorer_;
  at::Tensor segments_;
  GatedAttentionHook plain_;
  at::Tensor loss_sum_;
  int64_t count_ = 0;
};

}  // namespace retain
