// The learned competitors, scored by a scorer trained with `retain train` (train.trainable locret
// or kvzap) on the same frozen model and data as the retention gates, and exported with
// `retain export` (checkpoints/scorer_file.h):
//   locret: each entry's predicted causal importance (Locret's retaining heads) when it is written;
//           every head keeps its top M and the last `window` positions (Locret's stabilizers);
//   kvzap:  each entry's predicted log importance (the same max attention, in log, from the
//           hidden state); top M per head and the last `window` positions (kvpress's DMSPress
//           sliding window), and with `threshold` the entries predicted below it go even under
//           the budget (KVzap's mode).
// Both methods keep recent tokens whatever their score, and both need it: a score is fixed when
// the entry is written, so nothing else favours the question being read or the tokens just
// generated; without the window the demo's base, at 5% of its prompt, lost them and wrote
// "?\nAnswer:" over and over (locret 3% of answers right, 20% with the window).
// A score never changes after the entry is written: the scorer sees the token's own q, k, v (or
// hidden state), nothing later.
#include <cmath>
#include <limits>

#include "eval/policies/policy_helpers.h"
#include "eval/policies/policy_registry.h"

namespace retain {

namespace {

class LearnedScore final : public EvictionPolicy {
 public:
  LearnedScore(int64_t window, double threshold) : window_(window), threshold_(threshold) {}
  std::unique_ptr<EvictionPolicy> clone() const override {
    return std::make_unique<LearnedScore>(*this);
  }
  at::Tensor token_statistic(const LayerTensors& t, const LearnedModules& learned) const override {
    return learned.scorer->score(t);
  }
  at::Tensor score(const ScoreContext& c) const override {
    if (window_ == 0) return c.stat;
    return at::where(c.positions >= c.seen - window_, at::full_like(c.stat, policy_helpers::kInf),
                     c.stat);
  }
  // The cache compares scores with log(threshold): kvzap's scores are log masses already.
  double threshold() const override { return threshold_; }
  bool static_decode() const override { return threshold_ == 0; }

 private:
  int64_t window_;
  double threshold_;
};

PolicyOption scorer_option(const std::string& kind) {
  return {"scorer", PolicyOption::Type::kFile, "required",
          "the exported scorer of a train.trainable: " + kind +
              " run (retain export; relative to --gates-dir)"};
}

PolicyOption recent_window_option(const std::string& what) {
  return {"window", PolicyOption::Type::kInteger, "min(32, M/2)",
          "recent positions always kept (" + what + "); 0: none"};
}

int64_t recent_window(const std::string& policy, const PolicyArgs& a, int64_t budget) {
  const int64_t window = a.integer("window", policy_helpers::default_recent_window(budget));
  if (window > 0) policy_helpers::check_kept_below_budget(policy, "window", window, budget);
  return window;
}

}  // namespace

PolicyRegistration locret_policy() {
  PolicyRegistration r;
  r.name = "locret";
  r.needs_scorer = true;
  r.keeps =
      "per head, the highest predicted causal importance (the most attention any later query "
      "pays the entry) from a retaining head trained with `retain train` (Locret)";
  r.options = {scorer_option("locret"), recent_window_option("Locret's stabilizers")};
  r.make = [](const PolicyArgs& a, int64_t budget) -> std::unique_ptr<EvictionPolicy> {
    return std::make_unique<LearnedScore>(recent_window("locret", a, budget), 0.0);
  };
  return r;
}

PolicyRegistration kvzap_policy() {
  PolicyRegistration r;
  r.name = "kvzap";
  r.needs_scorer = true;
  r.keeps =
      "per head, the highest predicted log importance (the most attention a later query pays "
      "the entry) from a scorer on the hidden state trained with `retain train` (KVzap-style); "
      "optionally a threshold";
  r.options = {scorer_option("kvzap"),
               recent_window_option("kvpress's DMSPress sliding window, 128 tokens there"),
               {"threshold",
                PolicyOption::Type::kReal,
                "off",
                "after every step, entries whose predicted importance is below it go even under "
                "the budget (kvpress's KVzap thresholds -3..-9 are log of this)",
                0,
                false,
                {},
                0,
                std::numeric_limits<double>::infinity()}};
  r.make = [](const PolicyArgs& a, int64_t budget) -> std::unique_ptr<EvictionPolicy> {
    return std::make_unique<LearnedScore>(recent_window("kvzap", a, budget),
                                          a.real("threshold", 0));
  };
  return r;
}

}  // namespace retain
