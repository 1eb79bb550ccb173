// The frozen decoder-only transformer of Llama, Mistral, Qwen2 and Qwen3: embedding, L blocks of
// (RMSNorm -> attention with RoPE, GQA, optional q/k-norm and biases -> residual, RMSNorm -> SwiGLU
// MLP -> residual), final RMSNorm, LM head. Same arithmetic order as transformers' eager path.
//
// The model holds no training or eviction logic: the KV cache (and whatever policy sits behind
// it) is injected per call.
//
// Shapes: B batch, T tokens, d hidden, H heads, Hk KV heads, D head dim, V vocab.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/fs.h"
#include "model/forward_context.h"
#include "model/kv_cache.h"
#include "model/load_options.h"
#include "model/model_config.h"

namespace retain {

// The name and shape of one weight of the HF checkpoint layout
// (model.layers.{l}.self_attn.q_proj.weight, ...).
struct ParamSpec {
  enum class Kind { kMatrix, kEmbedding, kBias, kNorm };
  std::string name;
  std::vector<int64_t> shape;
  Kind kind;
};

std::vector<ParamSpec> decoder_param_specs(const ModelConfig& config);

class VisionTower;  // model/vision/vision_tower.h

class Decoder {
 public:
  // Reads config.json and the safetensors weights of `model_dir` straight into dtype/device.
  static Decoder load(const fs::path& model_dir, const LoadOptions& options);
  // Random weights (N(0, 0.02) matrices, unit norms, zero biases) made on the target device: for
  // benchmarks of public shapes (init-model presets) without writing gigabytes to disk. Draws from
  // the device's default generator after seeding it with `seed` (so it reseeds that generator).
  // Under tensor parallelism each rank draws only its own slice (seeded with seed + its rank), so
  // the weights differ from a single process's: for speed and memory, not for parity.
  static Decoder random(const ModelConfig& config, const LoadOptions& options, uint64_t seed);

  // hidden: (B, T, d) after the final norm. positions: (B, T), -1 marks padding.
  // cache == nullptr: attention sees only this call's tokens.
  at::Tensor forward_hidden(const at::Tensor& input_ids, const at::Tensor& positions,
                            const ForwardContext& context) const;
  at::Tensor forward_hidden(const at::Tensor& input_ids, const at::Tensor& positions,
                            KvCache* cache) const {
    return forward_hidden(input_ids, positions, ForwardContext{cache});
  }
  // hidden (..., d) -> logits (..., V) in fp32.
  at::Tensor logits(const at::Tensor& hidden) const;
  at::Tensor forward(const at::Tensor& input_ids, const at::Tensor& positions,
                     KvCache* cache) const {
    return logits(forward_hidden(input_ids, positions, cache));
  }

  // This process's shapes: under tensor parallelism one slice of the heads and MLP rows
  // (config().tp says which); config().unsharded() is the whole model's.
  const ModelConfig& config() const { return config_; }
  // The tensor-parallel group (null for the whole model on one process).
  Collectives* tensor_parallel() const { return tp_.get(); }
  // The vision tower of a vision-language model (loaded with it); null for a text model.
  const VisionTower* vision() const { return vision_.get(); }
  at::ScalarType dtype() const { return options_.dtype; }
  at::Device device() const { return options_.device; }
  // HF names; a tied LM head appears once, as the embedding. Under tensor parallelism, this
  // rank's slices.
  const std::vector<std::pair<std::string, at::Tensor>>& named_parameters() const {
    return params_;
  }
  // Bytes of every weight once (a tied LM head counted once): what one decode step reads (this
  // rank's under tensor parallelism).
  int64_t weight_bytes() const;
  // Whether the layers run fused q/k/v and gate/up products.
  bool projections_fused() const;

 private:
  static Decoder assemble(ModelConfig config, const LoadOptions& options,
                          std::vector<std::pair<std::string, at::Tensor>> params);
  struct Layer {
    at::Tensor input_norm, q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b, q_norm, k_norm;
    at::Tensor post_norm, gate_w, gate_b, up_w, up_b, down_w, down_b;
    // LoadOptions::fuse_projections: [q; k; v] and [gate; up] by rows (undefined when not fused;
    // the fields above are then views of them).
    at::Tensor qkv_w, qkv_b, gate_up_w, gate_up_b;
  };
  // Concatenates one layer's q/k/v and gate/up weights (when their shapes and biases allow) and
  // makes the separate fields and params_ entries views of them; `index` maps names to params_.
  void fuse_layer(Layer& layer, const std::string& prefix,
                  const std::unordered_map<std::string, size_t>& index);
  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight) const;
  at::Tensor mlp(const Layer& layer, const at::Tensor& x) const;
  // Where tensor parallelism enters a block, and nowhere else (model/tensor_parallel.h): the input
  // of the column-parallel projections (q/k/v, gate/up), and the row-parallel products (o, down),
  // summed over the group with the bias added once. Without a group: the input, the product.
  at::Tensor column_parallel_input(const at::Tensor& h) const;
  at::Tensor row_parallel_project(const at::Tensor& a, const at::Tensor& weight,
                                  const at::Tensor& bias) const;
  // One decoder block: x (B, T, d) -> x (B, T, d).
  at::Tensor run_layer(int64_t l, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                       const at::Tensor& positions, const ForwardContext& context) const;
  // run_layer with its activations recomputed in the backward pass (ForwardContext::
  // checkpoint_layers), the hook's per-layer outputs carried through the checkpoint.
  at::Tensor run_layer_checkpointed(int64_t l, const at::Tensor& x, const at::Tensor& cos,
                                    const at::Tensor& sin, const at::Tensor& positions,
                                    const ForwardContext& context) const;

  ModelConfig config_;
  LoadOptions options_;
  at::Tensor embed_, final_norm_, lm_head_;
  std::shared_ptr<const VisionTower> vision_;
  at::Tensor mrope_axis_;  // (D/2,) which position axis each rotary frequency follows
  std::vector<Layer> layers_;
  std::vector<std::pair<std::string, at::Tensor>> params_;
  std::shared_ptr<Collectives> tp_;
};

// HF-style positions for a left- or right-padded batch: cumsum(mask) - 1 where mask is 1, else -1.
at::Tensor positions_from_attention_mask(const at::Tensor& attention_mask);

}  // namespace retain
