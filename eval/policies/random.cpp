// Random eviction: a seeded score drawn on the host when an entry is written (the floor every
// informed policy must beat).
#include <ATen/CPUGeneratorImpl.h>

#include "eval/policies/policy_registry.h"

namespace retain {

namespace {

class RandomScores final : public EvictionPolicy {
 public:
  explicit RandomScores(uint64_t seed)
      : generator_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}
  std::unique_ptr<EvictionPolicy> clone() const override {
    auto copy = std::make_unique<RandomScores>(*this);
    copy->generator_ = generator_.clone();  // the copy continues the same stream independently
    return copy;
  }
  at::Tensor token_statistic(const LayerTensors& t, const GateBank*) override {
    return at::rand({t.k.size(0), t.k.size(1), t.k.size(2)}, generator_).to(t.k.device());
  }
  at::Tensor score(const ScoreContext& c) const override { return c.stat; }
  bool static_decode() const override { return false; }  // draws on the host every step

 private:
  at::Generator generator_;
};

}  // namespace

PolicyRegistration random_policy() {
  PolicyRegistration r;
  r.name = "random";
  r.keeps = "a seeded random score drawn at insertion";
  r.options = {{"seed", PolicyOption::Type::kInteger, "0", "the draw's seed"}};
  r.make = [](const PolicyArgs& a, int64_t) -> std::unique_ptr<EvictionPolicy> {
    return std::make_unique<RandomScores>(static_cast<uint64_t>(a.integer("seed", 0)));
  };
  return r;
}

}  // namespace retain
