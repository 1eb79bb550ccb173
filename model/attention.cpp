#include "model/attention.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <limits>

#include "core/error.h"
#include "kernels/cache_attention_triton.h"

namespace retain {

namespace {

// (B, 1|Hk, T, S): whether query t may attend to key s.
at::Tensor visibility(const at::Tensor& q_positions, const at::Tensor& k_positions, int64_t b,
                      int64_t t, int64_t window) {
  auto k_pos = k_positions.unsqueeze(-2);                   // (B, 1|Hk, 1, S)
  auto q_pos = q_positions.view({b, 1, t, 1});              // (B, 1, T, 1)
  auto visible = (k_pos >= 0).logical_and(k_pos <= q_pos);  // (B, 1|Hk, T, S)
  if (window > 0) visible = visible.logical_and(q_pos - k_pos < window);
  return visible;
}

// Whether every row's keys sit at exactly its query positions p, p + 1, ..., p + T - 1 (p >= 0):
// then "key j visible to query i" is j <= i. One device read.
bool is_plain_causal(const at::Tensor& q_positions, const at::Tensor& k_positions) {
  const int64_t t = q_positions.size(1);
  auto q_pos = q_positions.unsqueeze(1);  // (B, 1, T)
  auto ok = k_positions.eq(q_pos).all().logical_and(q_pos.select(2, 0).ge(0).all());
  if (t > 1) {
    auto steps = q_positions.narrow(1, 1, t - 1) - q_positions.narrow(1, 0, t - 1);
    ok = ok.logical_and(steps.eq(1).all());
  }
  return ok.item<bool>();
}

}  // namespace

at::Tensor attention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                     const at::Tensor& q_positions, const at::Tensor& k_positions, double scale,
                     int64_t window) {
  // One query per sequence (a decode step) stays eager: the fused path repeats K/V for GQA, which
  // at T = 1 costs more than the whole product (on an H100 a 32k full cache went from 51 to 189
  // ms a step).
  if (q.size(2) > 1)
    return attention_fused(q, keys, values, q_positions, k_positions, scale, window);
  return attention_eager(q, keys, values, q_positions, k_positions, scale, window);
}

at::Tensor attention_fused(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                           const at::Tensor& q_positions, const at::Tensor& k_positions,
                           double scale, int64_t window) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2);
  const int64_t hk = keys.size(1);
  RETAIN_CHECK(h % hk == 0, "attention: ", h, " query heads are not a multiple of ", hk,
               " KV heads");
  const int64_t g = h / hk;
  // The queries are the keys, in order, no padding (a prompt's first chunk into an empty cache).
  const bool plain_causal =
      keys.size(2) == t && window == 0 && is_plain_causal(q_positions, k_positions);
  const bool needs_grad = q.requires_grad() || keys.requires_grad() || values.requires_grad();
  if (q.is_cuda() && window == 0 && !plain_causal && !needs_grad &&
      prefill_attention_choice() == PrefillAttention::triton) {
    // A later chunk over the cache: one flash-style kernel reading each KV head's entries by
    // their positions, instead of SDPA with a dense mask (kernels/cache_attention_triton.h). It
    // has no backward: anything that differentiates through attention keeps SDPA.
    const CacheAttentionTensors tensors{q, keys, values, k_positions, q_positions};
    if (std::string why = cache_attention_triton_unsupported(tensors); why.empty())
      return cache_attention_triton(tensors, scale);
    else
      log_triton_fallback("prefill attention", why, "ATen's SDPA with the position mask");
  }
  // GQA: the CPU flash kernel reads the shared K/V heads itself (enable_gqa; copying them G times
  // cost a tenth of a 2k-token CPU prefill). On CUDA a masked product runs the memory-efficient
  // kernel, which takes no enable_gqa (it would fall back to the math path): K/V are repeated.
  auto k = keys, v = values;
  const bool repeat = g > 1 && q.is_cuda();
  if (repeat) {
    k = keys.repeat_interleave(g, 1);
    v = values.repeat_interleave(g, 1);
  }
  if (plain_causal) {
    // Causal attention without a mask, which the flash kernels compute with half the blocks (a
    // mask makes them visit every block).
    return at::scaled_dot_product_attention(q, k, v, {}, /*dropout_p=*/0.0, /*is_causal=*/true,
                                            scale, /*enable_gqa=*/g > 1 && !repeat);
  }
  if (q.is_cpu()) {
    // The additive mask SDPA would make of the bool one, written in one pass (building the bool
    // mask, finding its blind rows and converting it were ~15% of a tiny model's CPU sweep).
    auto bias = attention_bias(q_positions, k_positions, g, window, q.scalar_type());
    return at::scaled_dot_product_attention(q, k, v, bias, /*dropout_p=*/0.0, /*is_causal=*/false,
                                            scale, /*enable_gqa=*/g > 1);
  }
  auto visible = visibility(q_positions, k_positions, b, t, window);
  // A padding query sees nothing: let it see everything (finite weights; the eager path gives
  // uniform ones), since a fully masked row would be NaN and NaN values poison later products.
  visible = visible.logical_or(visible.any(-1, /*keepdim=*/true).logical_not_());
  if (g > 1 && visible.size(1) > 1) visible = visible.repeat_interleave(g, 1);
  return at::scaled_dot_product_attention(q, k, v, visible, /*dropout_p=*/0.0,
                                          /*is_causal=*/false, scale,
                                          /*enable_gqa=*/g > 1 && !repeat);
}

at::Tensor attention_bias(const at::Tensor& q_positions, const at::Tensor& k_positions,
                          int64_t group, int64_t window, at::ScalarType dtype) {
  RETAIN_CHECK(q_positions.is_cpu() && k_positions.is_cpu(),
               "attention_bias: CPU position tensors expected");
  RETAIN_CHECK(q_positions.dim() == 2 && k_positions.dim() == 3 &&
                   k_positions.size(0) == q_positions.size(0) && group >= 1,
               "attention_bias: expected q_positions (B, T) and k_positions (B, 1|Hk, S), found ",
               q_positions.sizes(), " and ", k_positions.sizes());
  const int64_t b = q_positions.size(0), t = q_positions.size(1);
  const int64_t hk = k_positions.size(1), s = k_positions.size(2);
  const int64_t heads = hk > 1 ? hk * group : 1;
  auto q_pos = q_positions.to(at::kLong).contiguous();
  auto k_pos = k_positions.to(at::kLong);
  auto bias = at::empty({b, heads, t, s}, q_positions.options().dtype(dtype));
  const int64_t* qp = q_pos.data_ptr<int64_t>();
  const int64_t* kp = k_pos.data_ptr<int64_t>();
  const int64_t k_b = k_pos.stride(0), k_h = k_pos.stride(1), k_s = k_pos.stride(2);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "attention_bias", [&] {
    scalar_t* out = bias.data_ptr<scalar_t>();
    const auto hidden = static_cast<scalar_t>(-std::numeric_limits<float>::infinity());
    const int64_t rows = b * heads * t;
    at::parallel_for(0, rows, std::max<int64_t>(1, 32768 / std::max<int64_t>(s, 1)),
                     [&](int64_t begin, int64_t end) {
                       for (int64_t row = begin; row < end; ++row) {
                         const int64_t bi = row / (heads * t), h = (row / t) % heads;
                         const int64_t q = qp[bi * t + row % t];
                         const int64_t* keys = kp + bi * k_b + (h / group) * k_h;
                         scalar_t* o = out + row * s;
                         int64_t seen = 0;
                         for (int64_t j = 0; j < s; ++j) {
                           const int64_t p = keys[j * k_s];
                           const bool visible = p >= 0 && p <= q && (window <= 0 || q - p < window);
                           o[j] = visible ? scalar_t(0) : hidden;
                           seen += visible;
                         }
                         // A blind row (padding) sees everything, as in attention_fused's bool mask.
                         if (seen == 0) std::fill(o, o + s, scalar_t(0));
                       }
                     });
  });
  return bias;
}

at::Tensor attention_eager(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                           const at::Tensor& q_positions, const at::Tensor& k_positions,
                           double scale, int64_t window) {
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), d = q.size(3);
  const int64_t hk = keys.size(1), s = keys.size(2);
  RETAIN_CHECK(h % hk == 0, "attention: ", h, " query heads are not a multiple of ", hk,
               " KV heads");
  const int64_t g = h / hk;

  // (B, H, T, D) -> (B, Hk, G*T, D): heads h = kv * G + i share KV head kv.
  auto q_folded = q.contiguous().view({b, hk, g * t, d});
  auto scores = at::matmul(q_folded, keys.transpose(-1, -2)) * scale;  // (B, Hk, G*T, S)

  auto visible = visibility(q_positions, k_positions, b, t, window);
  // A fully masked row (a padding query) gets uniform weights instead of NaN: its output is unused.
  double lowest = q.scalar_type() == at::kFloat
                      ? std::numeric_limits<float>::lowest()
                      : (q.scalar_type() == at::kHalf ? -65504.0 : -3.38e38);
  scores = scores.view({b, hk, g, t, s}).masked_fill(visible.unsqueeze(2).logical_not(), lowest);
  auto probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
  auto out = at::matmul(probs.view({b, hk, g * t, s}), values);  // (B, Hk, G*T, D)
  return out.view({b, h, t, d});
}

}  // namespace retain
