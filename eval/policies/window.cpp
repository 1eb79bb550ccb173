// Policies that rank by position alone: `full` (no eviction: the plain cache) and StreamingLLM's
// attention sinks plus a recent window.
#include "core/error.h"
#include "eval/policies/policy_helpers.h"
#include "eval/policies/policy_registry.h"

namespace retain {

namespace {

using policy_helpers::kInf;

class Streaming final : public EvictionPolicy {
 public:
  Streaming(int64_t sinks, int64_t window) : sinks_(sinks), window_(window) {}
  std::unique_ptr<EvictionPolicy> clone() const override {
    return std::make_unique<Streaming>(*this);
  }
  // Sinks first, then the last `window` positions by recency; older ones go.
  at::Tensor score(const ScoreContext& c) const override {
    auto posf = c.positions.to(at::kFloat);
    return at::where(c.positions < sinks_, at::full_like(posf, kInf),
                     at::where(c.positions >= c.seen - window_, posf, at::full_like(posf, -kInf)));
  }

 private:
  int64_t sinks_, window_;
};

}  // namespace

PolicyRegistration full_policy() {
  PolicyRegistration r;
  r.name = "full";
  r.keeps = "everything (the plain cache)";
  r.budgeted = false;
  return r;
}

PolicyRegistration streaming_policy() {
  PolicyRegistration r;
  r.name = "streaming";
  r.keeps = "`sinks` first tokens + the last `window` positions (StreamingLLM)";
  r.options = {{"sinks", PolicyOption::Type::kInteger, "min(4, M/4)", "first tokens always kept"},
               {"window", PolicyOption::Type::kInteger, "M - sinks", "recent positions kept"}};
  r.make = [](const PolicyArgs& a, int64_t budget) -> std::unique_ptr<EvictionPolicy> {
    const int64_t sinks = a.integer("sinks", policy_helpers::default_sinks(budget));
    const int64_t window = a.integer("window", budget - sinks);  // fill the budget
    // Streaming keeps nothing but sinks + window, so those only have to fit.
    RETAIN_CHECK(sinks + window <= budget, "--policy streaming: sinks + window (", sinks + window,
                 ") exceed the budget (", budget, " per head)");
    return std::make_unique<Streaming>(sinks, window);
  };
  return r;
}

}  // namespace retain
