// What several policy files share: the defaults that depend on the budget and the check that the
// entries a policy always keeps leave it room to choose.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "eval/policies/eviction_policy.h"

namespace retain::policy_helpers {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Attention sinks kept by streaming and sagekv when not given: min(4, M/4).
inline int64_t default_sinks(int64_t budget) { return std::min<int64_t>(4, budget / 4); }
// The recent window of snapkv and sagekv when not given: min(32, M/2).
inline int64_t default_recent_window(int64_t budget) { return std::min<int64_t>(32, budget / 2); }

// Entries a policy always keeps (`what` = `kept` of them) must leave room for the ones it chooses;
// the error suggests lowering `option`.
void check_kept_below_budget(const std::string& policy, const std::string& what, int64_t kept,
                             int64_t budget, const std::string& option = "window");

// Votes summed over every KV head of the layer, so every head keeps the same tokens: (B, Hk, S).
// Under tensor parallelism the sum runs over the group too (every head holds the same positions
// in the same slots, on every rank, so the slots line up).
at::Tensor sum_over_heads(const at::Tensor& mass, const VoteContext& context);

}  // namespace retain::policy_helpers
