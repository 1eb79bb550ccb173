// TOVA (Oren et al., "Transformers are Multi-State RNNs", 2024): after every step, the entries the
// CURRENT query attends to least go. The official implementation (and kvpress's TOVAPress) ranks
// by the last query's attention averaged over the layer's heads, so every head keeps the same
// tokens; the sum used here ranks the same. Unlike h2o nothing accumulates: each step's vote
// replaces the last one, and nothing is protected (the newest token usually attends to itself
// most). kvpress additionally always keeps the last prompt token; retain lets it compete.
#include "eval/policies/policy_helpers.h"
#include "eval/policies/policy_registry.h"

namespace retain {

namespace {

class Tova final : public EvictionPolicy {
 public:
  std::unique_ptr<EvictionPolicy> clone() const override { return std::make_unique<Tova>(*this); }
  Votes votes() const override { return Votes::kLatestQuery; }
  at::Tensor shape_votes(const at::Tensor& mass, const VoteContext& c) const override {
    return policy_helpers::sum_over_heads(mass, c);
  }
  at::Tensor score(const ScoreContext& c) const override { return c.stat; }
};

}  // namespace

PolicyRegistration tova_policy() {
  PolicyRegistration r;
  r.name = "tova";
  r.keeps =
      "highest attention from the latest query, summed over the layer's heads (every head keeps "
      "the same tokens); each step's vote replaces the last (TOVA)";
  r.make = [](const PolicyArgs&, int64_t) -> std::unique_ptr<EvictionPolicy> {
    return std::make_unique<Tova>();
  };
  return r;
}

}  // namespace retain
