#include "gates/future_attention.h"

#include <ATen/core/grad_mode.h>

#include <cmath>
#include <limits>

#include "core/error.h"

namespace retain {

at::Tensor future_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& segments,
                            int64_t block) {
  RETAIN_CHECK(q.dim() == 4 && k.dim() == 4 && q.size(0) == k.size(0) && q.size(2) == k.size(2) &&
                   q.size(3) == k.size(3) && q.size(1) % k.size(1) == 0 &&
                   segments.sizes() == at::IntArrayRef({q.size(0), q.size(2)}),
               "future_attention: expected q (B, H, T, D), k (B, Hk, T, D) with Hk dividing H and "
               "segments (B, T), found ",
               q.sizes(), ", ", k.sizes(), " and ", segments.sizes());
  RETAIN_CHECK(block >= 1, "future_attention: block must be >= 1");
  at::NoGradGuard no_grad;
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), d = q.size(3), hk = k.size(1);
  const int64_t group = h / hk;
  const auto kf = k.to(at::kFloat).repeat_interleave(group, 1);  // (B, H, T, D)
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const auto key_index = at::arange(t, segments.options()).view({1, 1, 1, t});
  const auto key_segment = segments.view({b, 1, 1, t});
  at::Tensor out = at::zeros({b, h, t}, kf.options());
  for (int64_t start = 0; start < t; start += block) {
    const int64_t n = std::min(block, t - start);
    auto scores = at::matmul(q.narrow(2, start, n).to(at::kFloat), kf.transpose(-1, -2)) * scale;
    const auto query_index = at::arange(start, start + n, segments.options()).view({1, 1, n, 1});
    const auto query_segment = segments.narrow(1, start, n).view({b, 1, n, 1});
    // Query i sees key j <= i of its own document; a padding query sees nothing.
    const auto visible = (key_index <= query_index)
                             .logical_and(key_segment == query_segment)
                             .logical_and(query_segment >= 0);
    auto probs = at::softmax(scores.masked_fill(visible.logical_not(),
                                                -std::numeric_limits<float>::infinity()),
                             -1)
                     .nan_to_num(0);  // (B, H, n, T); a row that sees nothing is all zeros
    out = at::maximum(out, std::get<0>(probs.max(2)));
  }
  return std::get<0>(out.view({b, hk, group, t}).max(2));
}

}  // namespace retain
