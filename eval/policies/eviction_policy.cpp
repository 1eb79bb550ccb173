#include "eval/policies/eviction_policy.h"

#include "core/error.h"
#include "dist/collectives.h"
#include "eval/policies/policy_helpers.h"

namespace retain {

at::Tensor EvictionPolicy::token_statistic(const LayerTensors& t,
                                           const LearnedModules& /*learned*/) const {
  return at::zeros({t.k.size(0), t.k.size(1), t.k.size(2)}, t.k.options().dtype(at::kFloat));
}

void policy_helpers::check_kept_below_budget(const std::string& policy, const std::string& what,
                                             int64_t kept, int64_t budget,
                                             const std::string& option) {
  RETAIN_CHECK(kept < budget, "--policy ", policy, ": the entries it always keeps (", what, " = ",
               kept, ") must be below the budget (", budget, " per head); set them lower, e.g. ",
               policy, ":", option, "=", budget / 2);
}

at::Tensor policy_helpers::sum_over_heads(const at::Tensor& mass, const VoteContext& context) {
  auto sum = mass.sum(1, /*keepdim=*/true);
  if (context.tensor_parallel != nullptr) context.tensor_parallel->all_reduce_sum(sum);
  return sum.expand(mass.sizes());
}

}  // namespace retain
