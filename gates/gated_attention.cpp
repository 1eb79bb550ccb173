#include "gates/gated_attention.h"

#include <cmath>

#include "kernels/retention_attention.h"

namespace retain {

at::Tensor GatedAttentionHook::attend(const LayerTensors& t) {
  if (gates_ == nullptr) return plain_attention(t);
  at::Tensor log_beta = gates_->log_beta(t.layer, t.hidden);
  if (static_cast<int64_t>(log_betas_.size()) <= t.layer) log_betas_.resize(t.layer + 1);
  log_betas_[t.layer] = log_beta;
  return retention_attention(t.q, t.k, t.v, GateBank::local_heads(log_beta, t), t.positions,
                             segments_);
}

at::Tensor GatedAttentionHook::plain_attention(const LayerTensors& t) {
  const int64_t b = t.q.size(0), h = t.q.size(1), n = t.q.size(2), hk = t.k.size(1);
  const int64_t group = h / hk;
  if (single_document_rows_ < 0) {  // once per hook: the packing does not change between layers
    auto segments = segments_.to(t.q.device());
    auto arange = at::arange(n, t.positions.options()).unsqueeze(0);
    const bool one = segments.ge(0).all().item<bool>() &&
                     segments.eq(segments.select(1, 0).unsqueeze(1)).all().item<bool>() &&
                     t.positions.eq(arange).all().item<bool>();
    single_document_rows_ = one ? 1 : 0;
    if (!one && t.q.is_cpu() && b * n * n <= kDenseMaskLimit) {
      // Key j is visible to query i in the same document, j <= i; a padding query (segment -1)
      // sees itself only (its output is unused; a fully masked row would be NaN).
      auto index = at::arange(n, segments.options());
      auto same =
          segments.unsqueeze(2).eq(segments.unsqueeze(1)).logical_and(segments.unsqueeze(2).ge(0));
      auto visible = same.logical_and(index.view({1, n, 1}).ge(index.view({1, 1, n})));
      visible.logical_or_(at::eye(n, visible.options()).unsqueeze(0));
      document_mask_ = visible.unsqueeze(1);  // (B, 1, T, T)
    }
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(t.q.size(3)));
  // GQA: the CPU kernels read the shared heads themselves (enable_gqa); on CUDA, where fp32 or a
  // mask selects the memory-efficient kernel (no enable_gqa: it would fall back to the math path),
  // K/V are repeated, as model/attention.cpp does.
  if (single_document_rows_ == 1) {
    const bool repeat = group > 1 && t.q.is_cuda();
    return at::scaled_dot_product_attention(
        t.q, repeat ? t.k.repeat_interleave(group, 1) : t.k,
        repeat ? t.v.repeat_interleave(group, 1) : t.v, {}, /*dropout_p=*/0.0,
        /*is_causal=*/true, scale, /*enable_gqa=*/group > 1 && !repeat);
  }
  if (document_mask_.defined()) {
    auto out = at::scaled_dot_product_attention(t.q, t.k, t.v, document_mask_, /*dropout_p=*/0.0,
                                                /*is_causal=*/false, scale,
                                                /*enable_gqa=*/group > 1);
    // A padding query reads nothing, as in the retention path: its output is zero.
    return out * segments_.to(out.device()).ge(0).view({b, 1, n, 1}).to(out.scalar_type());
  }
  auto log_beta = at::zeros({b, hk, n}, t.k.options().dtype(at::kFloat));
  return retention_attention(t.q, t.k, t.v, log_beta, t.positions, segments_);
}

std::vector<at::Tensor> GatedAttentionHook::layer_outputs(int64_t layer) {
  if (gates_ == nullptr || layer >= static_cast<int64_t>(log_betas_.size())) return {};
  return {log_betas_[layer]};
}

void GatedAttentionHook::set_layer_outputs(int64_t layer, std::vector<at::Tensor> outputs) {
  if (gates_ != nullptr && !outputs.empty()) log_betas_[layer] = outputs[0];
}

}  // namespace retain
