// Expected Attention (Devoto et al., 2025; kvpress's ExpectedAttentionPress): the attention a
// future query is expected to pay each entry, from the statistics of the queries seen. With the
// pre-RoPE queries' mean mu and covariance S, and R-bar the RoPE rotation averaged over the next
// `n_future` positions, a future query is modelled as q ~ N(R-bar mu, R-bar S R-bar^T); then
//   E[exp(q.k / sqrt(D))] = exp(k.mu' / sqrt(D) + k^T S' k / (2 D)),
// softmaxed over the head's entries (sinks left out), averaged over the KV head's query group,
// and multiplied by ||v|| (an entry's output contribution scales with its value). The first
// `sinks` positions are kept and stay out of the statistics, as kvpress does.
//
// kvpress compresses once after the context's prefill; here the statistics run over every query
// seen (context, question, decoded tokens) and the scores are recomputed at each eviction, so
// `--question-mode keep` is kvpress's setting and the default `evict` streams the same rule.
#include <cmath>

#include "core/error.h"

#include "eval/policies/policy_helpers.h"
#include "eval/policies/policy_registry.h"
#include "model/rope.h"

namespace retain {

namespace {

using policy_helpers::kInf;

class ExpectedAttention final : public EvictionPolicy {
 public:
  ExpectedAttention(int64_t sinks, int64_t n_future, bool covariance, bool value_norm)
      : sinks_(sinks), n_future_(n_future), covariance_(covariance), value_norm_(value_norm) {}
  std::unique_ptr<EvictionPolicy> clone() const override {
    return std::make_unique<ExpectedAttention>(*this);
  }
  int64_t query_statistics_from() const override { return sinks_; }

  at::Tensor score(const ScoreContext& c) const override {
    RETAIN_CHECK(c.query_mean.defined() && c.model != nullptr,
                 "expected_attention: scored before any query was observed");
    const int64_t b = c.keys.size(0), hk = c.keys.size(1), s = c.keys.size(2), d = c.keys.size(3);
    const int64_t h = c.query_mean.size(1), group = h / hk;
    auto rotation = average_rotation(c);  // (B, D, D)
    // mu' = R mu and S' = R S R^T per query head.
    auto mean = at::matmul(c.query_mean.unsqueeze(-2), rotation.transpose(-1, -2).unsqueeze(1))
                    .squeeze(-2);  // (B, H, D)
    auto keys = c.keys.to(at::kFloat)
                    .unsqueeze(2)
                    .expand({b, hk, group, s, d})
                    .reshape({b, h, s, d});  // each query head's KV head
    const double root_d = std::sqrt(static_cast<double>(d));
    auto logits = at::matmul(keys, mean.unsqueeze(-1)).squeeze(-1) / root_d;  // (B, H, S)
    if (covariance_) {
      auto cov = at::matmul(at::matmul(rotation.unsqueeze(1), c.query_covariance),
                            rotation.transpose(-1, -2).unsqueeze(1));  // (B, H, D, D)
      logits = logits + (at::matmul(keys, cov) * keys).sum(-1) / (2.0 * static_cast<double>(d));
    }
    // The softmax runs over the live entries past the sinks, as kvpress's runs over its keys after
    // the first n_sink.
    auto positions = c.positions.unsqueeze(2).expand({b, hk, group, s}).reshape({b, h, s});
    auto ranked = positions >= sinks_;
    auto probs = at::softmax(logits.masked_fill(ranked.logical_not(), -kInf), -1).nan_to_num(0);
    auto score = probs.view({b, hk, group, s}).mean(2);  // (B, Hk, S)
    if (value_norm_) score = score * c.values.to(at::kFloat).norm(2, -1);
    return at::where((c.positions >= 0).logical_and(c.positions < sinks_),
                     at::full_like(score, kInf), score);
  }

 private:
  // The RoPE rotation averaged over positions seen .. seen + n_future - 1 of each sequence, as a
  // matrix (B, D, D): mean cos on the diagonal, mean sin times rotate_half off it (RoPE rotates
  // x into x cos + rotate_half(x) sin; yarn's attention scaling is in both).
  at::Tensor average_rotation(const ScoreContext& c) const {
    const int64_t b = c.seen.size(0), d = c.keys.size(3);
    auto positions = c.seen.view({b, 1}) + at::arange(n_future_, c.seen.options());
    const int64_t longest = positions.max().item<int64_t>() + 1;  // dynamic NTK reads it
    auto freqs = rope_frequencies(*c.model, longest, c.keys.device());
    auto [cos, sin] = rope_cos_sin(freqs, positions, at::kFloat);  // (B, n_future, D)
    auto cos_mean = cos.mean(1), sin_mean = sin.mean(1);           // (B, D)
    // rotate_half as a matrix: (P x)_i = -x_{i + D/2}, (P x)_{i + D/2} = x_i.
    auto half = at::eye(d / 2, cos_mean.options());
    auto rotate_half = at::zeros({d, d}, cos_mean.options());
    rotate_half.narrow(0, 0, d / 2).narrow(1, d / 2, d / 2).copy_(-half);
    rotate_half.narrow(0, d / 2, d / 2).narrow(1, 0, d / 2).copy_(half);
    return at::diag_embed(cos_mean) + sin_mean.unsqueeze(-1) * rotate_half;
  }

  int64_t sinks_, n_future_;
  bool covariance_, value_norm_;
};

}  // namespace

PolicyRegistration expected_attention_policy() {
  PolicyRegistration r;
  r.name = "expected_attention";
  r.keeps =
      "highest expected attention of future queries: softmax of k.mu'/sqrt(D) + k^T S' k/(2D) "
      "from the pre-RoPE queries' mean and covariance rotated by the RoPE averaged over the next "
      "`n_future` positions, averaged over the group's heads, times ||v||; the first `sinks` kept "
      "(kvpress's ExpectedAttentionPress)";
  r.options = {{"sinks", PolicyOption::Type::kInteger, "min(4, M/4)",
                "first positions always kept and left out of the query statistics"},
               {"n_future", PolicyOption::Type::kInteger, "512",
                "future positions the RoPE rotation is averaged over", 1},
               {"covariance",
                PolicyOption::Type::kChoice,
                "",
                "`on`: the k^T S' k / (2D) term; `off`: the mean query alone",
                0,
                false,
                {"on", "off"}},
               {"vnorm",
                PolicyOption::Type::kChoice,
                "",
                "`on`: scores times the value's L2 norm",
                0,
                false,
                {"on", "off"}}};
  r.make = [](const PolicyArgs& a, int64_t budget) -> std::unique_ptr<EvictionPolicy> {
    const int64_t sinks = a.integer("sinks", policy_helpers::default_sinks(budget));
    policy_helpers::check_kept_below_budget("expected_attention", "sinks", sinks, budget, "sinks");
    return std::make_unique<ExpectedAttention>(sinks, a.integer("n_future", 512),
                                               a.text("covariance", "on") == "on",
                                               a.text("vnorm", "on") == "on");
  };
  return r;
}

}  // namespace retain
