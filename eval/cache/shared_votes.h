// The attention mass one cache's queries cast during a shared context read
// (eval/shared_context_cache.h), kept for the other caches that receive the same step. There
// every cache (one per policy) holds the same slots and sees the same queries, so the mass before
// each policy shapes it is the same too: H2O keeps it per head, importance sums it over heads,
// and one sweep with both computes it once. The quadratic part of a long prompt's votes is this
// mass, so a sweep of h2o and importance at two budgets casts one mass a layer where it cast four
// (with the causal blocks of query_state.cpp, a RULER 4k keep-mode prompt of both policies takes
// 31 s on 2 cores where it took ~95 s: docs/evaluation.md).
//
// A stored mass is reused only where the queries, their positions, the keys and the slots'
// positions are equal to those it was cast with (compared exactly, a few MB against the
// quadratic work saved), so a reuse gives what computing it would give.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace retain {

class SharedVotes {
 public:
  // The votes' inputs: queries (B, H, V, D) at positions (B, V) on keys (B, Hk, S, D) at slot
  // positions (B, Hk, S).
  struct Inputs {
    at::Tensor queries, query_positions, keys, entry_positions;
  };
  // The mass (B, Hk, S) cast by `inputs`, if stored; undefined otherwise.
  at::Tensor find(const Inputs& inputs) const;
  // Keeps `mass` (not copied: nothing writes to it afterwards) for the caches that follow. The
  // latest few are kept: the caches vote layer by layer, each layer once or twice (all queries,
  // an observation window).
  void store(Inputs inputs, at::Tensor mass);
  // How many finds returned a stored mass.
  int64_t reused() const { return reused_; }

 private:
  static constexpr size_t kKept = 4;
  struct Entry {
    Inputs inputs;
    at::Tensor mass;
  };
  std::vector<Entry> entries_;  // oldest first
  mutable int64_t reused_ = 0;
};

}  // namespace retain
