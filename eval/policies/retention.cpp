// Learned retention (papers 001 and 003): each entry's gate gives log beta_j when it is written;
// the score (t + 1 - pos_j) log beta_j is the log of the attention weight retention leaves it at
// the next query's position t + 1. trimkv ranks per head, dbtrimkv once over all layers and heads
// of a sequence (per-head lengths vary).
#include <cmath>

#include "eval/policies/policy_registry.h"

namespace retain {

namespace {

// log(1 - exp(x)) for x < 0, accurate at both ends.
at::Tensor log1mexp(const at::Tensor& x) {
  return at::where(x > -M_LN2, at::log(-at::expm1(x)), at::log1p(-at::exp(x)));
}

class Retention final : public EvictionPolicy {
 public:
  Retention(int64_t horizon, double threshold, int64_t min_per_head)
      : horizon_(horizon), threshold_(threshold), min_per_head_(min_per_head) {}
  std::unique_ptr<EvictionPolicy> clone() const override {
    return std::make_unique<Retention>(*this);
  }
  at::Tensor token_statistic(const LayerTensors& t, const LearnedModules& learned) const override {
    return GateBank::local_heads(learned.gates->log_beta(t.layer, t.hidden), t);
  }
  at::Tensor score(const ScoreContext& c) const override {
    // The next query sits at position seen (= t + 1 for the last position t seen).
    auto score = (c.seen.to(at::kFloat) - c.positions.to(at::kFloat)) * c.stat;
    // Horizon n > 1: the expected attention mass over the next n steps.
    if (horizon_ > 1)
      score = score + log1mexp(c.stat * static_cast<double>(horizon_)) - log1mexp(c.stat);
    return score;
  }
  double threshold() const override { return threshold_; }
  int64_t min_per_head() const override { return min_per_head_; }
  // Threshold eviction depends on the data every step: decode stays eager.
  bool static_decode() const override { return threshold_ == 0; }

 private:
  int64_t horizon_;
  double threshold_;
  int64_t min_per_head_;
};

PolicyRegistration retention_policy(const std::string& name, bool global) {
  PolicyRegistration r;
  r.name = name;
  r.needs_gates = true;
  r.global = global;
  r.keeps = global ? "the same score, one global top over all layers and heads of a sequence "
                     "(DBTrimKV; per-head lengths vary)"
                   : "per head, the top (t + 1 - pos_j) log beta_j, t + 1 the next query's "
                     "position (TrimKV's learned retention)";
  r.options = {
      {"horizon", PolicyOption::Type::kInteger, "1",
       "n > 1 scores the expected attention mass over the next n steps: adds log(1 - beta^n) - "
       "log(1 - beta)",
       1},
      {"threshold", PolicyOption::Type::kReal, "off",
       "after every step, entries whose retention beta^(t+1-pos) fell below it go even under the "
       "budget (the budget still caps the cache)"},
      {"min_per_head", PolicyOption::Type::kInteger, "0",
       global ? "entries each head keeps whatever the global ranking (or threshold) says"
              : "entries each head keeps whatever the threshold says"},
      {"gates", PolicyOption::Type::kFile, "--gates",
       "this policy's own gate file, so one sweep compares gates trained differently (relative "
       "to --gates-dir)"}};
  r.make = [](const PolicyArgs& a, int64_t) -> std::unique_ptr<EvictionPolicy> {
    return std::make_unique<Retention>(a.integer("horizon", 1), a.real("threshold", 0),
                                       a.integer("min_per_head", 0));
  };
  return r;
}

}  // namespace

PolicyRegistration trimkv_policy() { return retention_policy("trimkv", /*global=*/false); }
PolicyRegistration dbtrimkv_policy() { return retention_policy("dbtrimkv", /*global=*/true); }

}  // namespace retain
