// The per-layer hook through which code outside the model (retention gates, training-time packed
// attention) takes over a layer's attention, without the model knowing about it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace retain {

// What one layer hands to the hook. Shapes: hidden (B, T, d) = the post-input_layernorm state
// (the input of q/k/v and of retention gates); q (B, H, T, D), k and v (B, Hk, T, D) after RoPE
// and q/k-norm; positions (B, T); q_before_rope (B, H, T, D) the queries after q-norm, before RoPE
// (expected attention models future queries from their statistics).
struct LayerTensors {
  int64_t layer;
  const at::Tensor& hidden;
  const at::Tensor& q;
  const at::Tensor& k;
  const at::Tensor& v;
  const at::Tensor& positions;
  const at::Tensor& q_before_rope;
  // Under tensor parallelism k and v hold one slice of the KV heads: the model's index of its first
  // head (what gates, seeded scores and anything else keyed by head use). 0 otherwise.
  int64_t kv_head_offset = 0;
};

class LayerHook {
 public:
  virtual ~LayerHook() = default;
  // The layer's attention output (B, H, T, D), before o_proj.
  virtual at::Tensor attend(const LayerTensors& tensors) = 0;

  // Tensors the hook made during the last attend() of `layer` that losses use (log beta). With
  // activation checkpointing the layer runs without grad, so the model returns them as extra
  // outputs of the checkpointed function and hands back the graph-connected versions.
  virtual std::vector<at::Tensor> layer_outputs(int64_t /*layer*/) { return {}; }
  virtual void set_layer_outputs(int64_t /*layer*/, std::vector<at::Tensor> /*outputs*/) {}
};

}  // namespace retain
