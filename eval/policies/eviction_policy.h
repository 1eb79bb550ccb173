// An eviction policy decides which entries a budgeted KV cache (eval/budgeted_cache.h) keeps; the
// cache owns storage, compaction and the budget. A policy says
//   - the statistic it records for each new entry (log beta, key norm, a seeded random score,
//     or 0),
//   - whether queries vote on the entries with their attention, and which queries,
//   - how it scores the live entries from those (higher scores stay),
// and its registration (policy_registry.h) declares its options and whether it ranks per head or
// globally. A new policy is one file in this folder and one line in policy_registry.cpp.
//
// Shapes: B sequences, Hk KV heads, H query heads, T new tokens, S live slots, V voting queries.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>

#include "gates/gate_bank.h"
#include "gates/scorer_bank.h"
#include "model/layer_hook.h"
#include "model/model_config.h"

namespace retain {

class Collectives;  // dist/collectives.h

// Which queries put attention mass on the cached entries, and what the mass does.
enum class Votes {
  kNone,         // the recorded statistic alone scores an entry
  kAccumulate,   // every step's queries add the mass they give each entry (h2o, importance)
  kLatestQuery,  // every step, the last query's mass replaces every entry's score (tova)
  // The last `voters()` queries seen, across chunk boundaries, replace every score at each prompt
  // chunk and at the prompt's last token, never while decoding: a one-time selection of the prompt
  // (snapkv, sagekv).
  kObservationWindow,
};

// What a vote's mass is shaped with: each live slot's position (B, Hk, S), -1 when empty, and the
// voting queries' positions (B, V).
struct VoteContext {
  at::Tensor entry_positions;
  at::Tensor voter_positions;
  // Under tensor parallelism, the group holding the layer's other heads (null otherwise).
  Collectives* tensor_parallel = nullptr;
};

// What a score is computed from, for the live slots of one layer.
struct ScoreContext {
  at::Tensor positions;     // (B, Hk, S) int64, -1 = empty
  at::Tensor stat;          // (B, Hk, S) fp32: the recorded statistic, votes included
  at::Tensor seen;          // (B, 1, 1) int64: each sequence's next query position (t + 1)
  at::Tensor keys, values;  // (B, Hk, S, D): the slots' keys (post-RoPE) and values
  // Only for a policy whose query_statistics_from() >= 0: the mean (B, H, D) and population
  // covariance (B, H, D, D) in fp32 of the pre-RoPE queries seen at positions >= that.
  at::Tensor query_mean, query_covariance;
  const ModelConfig* model = nullptr;  // the model's shapes and RoPE
};

// The learned modules a policy may read: retention gates (trimkv, dbtrimkv) or a learned scorer
// (locret, kvzap). Both must outlive the cache.
struct LearnedModules {
  const GateBank* gates = nullptr;
  const ScorerBank* scorer = nullptr;
  // From gates alone, as most callers have them.
  LearnedModules(const GateBank* g = nullptr, const ScorerBank* s = nullptr)  // NOLINT
      : gates(g), scorer(s) {}
};

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  virtual std::unique_ptr<EvictionPolicy> clone() const = 0;

  // The statistic of the step's new entries, (B, Hk, T) fp32. `learned` holds the gates or the
  // scorer of the policies whose registration says they need them.
  virtual at::Tensor token_statistic(const LayerTensors& tensors,
                                     const LearnedModules& learned) const;

  virtual Votes votes() const { return Votes::kNone; }
  // kObservationWindow: how many of the latest queries vote.
  virtual int64_t voters() const { return 1; }
  // The votes (B, Hk, S), summed over the voting queries and each KV head's query group, as the
  // policy records them (summed over heads, pooled over neighbouring keys...).
  virtual at::Tensor shape_votes(const at::Tensor& mass, const VoteContext& /*context*/) const {
    return mass;
  }

  // Every slot's score (B, Hk, S); the cache masks empty slots and protected ones afterwards.
  virtual at::Tensor score(const ScoreContext& context) const = 0;

  // Threshold eviction (0: off): after every step, entries whose score fell below log(threshold)
  // go even under the budget.
  virtual double threshold() const { return 0; }
  // Entries each head keeps whatever the global ranking or the threshold says.
  virtual int64_t min_per_head() const { return 0; }
  // >= 0: the cache keeps the running mean and covariance of every pre-RoPE query seen at positions
  // >= this (decoded ones included) and hands them to score() (expected attention).
  virtual int64_t query_statistics_from() const { return -1; }
  // Whether decode steps may replay as a CUDA graph: not when the policy computes on the host or
  // evicts data-dependently every step.
  virtual bool static_decode() const { return true; }
};

}  // namespace retain
