#include "eval/cache/shared_votes.h"

namespace retain {

namespace {

bool same(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() && a.device() == b.device() &&
         at::equal(a, b);
}

}  // namespace

at::Tensor SharedVotes::find(const Inputs& in) const {
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    const Inputs& kept = it->inputs;
    // The cheap comparisons first: most misses differ in shape (another layer's window).
    if (same(kept.query_positions, in.query_positions) &&
        same(kept.entry_positions, in.entry_positions) && same(kept.keys, in.keys) &&
        same(kept.queries, in.queries)) {
      ++reused_;
      return it->mass;
    }
  }
  return {};
}

void SharedVotes::store(Inputs inputs, at::Tensor mass) {
  if (entries_.size() == kKept) entries_.erase(entries_.begin());
  entries_.push_back({std::move(inputs), std::move(mass)});
}

}  // namespace retain
