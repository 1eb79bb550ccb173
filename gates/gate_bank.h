// Retention gates: one small MLP per layer mapping the post-input_layernorm hidden state of each
// token to log beta for every KV head (TrimKV / DBTrimKV):
//   mlp2: linear1 d->r (bias) -> act -> linear2 r->Hk (no bias) -> + bias[Hk] -> logsigmoid
//   mlp3: linear1 d->r (bias) -> act -> linear2 r->r (bias) -> act -> linear3 r->Hk (no bias) -> +
//   bias[Hk] -> logsigmoid
// With tie_projection the last linear and the bias are ONE pair of parameters shared by every
// layer (row h serves KV head h in every layer), which puts all layers' scores on one scale so
// tokens of all layers and heads can compete for one budget.
//
// Weights live in fp32 whatever the model's dtype; init: weights N(0, init_std), linear biases 0,
// the final bias = bias_init (18: beta ~ 1, so the gated model starts as the base model).
//
// Parameter names (also the gate file's tensor names):
//   layers.{l}.gate.linear1.weight / .bias, layers.{l}.gate.linear2.weight / .bias (mlp3),
//   untied: layers.{l}.gate.linear{2|3}.weight, layers.{l}.gate.bias
//   tied:   tied.gate.linear{2|3}.weight, tied.gate.bias
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

class GateBank {
 public:
  // `model` may be a tensor-parallel shard: the gates still cover the whole model's KV heads.
  GateBank(const GateConfig& config, const ModelConfig& model, at::Device device, uint64_t seed);

  // hidden: (B, T, d) -> log beta (B, Hk, T) in fp32 (<= 0), for every KV head of the model
  // (gates are replicated under tensor parallelism: the same parameters on every rank).
  at::Tensor log_beta(int64_t layer, const at::Tensor& hidden) const;
  // The rows of the KV heads a layer's k/v hold: all of log_beta, or under tensor parallelism
  // this rank's slice (t.kv_head_offset, as many as t.k has).
  static at::Tensor local_heads(const at::Tensor& log_beta, const LayerTensors& t);

  const GateConfig& config() const { return config_; }
  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  // Every trainable tensor once (a tied projection appears once), in a fixed order.
  const std::vector<std::pair<std::string, at::Tensor>>& named_parameters() const {
    return params_;
  }
  std::vector<at::Tensor> parameters() const;
  // Copies values from `named` (every name must be present with the same shape).
  void load(const std::vector<std::pair<std::string, at::Tensor>>& named, const std::string& where);

 private:
  struct Layer {
    at::Tensor w1, b1, w2, b2;  // w2/b2: the hidden linear of mlp3
    at::Tensor w_out, bias;     // the projection (shared objects when tied)
  };
  GateConfig config_;
  Activation activation_;
  std::vector<Layer> layers_;
  std::vector<std::pair<std::string, at::Tensor>> params_;
};

}  // namespace retain
