// What the budgeted cache keeps of the queries (eval/budgeted_cache.h), per layer: this step's
// queries (policies that take attention votes), the observation window (the last queries seen,
// across chunk boundaries), and the running mean and covariance of the pre-RoPE queries
// (expected attention); and the votes the queries cast on the cached entries.
//
// Shapes: B sequences, H query heads, Hk KV heads, T new tokens, V voting queries, S slots, D head
// dim.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "eval/cache/cache_storage.h"
#include "eval/cache/policy_rows.h"
#include "eval/cache/shared_votes.h"

namespace retain {

class Collectives;  // dist/collectives.h

// The attention mass of queries all_q (B, Hk, R, D) (R: each KV head's query heads times the
// voters, head-major) at positions q_pos (B, 1, R, 1) on keys_t (B, Hk, D, S) at slot positions
// (B, Hk, S), -1 where empty, summed over the R rows (B, Hk, S): fp32 scores over the slots each
// query may read (position <= its own), as the model computes them; a query that may read none
// (padding, position -1) votes nothing. Scores are materialised about `block_bytes` at a time.
at::Tensor attention_vote_mass(const at::Tensor& all_q, const at::Tensor& q_pos,
                               const at::Tensor& keys_t, const at::Tensor& entry_positions,
                               int64_t block_bytes);

class QueryState {
 public:
  explicit QueryState(int64_t num_layers) : layers_(static_cast<size_t>(num_layers)) {}

  // Records what the policy reads of this step's queries: q (B, H, T, D) at positions (B, T) and
  // the pre-RoPE queries. `window_frozen`: static decode or keep mode, where the observation
  // window stays as it is; `statistics_frozen`: keep mode, where the statistics do too.
  void observe(const PolicyRows& rows, const LayerTensors& t, bool window_frozen,
               bool statistics_frozen);
  // This step's queries (B, H, T, D), for policies that vote.
  const at::Tensor& step_queries(int64_t layer) const { return at(layer).step_q; }
  // The observation window: queries (B, H, V, D) and positions (B, V); undefined before any.
  const at::Tensor& window_queries(int64_t layer) const { return at(layer).recent_q; }
  const at::Tensor& window_positions(int64_t layer) const { return at(layer).recent_positions; }
  // The pre-RoPE queries' mean (B, H, D) and population covariance (B, H, D, D), fp32; undefined
  // when the policy keeps no statistics.
  at::Tensor query_mean(int64_t layer) const { return at(layer).mean; }
  at::Tensor query_covariance(int64_t layer) const;
  // Forgets the step's queries (after its eviction).
  void end_step();

  // The votes of queries q (B, H, V, D) at q_positions (B, V) on the first `s` slots of `layer`:
  // their attention mass summed over the voters and each KV head's query heads, as each group's
  // policy shapes it (B, Hk, S). `window`: q is the observation window, of which each group's
  // policy takes its last voters(). `identical`: the sequences come in runs of this many with
  // identical queries and slots (a shared context read), voted once per run and group.
  // `shared`: where another group or cache of a shared read stored the same votes' mass, it is
  // taken from there (and stored there when cast here). The scores are materialised
  // a block of voting queries at a time.
  at::Tensor votes(const PolicyRows& rows, const CacheLayer& layer, const at::Tensor& q,
                   const at::Tensor& q_positions, int64_t s, bool window,
                   Collectives* tensor_parallel, int64_t identical = 1,
                   SharedVotes* shared = nullptr) const;

  // After a copy: owns the statistics, which steps update in place.
  void deepen();

  // Continuous batching (serve/slot_batch.h), between steps: row `row` of a cache of `batch` rows
  // takes `source`'s row `source_row` of the query statistics (allocated on the first load: then
  // it returns true), or forgets its own. The observation window does not move: only prompt
  // chunks vote with it, and rows that have moved decode.
  bool load_row(int64_t row, int64_t batch, const QueryState& source, int64_t source_row);
  void clear_row(int64_t row);

 private:
  struct Layer {
    at::Tensor step_q;
    at::Tensor recent_q, recent_positions;
    // Per sequence the number of pre-RoPE queries counted (B,), their mean (B, H, D) and the sum
    // of their squared deviations (B, H, D, D), updated in place (a captured decode step updates
    // them).
    at::Tensor count, mean, m2;
  };
  const Layer& at(int64_t layer) const { return layers_.at(static_cast<size_t>(layer)); }
  void add_statistics(Layer& l, const at::Tensor& from, const at::Tensor& q_before_rope,
                      const at::Tensor& positions);

  std::vector<Layer> layers_;
};

}  // namespace retain
