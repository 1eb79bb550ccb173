#include "model/rope.h"

#include <cmath>

#include "kernels/fused_ops.h"

namespace retain {

namespace {

// base ** (arange(0, dim, 2) / dim) in fp32, as transformers computes it.
at::Tensor base_powers(double base, int64_t dim, at::Device device) {
  auto exponents =
      at::arange(0, dim, 2, at::TensorOptions().dtype(at::kLong).device(device)).to(at::kFloat) /
      static_cast<double>(dim);
  return at::pow(base, exponents);
}

at::Tensor llama3_inv_freq(const RopeConfig& r, at::Tensor inv_freq) {
  double old_context = static_cast<double>(r.original_max_position_embeddings);
  double low_freq_wavelen = old_context / r.low_freq_factor;
  double high_freq_wavelen = old_context / r.high_freq_factor;
  auto wavelen = 2 * M_PI / inv_freq;
  auto scaled = at::where(wavelen > low_freq_wavelen, inv_freq / r.factor, inv_freq);
  auto smooth =
      (old_context / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  auto smoothed = (1 - smooth) * scaled / r.factor + smooth * scaled;
  auto is_medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return at::where(is_medium, smoothed, scaled);
}

double yarn_mscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

RopeFrequencies yarn_frequencies(const RopeConfig& r, int64_t dim, at::Device device) {
  RopeFrequencies out;
  if (r.attention_factor) {
    out.attention_scaling = *r.attention_factor;
  } else if (r.mscale && r.mscale_all_dim && *r.mscale != 0 && *r.mscale_all_dim != 0) {
    out.attention_scaling =
        yarn_mscale(r.factor, *r.mscale) / yarn_mscale(r.factor, *r.mscale_all_dim);
  } else {
    out.attention_scaling = yarn_mscale(r.factor, 1.0);
  }
  auto correction_dim = [&](double rotations) {
    return (static_cast<double>(dim) *
            std::log(static_cast<double>(r.original_max_position_embeddings) /
                     (rotations * 2 * M_PI))) /
           (2 * std::log(r.theta));
  };
  double low = correction_dim(r.beta_fast);
  double high = correction_dim(r.beta_slow);
  if (r.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // avoids a zero-width ramp, as transformers does

  auto pos_freqs =
      at::pow(r.theta, at::arange(0, dim, 2, at::TensorOptions().device(device)).to(at::kFloat) /
                           static_cast<double>(dim));
  auto extrapolation = 1.0 / pos_freqs;
  auto interpolation = 1.0 / (r.factor * pos_freqs);
  auto ramp = ((at::arange(dim / 2, at::TensorOptions().dtype(at::kFloat).device(device)) - low) /
               (high - low))
                  .clamp(0, 1);
  auto extrapolation_factor = 1 - ramp;
  out.inv_freq = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
  return out;
}

}  // namespace

RopeFrequencies rope_frequencies(const ModelConfig& config, int64_t seq_len, at::Device device) {
  const RopeConfig& r = config.rope;
  int64_t dim = config.head_dim;
  RopeFrequencies out;
  switch (r.type) {
    case RopeType::kDefault:
      out.inv_freq = 1.0 / base_powers(r.theta, dim, device);
      break;
    case RopeType::kLinear:
      out.inv_freq = (1.0 / base_powers(r.theta, dim, device)) / r.factor;
      break;
    case RopeType::kDynamic: {
      double base = r.theta;
      auto max_pos = static_cast<double>(config.max_position_embeddings);
      if (static_cast<double>(seq_len) > max_pos) {
        base =
            r.theta * std::pow(r.factor * static_cast<double>(seq_len) / max_pos - (r.factor - 1),
                               static_cast<double>(dim) / static_cast<double>(dim - 2));
      }
      out.inv_freq = 1.0 / base_powers(base, dim, device);
      break;
    }
    case RopeType::kLlama3:
      out.inv_freq = llama3_inv_freq(r, 1.0 / base_powers(r.theta, dim, device));
      break;
    case RopeType::kYarn:
      out = yarn_frequencies(r, dim, device);
      break;
  }
  return out;
}

std::pair<at::Tensor, at::Tensor> rope_cos_sin(const RopeFrequencies& freqs,
                                               const at::Tensor& positions, at::ScalarType dtype) {
  // (B, T, 1) * (D/2,) -> (B, T, D/2): each entry is one fp32 product, as in transformers' matmul.
  auto angles = positions.to(at::kFloat).unsqueeze(-1) * freqs.inv_freq;
  return rope_cos_sin_from_angles(angles, freqs, dtype);
}

std::pair<at::Tensor, at::Tensor> rope_cos_sin_from_angles(const at::Tensor& angles,
                                                           const RopeFrequencies& freqs,
                                                           at::ScalarType dtype) {
  auto emb = at::cat({angles, angles}, -1);
  auto cos = emb.cos();
  auto sin = emb.sin();
  if (freqs.attention_scaling != 1.0) {
    cos = cos * freqs.attention_scaling;
    sin = sin * freqs.attention_scaling;
  }
  return {cos.to(dtype), sin.to(dtype)};
}

at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  return rope_rotate(x, cos, sin);  // one kernel when no grad is asked (kernels/fused_ops.h)
}

}  // namespace retain
