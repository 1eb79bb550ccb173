#include "eval/cache/eviction_planner.h"

namespace retain {

std::shared_ptr<const EvictionPlanner> make_eviction_planner(const PolicySpec& spec,
                                                             const EvictionPolicy& policy) {
  auto planner =
      spec.global() ? make_global_planner()
                    : make_per_head_planner(spec.allocation.kind == BudgetAllocation::Kind::kAdaKV);
  if (policy.threshold() > 0)
    planner = make_threshold_planner(std::move(planner), policy.threshold(), policy.min_per_head());
  return planner;
}

}  // namespace retain
