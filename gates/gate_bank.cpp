#include "gates/gate_bank.h"

#include <ATen/CPUGeneratorImpl.h>

#include "core/error.h"
#include "gates/named_parameters.h"
#include "model/activation.h"

namespace retain {

GateBank::GateBank(const GateConfig& config, const ModelConfig& model, at::Device device,
                   uint64_t seed)
    : config_(config), activation_(model.activation) {
  config_.validate("gates");
  const int64_t d = model.hidden_size, r = config.width, hk = model.global_kv_heads();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto opts = at::TensorOptions().dtype(at::kFloat);
  // Drawn on the CPU in a fixed order so every device and rank starts from the same weights.
  auto normal = [&](std::vector<int64_t> shape) {
    return at::normal(0.0, config.init_std, shape, gen, opts).to(device).requires_grad_(true);
  };
  auto zeros = [&](std::vector<int64_t> shape) {
    return at::zeros(shape, opts.device(device)).requires_grad_(true);
  };
  const bool mlp3 = config.arch == GateArch::kMlp3;
  const std::string out_name = mlp3 ? "linear3" : "linear2";
  at::Tensor tied_w, tied_b;
  if (config.tie_projection) {
    tied_w = normal({hk, r});
    tied_b = at::full({hk}, config.bias_init, opts.device(device)).requires_grad_(true);
  }
  for (int64_t l = 0; l < model.num_layers; ++l) {
    const std::string p = str_cat("layers.", l, ".gate.");
    Layer layer;
    layer.w1 = normal({r, d});
    layer.b1 = zeros({r});
    params_.emplace_back(p + "linear1.weight", layer.w1);
    params_.emplace_back(p + "linear1.bias", layer.b1);
    if (mlp3) {
      layer.w2 = normal({r, r});
      layer.b2 = zeros({r});
      params_.emplace_back(p + "linear2.weight", layer.w2);
      params_.emplace_back(p + "linear2.bias", layer.b2);
    }
    if (config.tie_projection) {
      layer.w_out = tied_w;
      layer.bias = tied_b;
    } else {
      layer.w_out = normal({hk, r});
      layer.bias = at::full({hk}, config.bias_init, opts.device(device)).requires_grad_(true);
      params_.emplace_back(p + out_name + ".weight", layer.w_out);
      params_.emplace_back(p + "bias", layer.bias);
    }
    layers_.push_back(std::move(layer));
  }
  if (config.tie_projection) {
    params_.emplace_back("tied.gate." + out_name + ".weight", tied_w);
    params_.emplace_back("tied.gate.bias", tied_b);
  }
}

at::Tensor GateBank::log_beta(int64_t layer, const at::Tensor& hidden) const {
  RETAIN_CHECK(layer >= 0 && layer < num_layers(), "GateBank: layer ", layer, " out of range");
  const Layer& g = layers_[layer];
  auto h = activate(activation_, at::linear(hidden.to(at::kFloat), g.w1, g.b1));
  if (g.w2.defined()) h = activate(activation_, at::linear(h, g.w2, g.b2));
  auto logits = at::linear(h, g.w_out) + g.bias;                // (B, T, Hk)
  return at::log_sigmoid(logits).transpose(1, 2).contiguous();  // (B, Hk, T)
}

at::Tensor GateBank::local_heads(const at::Tensor& log_beta, const LayerTensors& t) {
  const int64_t heads = t.k.size(1);
  if (t.kv_head_offset == 0 && heads == log_beta.size(1)) return log_beta;
  return log_beta.narrow(1, t.kv_head_offset, heads).contiguous();
}

std::vector<at::Tensor> GateBank::parameters() const { return tensors_of(params_); }

void GateBank::load(const std::vector<std::pair<std::string, at::Tensor>>& named,
                    const std::string& where) {
  load_named(params_, named, where, "gate", "this model's gates need");
}

}  // namespace retain
