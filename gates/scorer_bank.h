// Learned scorers, the competitors a user trains on the same frozen model, data and budget as the
// retention gates (issue: learned competitors). One small MLP per layer maps each token to a score
// per KV head:
//   locret: Locret's retaining heads (Huang et al., 2024): the input is the token's q, k and v of
//           every head, concatenated ((H + 2 Hk) D); the score regresses its causal importance
//           (future_attention kMax) with a SmoothL1 loss;
//   kvzap:  the input is the post-input_layernorm hidden state (d); the score regresses the log
//           of the same importance (KVzip's max reduction in log, as KVzap predicts it) with a
//           squared error.
// Both: linear1 in->width (bias) -> the model's activation -> linear2 width->Hk (bias); fp32
// weights N(0, init_std), biases 0. Parameter names: layers.{l}.scorer.linear{1,2}.{weight,bias}.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "core/json.h"
#include "gates/learned_config.h"
#include "model/layer_hook.h"
#include "model/model_config.h"

namespace retain {

class ScorerBank {
 public:
  ScorerBank(const ScorerConfig& config, const ModelConfig& model, at::Device device,
             uint64_t seed);

  // The layer's scores (B, Hk, T) in fp32 from what the layer computed (q, k, v post-RoPE for
  // locret; the hidden state for kvzap).
  at::Tensor score(const LayerTensors& tensors) const;
  // Input width of one layer's MLP.
  int64_t input_size() const { return input_size_; }

  const ScorerConfig& config() const { return config_; }
  const std::vector<std::pair<std::string, at::Tensor>>& named_parameters() const {
    return params_;
  }
  std::vector<at::Tensor> parameters() const;
  void load(const std::vector<std::pair<std::string, at::Tensor>>& named, const std::string& where);

 private:
  struct Layer {
    at::Tensor w1, b1, w2, b2;
  };
  ScorerConfig config_;
  Activation activation_;
  int64_t input_size_ = 0;
  std::vector<Layer> layers_;
  std::vector<std::pair<std::string, at::Tensor>> params_;
};

// The target of `config.kind` for one layer, (B, Hk, T) fp32 without grad: locret the causal
// importance (max future attention), kvzap its log.
at::Tensor scorer_target(ScorerKind kind, const at::Tensor& q, const at::Tensor& k,
                         const at::Tensor& segments);

// The loss of predictions against targets (both (B, Hk, T)) summed over the entries of real
// tokens (segments >= 0) and the heads, with their count: SmoothL1 (beta 1) for locret, squared
// error for kvzap. A caller divides by the count over the whole batch (and every rank).
struct ScorerLossSums {
  at::Tensor sum;
  int64_t count = 0;
};
ScorerLossSums scorer_loss_sums(ScorerKind kind, const at::Tensor& prediction,
                                const at::Tensor& target, const at::Tensor& segments);

}  // namespace retain
