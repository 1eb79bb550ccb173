// Policies scored by the attention queries pay to the cached entries: H2O's heavy hitters,
// paper 000's layer-wide importance, SnapKV's and SAGE-KV's one-time selection of the prompt.
#include <limits>

#include "eval/policies/policy_helpers.h"
#include "eval/policies/policy_registry.h"

namespace retain {

namespace {

using policy_helpers::kInf;

// The last `window` positions always stay; the rest rank by their votes.
at::Tensor keep_recent(const ScoreContext& c, int64_t window) {
  return at::where(c.positions >= c.seen - window, at::full_like(c.stat, kInf), c.stat);
}

class HeavyHitters final : public EvictionPolicy {
 public:
  explicit HeavyHitters(int64_t window) : window_(window) {}
  std::unique_ptr<EvictionPolicy> clone() const override {
    return std::make_unique<HeavyHitters>(*this);
  }
  Votes votes() const override { return Votes::kAccumulate; }
  at::Tensor score(const ScoreContext& c) const override { return keep_recent(c, window_); }

 private:
  int64_t window_;
};

class Importance final : public EvictionPolicy {
 public:
  std::unique_ptr<EvictionPolicy> clone() const override {
    return std::make_unique<Importance>(*this);
  }
  Votes votes() const override { return Votes::kAccumulate; }
  at::Tensor shape_votes(const at::Tensor& mass, const VoteContext& c) const override {
    return policy_helpers::sum_over_heads(mass, c);
  }
  at::Tensor score(const ScoreContext& c) const override { return c.stat; }
};

class SnapKV final : public EvictionPolicy {
 public:
  SnapKV(int64_t window, int64_t kernel, bool average)
      : window_(window), kernel_(kernel), average_(average) {}
  std::unique_ptr<EvictionPolicy> clone() const override { return std::make_unique<SnapKV>(*this); }
  Votes votes() const override { return Votes::kObservationWindow; }
  int64_t voters() const override { return window_; }
  // The votes pooled over `kernel` neighbouring keys: their max, or kvpress's average.
  at::Tensor shape_votes(const at::Tensor& mass, const VoteContext& c) const override {
    if (kernel_ <= 1) return mass;
    const int64_t b = mass.size(0), hk = mass.size(1), s = mass.size(2), k = kernel_;
    if (!average_)
      return at::max_pool1d(mass.reshape({b * hk, 1, s}), {k}, {1}, {k / 2}).view({b, hk, s});
    // kvpress: the window's own keys (kept anyway) lend nothing to their neighbours, and the
    // average divides by `kernel` at the edges too (zero padding counted).
    auto window_start = std::get<0>(
        c.voter_positions.masked_fill(c.voter_positions < 0, std::numeric_limits<int64_t>::max())
            .min(1));
    auto outside = mass.masked_fill(c.entry_positions >= window_start.view({b, 1, 1}), 0);
    return at::avg_pool1d(outside.reshape({b * hk, 1, s}), {k}, {1}, {k / 2},
                          /*ceil_mode=*/false, /*count_include_pad=*/true)
        .view({b, hk, s});
  }
  // Decoded tokens keep score 0 once they leave the window: the prompt's selection stays.
  at::Tensor score(const ScoreContext& c) const override { return keep_recent(c, window_); }

 private:
  int64_t window_, kernel_;
  bool average_;
};

class SageKV final : public EvictionPolicy {
 public:
  SageKV(int64_t sinks, int64_t window) : sinks_(sinks), window_(window) {}
  std::unique_ptr<EvictionPolicy> clone() const override { return std::make_unique<SageKV>(*this); }
  Votes votes() const override { return Votes::kObservationWindow; }
  int64_t voters() const override { return 1; }  // the prompt's last token alone
  at::Tensor score(const ScoreContext& c) const override {
    return at::where((c.positions >= c.seen - window_).logical_or(c.positions < sinks_),
                     at::full_like(c.stat, kInf), c.stat);
  }

 private:
  int64_t sinks_, window_;
};

}  // namespace

PolicyRegistration h2o_policy() {
  PolicyRegistration r;
  r.name = "h2o";
  r.keeps = "highest accumulated attention; the last `window` positions always (H2O)";
  r.options = {{"window", PolicyOption::Type::kInteger, "M/2: H2O's even split",
                "recent positions always kept"}};
  r.make = [](const PolicyArgs& a, int64_t budget) -> std::unique_ptr<EvictionPolicy> {
    const int64_t window = a.integer("window", budget / 2);
    policy_helpers::check_kept_below_budget("h2o", "window", window, budget);
    return std::make_unique<HeavyHitters>(window);
  };
  return r;
}

PolicyRegistration importance_policy() {
  PolicyRegistration r;
  r.name = "importance";
  r.keeps =
      "attention mass accumulated over all heads of the layer (one score per token, so every head "
      "keeps the same tokens; paper 000)";
  r.make = [](const PolicyArgs&, int64_t) -> std::unique_ptr<EvictionPolicy> {
    return std::make_unique<Importance>();
  };
  return r;
}

PolicyRegistration snapkv_policy() {
  PolicyRegistration r;
  r.name = "snapkv";
  r.keeps =
      "one-time selection: at each prefill chunk and at the prompt's last token, the attention of "
      "the last `window` queries seen (across chunk boundaries), summed over them and the group's "
      "heads and pooled over `kernel` keys, replaces the scores; the window always kept; decoded "
      "tokens leave first once out of the window";
  r.options = {
      {"window", PolicyOption::Type::kInteger, "min(32, M/2)",
       "observation window: the queries that vote, and the recent positions always kept"},
      {"kernel", PolicyOption::Type::kInteger, "7", "keys pooled (odd)", 1, /*odd=*/true},
      {"pool",
       PolicyOption::Type::kChoice,
       "",
       "`max` over `kernel` keys, or `avg`: kvpress's SnapKV (the average over `kernel` keys, "
       "zero padding counted, the window's own keys left out)",
       0,
       false,
       {"max", "avg"}}};
  r.make = [](const PolicyArgs& a, int64_t budget) -> std::unique_ptr<EvictionPolicy> {
    const int64_t window = a.integer("window", policy_helpers::default_recent_window(budget));
    policy_helpers::check_kept_below_budget("snapkv", "window", window, budget);
    return std::make_unique<SnapKV>(window, a.integer("kernel", 7), a.text("pool", "max") == "avg");
  };
  return r;
}

PolicyRegistration sagekv_policy() {
  PolicyRegistration r;
  r.name = "sagekv";
  r.keeps =
      "one-time top-k by the last prompt token's attention (the vote runs inside that token's "
      "step, before the cut), plus `sinks` and the recent `window` (paper 002)";
  r.options = {
      {"sinks", PolicyOption::Type::kInteger, "min(4, M/4)", "first tokens always kept"},
      {"window", PolicyOption::Type::kInteger, "min(32, M/2)", "recent positions always kept"}};
  r.make = [](const PolicyArgs& a, int64_t budget) -> std::unique_ptr<EvictionPolicy> {
    const int64_t sinks = a.integer("sinks", policy_helpers::default_sinks(budget));
    const int64_t window = a.integer("window", policy_helpers::default_recent_window(budget));
    policy_helpers::check_kept_below_budget("sagekv", "sinks + window", sinks + window, budget);
    return std::make_unique<SageKV>(sinks, window);
  };
  return r;
}

}  // namespace retain
