// K-norm (Devoto et al., 2024): keys with a low L2 norm draw the most attention, so the largest
// norms go first.
#include "eval/policies/policy_registry.h"

namespace retain {

namespace {

class KeyNorm final : public EvictionPolicy {
 public:
  std::unique_ptr<EvictionPolicy> clone() const override {
    return std::make_unique<KeyNorm>(*this);
  }
  at::Tensor token_statistic(const LayerTensors& t, const LearnedModules&) const override {
    return t.k.to(at::kFloat).norm(2, -1);
  }
  at::Tensor score(const ScoreContext& c) const override { return -c.stat; }
};

}  // namespace

PolicyRegistration knorm_policy() {
  PolicyRegistration r;
  r.name = "knorm";
  r.keeps = "the smallest key L2 norms";
  r.make = [](const PolicyArgs&, int64_t) -> std::unique_ptr<EvictionPolicy> {
    return std::make_unique<KeyNorm>();
  };
  return r;
}

}  // namespace retain
