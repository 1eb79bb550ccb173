// How the budgeted cache cuts back to its budget (eval/budgeted_cache.h), chosen once from the
// policy spec:
//   per-head  (alloc=uniform / pyramid): a head over its budget + trigger keeps its top entries;
//   pooled    (alloc=adakv): a layer over Hk (budget + trigger) keeps its top Hk budget over all
//             its heads, each head its best adakv floor first;
//   global    (dbtrimkv): a sequence over L Hk (budget + trigger) keeps its top L Hk budget over
//             every layer and head;
//   threshold (a policy with threshold > 0): at the end of each step, entries scoring below the
//             threshold go first, then the per-head or global cut.
// A planner holds no state: what it cuts and ranks comes in an EvictionScope.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "eval/cache/cache_storage.h"
#include "eval/cache/policy_rows.h"
#include "eval/cache/static_decode_counts.h"

namespace retain {

class Collectives;  // dist/collectives.h

struct EvictionScope {
  CacheStorage& storage;
  const PolicyRows& rows;
  const ModelConfig& model;      // this rank's shapes (a tensor-parallel slice of the KV heads)
  Collectives* tensor_parallel;  // null when alone (or in a group of one)
  // The policy's score of every slot of a layer (B, Hk, S): empty slots -inf, protected +inf.
  std::function<at::Tensor(int64_t layer)> scores;
};

class EvictionPlanner {
 public:
  virtual ~EvictionPlanner() = default;
  // Cuts whatever holds more than budget + trigger_extra back to budget + keep_extra.
  virtual void cut(const EvictionScope& scope, int64_t keep_extra, int64_t trigger_extra) const = 0;
  // The eager end of a step: what is over budget + buffer goes back to the budget.
  virtual void end_of_step(const EvictionScope& scope, int64_t buffer) const {
    cut(scope, 0, buffer);
  }
  // The prompt's last token reads at most budget + 1 entries per head, its own included: a
  // per-head planner cuts each layer once that token's entries are in (and the one-time policies
  // have voted with it); the global one cuts before the step, to L Hk budget, since a layer cannot
  // rank its entries against layers the step has not reached yet.
  virtual void before_generating_step(const EvictionScope& /*scope*/) const {}
  virtual void after_generating_append(const EvictionScope& /*scope*/, int64_t /*layer*/,
                                       int64_t /*tokens*/) const {}
  // Static decode, after a step: whether the host counts say the eager end of step would evict.
  virtual bool due(const StaticDecodeCounts& counts, const PolicyRows& rows,
                   const ModelConfig& model, int64_t buffer) const = 0;
};

std::shared_ptr<const EvictionPlanner> make_eviction_planner(const PolicySpec& spec,
                                                             const EvictionPolicy& policy);

// The planners by kind (eval/cache/*_planner.cpp).
std::shared_ptr<const EvictionPlanner> make_per_head_planner(bool pooled);
std::shared_ptr<const EvictionPlanner> make_global_planner();
std::shared_ptr<const EvictionPlanner> make_threshold_planner(
    std::shared_ptr<const EvictionPlanner> then, double threshold, int64_t min_per_head);

}  // namespace retain
