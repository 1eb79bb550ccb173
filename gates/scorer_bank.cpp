#include "gates/scorer_bank.h"

#include <ATen/CPUGeneratorImpl.h>

#include "core/error.h"
#include "gates/future_attention.h"
#include "gates/named_parameters.h"
#include "model/activation.h"

namespace retain {

ScorerBank::ScorerBank(const ScorerConfig& config, const ModelConfig& model, at::Device device,
                       uint64_t seed)
    : config_(config), activation_(model.activation) {
  config_.validate("scorer");
  const int64_t r = config.width, hk = model.num_kv_heads;
  input_size_ = config.kind == ScorerKind::kLocret ? (model.num_heads + 2 * hk) * model.head_dim
                                                   : model.hidden_size;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto opts = at::TensorOptions().dtype(at::kFloat);
  // Drawn on the CPU in a fixed order so every device and rank starts from the same weights.
  auto normal = [&](std::vector<int64_t> shape) {
    return at::normal(0.0, config.init_std, shape, gen, opts).to(device).requires_grad_(true);
  };
  auto zeros = [&](std::vector<int64_t> shape) {
    return at::zeros(shape, opts.device(device)).requires_grad_(true);
  };
  for (int64_t l = 0; l < model.num_layers; ++l) {
    const std::string p = str_cat("layers.", l, ".scorer.");
    Layer layer{normal({r, input_size_}), zeros({r}), normal({hk, r}), zeros({hk})};
    params_.emplace_back(p + "linear1.weight", layer.w1);
    params_.emplace_back(p + "linear1.bias", layer.b1);
    params_.emplace_back(p + "linear2.weight", layer.w2);
    params_.emplace_back(p + "linear2.bias", layer.b2);
    layers_.push_back(std::move(layer));
  }
}

at::Tensor ScorerBank::score(const LayerTensors& t) const {
  RETAIN_CHECK(t.layer >= 0 && t.layer < static_cast<int64_t>(layers_.size()), "ScorerBank: layer ",
               t.layer, " out of range");
  const Layer& s = layers_[t.layer];
  at::Tensor input;
  if (config_.kind == ScorerKind::kLocret) {
    // (B, heads, T, D) -> (B, T, heads D) each, then one row per token.
    auto flat = [](const at::Tensor& x) {
      return x.transpose(1, 2).reshape({x.size(0), x.size(2), -1});
    };
    input = at::cat({flat(t.q), flat(t.k), flat(t.v)}, -1);
  } else {
    input = t.hidden;
  }
  RETAIN_CHECK(input.size(-1) == input_size_, "ScorerBank: layer ", t.layer, " input of width ",
               input.size(-1), ", expected ", input_size_);
  auto h = activate(activation_, at::linear(input.to(at::kFloat), s.w1, s.b1));
  return at::linear(h, s.w2, s.b2).transpose(1, 2).contiguous();  // (B, Hk, T)
}

std::vector<at::Tensor> ScorerBank::parameters() const { return tensors_of(params_); }

void ScorerBank::load(const std::vector<std::pair<std::string, at::Tensor>>& named,
                      const std::string& where) {
  load_named(params_, named, where, "scorer",
             str_cat("this model's ", scorer_kind_name(config_.kind), " scorer needs"));
}

at::Tensor scorer_target(ScorerKind kind, const at::Tensor& q, const at::Tensor& k,
                         const at::Tensor& segments) {
  if (kind == ScorerKind::kLocret) return future_attention(q, k, segments);
  // A real token attends to itself, so its importance is > 0; padding's is 0 and is never scored
  // (the floor only keeps the log finite there).
  return future_attention(q, k, segments).clamp_min(1e-30).log();
}

ScorerLossSums scorer_loss_sums(ScorerKind kind, const at::Tensor& prediction,
                                const at::Tensor& target, const at::Tensor& segments) {
  RETAIN_CHECK(prediction.sizes() == target.sizes() && prediction.dim() == 3 &&
                   segments.sizes() == at::IntArrayRef({prediction.size(0), prediction.size(2)}),
               "scorer_loss_sums: expected prediction and target (B, Hk, T) and segments (B, T), "
               "found ",
               prediction.sizes(), ", ", target.sizes(), " and ", segments.sizes());
  const auto diff = prediction - target.to(prediction.scalar_type());
  // SmoothL1 with beta 1: 0.5 x^2 below |x| = 1, |x| - 0.5 above (torch's smooth_l1_loss).
  const auto per_entry = kind == ScorerKind::kLocret
                             ? at::where(diff.abs() < 1, 0.5 * diff * diff, diff.abs() - 0.5)
                             : diff * diff;
  const auto real = (segments >= 0).unsqueeze(1).to(per_entry.scalar_type());  // (B, 1, T)
  ScorerLossSums out;
  out.sum = (per_entry * real).sum();
  out.count = (segments >= 0).sum().item<int64_t>() * prediction.size(1);
  return out;
}

}  // namespace retain
