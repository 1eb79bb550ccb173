#include "eval/cache/query_state.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace retain {

void QueryState::observe(const PolicyRows& rows, const LayerTensors& t, bool window_frozen,
                         bool statistics_frozen) {
  Layer& l = layers_.at(static_cast<size_t>(t.layer));
  const EvictionPolicy& policy = rows.policy();
  if (policy.query_statistics_from() >= 0 && !statistics_frozen)
    add_statistics(l, rows.query_statistics_from(), t.q_before_rope, t.positions);
  if (policy.votes() != Votes::kNone) l.step_q = t.q;
  if (policy.votes() == Votes::kObservationWindow && !window_frozen) {
    // The observation window: the last `voters` queries seen, across chunk boundaries (the most
    // any group's policy takes). Decode steps never vote, so static decode leaves it alone.
    const int64_t w = rows.max_voters();
    auto q = l.recent_q.defined() ? at::cat({l.recent_q, t.q}, 2) : t.q;
    auto pos =
        l.recent_positions.defined() ? at::cat({l.recent_positions, t.positions}, 1) : t.positions;
    const int64_t keep = std::min(w, q.size(2));
    l.recent_q = q.narrow(2, q.size(2) - keep, keep).contiguous();
    l.recent_positions = pos.narrow(1, pos.size(1) - keep, keep).contiguous();
  }
}

void QueryState::add_statistics(Layer& l, const at::Tensor& from, const at::Tensor& q_before_rope,
                                const at::Tensor& positions) {
  // Chan et al.'s pairwise update: the step's own mean and squared deviations, merged with the
  // running ones. Stable in fp32 where sum(q q^T) - n mu mu^T would cancel (queries have a large
  // mean next to their spread), and the same as kvpress's two-pass covariance over one prefill.
  const int64_t b = q_before_rope.size(0), h = q_before_rope.size(1), d = q_before_rope.size(3);
  if (!l.count.defined()) {
    auto options = q_before_rope.options().dtype(at::kFloat);
    l.count = at::zeros({b}, options);
    l.mean = at::zeros({b, h, d}, options);
    l.m2 = at::zeros({b, h, d, d}, options);
  }
  auto q = q_before_rope.to(at::kFloat);
  // Padding (position -1) and the first positions (attention sinks) are left out.
  auto counted = (positions >= from.view({b, 1})).to(at::kFloat);  // (B, T)
  auto n_step = counted.sum(1);                                    // (B,)
  auto weight = counted.view({b, 1, -1, 1});
  auto mean_step = (q * weight).sum(2) / n_step.clamp_min(1).view({b, 1, 1});
  auto centered = (q - mean_step.unsqueeze(2)) * weight;
  auto m2_step = at::matmul(centered.transpose(-1, -2), centered);  // (B, H, D, D)
  auto n = l.count + n_step;
  auto delta = mean_step - l.mean;
  auto share = (n_step / n.clamp_min(1)).view({b, 1, 1});  // 0 where nothing is counted yet
  auto cross = (l.count * n_step / n.clamp_min(1)).view({b, 1, 1, 1});
  l.m2.add_(m2_step + delta.unsqueeze(-1) * delta.unsqueeze(-2) * cross);
  l.mean.add_(delta * share);
  l.count.copy_(n);
}

at::Tensor QueryState::query_covariance(int64_t layer) const {
  const Layer& l = at(layer);
  if (!l.count.defined()) return {};
  return l.m2 / l.count.clamp_min(1).view({-1, 1, 1, 1});
}

void QueryState::end_step() {
  for (auto& l : layers_) l.step_q = at::Tensor();
}

at::Tensor attention_vote_mass(const at::Tensor& all_q, const at::Tensor& q_pos,
                               const at::Tensor& keys_t, const at::Tensor& entry_positions,
                               int64_t block_bytes) {
  const int64_t b = all_q.size(0), hk = all_q.size(1), rows = all_q.size(2), d = all_q.size(3);
  const int64_t s = keys_t.size(3);
  // A slot a query may not read compares above its position: empty slots (position -1) become the
  // largest position, so one comparison masks both them and the query's future.
  auto k_pos = entry_positions.masked_fill(entry_positions < 0, std::numeric_limits<int64_t>::max())
                   .unsqueeze(-2);  // (B, Hk, 1, S)
  const int64_t block = std::max<int64_t>(64, block_bytes / std::max<int64_t>(1, b * hk * s * 4));
  const double sqrt_d = std::sqrt(static_cast<double>(d));
  constexpr float kInf = std::numeric_limits<float>::infinity();
  auto mass = at::zeros({b, hk, s}, all_q.options());
  // Slot i's 1-based index where some query of the block may read it, else 0 (several blocks).
  at::Tensor readable_index;
  if (rows > block)
    readable_index = at::arange(1, s + 1, entry_positions.options()).view({1, 1, s});
  for (int64_t r = 0; r < rows; r += block) {
    const int64_t n = std::min(block, rows - r);
    auto block_pos = q_pos.narrow(2, r, n);
    // A prompt's votes are causal: a block of queries (consecutive positions of one head, but
    // where it straddles two heads) reads no slot past the last that holds a position up to its
    // latest, so the slots after it are left out (about half the work of a prompt's votes). They
    // would get probability 0 exactly: the result is what whole rows give, to rounding (at least
    // 64 slots stay, so the softmax's sums stay vectorised). Decode steps vote in one block: no
    // host read.
    int64_t reach = s;
    if (readable_index.defined()) {
      const int64_t latest = block_pos.max().item<int64_t>();
      reach = (readable_index * (k_pos.squeeze(-2) <= latest)).max().item<int64_t>();
      reach = std::max(reach, std::min<int64_t>(s, 64));
    }
    auto scores = at::matmul(all_q.narrow(2, r, n), keys_t.narrow(3, 0, reach)).div_(sqrt_d);
    scores.masked_fill_(k_pos.narrow(3, 0, reach) > block_pos, -kInf);
    // A query that may read nothing (padding) gives NaN: it votes nothing.
    auto probs = at::softmax(scores, -1).nan_to_num_(0);
    mass.narrow(2, 0, reach).add_(probs.sum(2));
  }
  return mass;
}

at::Tensor QueryState::votes(const PolicyRows& rows, const CacheLayer& l, const at::Tensor& q,
                             const at::Tensor& q_positions, int64_t s, bool window,
                             Collectives* tensor_parallel, int64_t identical,
                             SharedVotes* shared) const {
  // During a shared read the rows come in runs of `identical` equal ones (one run per input row,
  // a row per budget): each group (the rows of one budget) votes with one row of each run it has
  // rows in, and its rows take their run's votes.
  const bool runs = identical > 1 && q.size(0) % identical == 0;
  return rows.by_group([&](const EvictionPolicy& policy, const at::Tensor& group) {
    at::Tensor voting = group;  // the rows that vote (undefined: every row)
    at::Tensor back;            // each of the group's rows: its voting row (undefined: itself)
    if (runs) {
      auto group_rows = group.defined() ? group.to(at::kCPU)
                                        : at::arange(q.size(0), at::TensorOptions(at::kLong));
      // The group's rows are in order, so their runs are too.
      auto [run_of_row, inverse, counts] =
          at::unique_consecutive(at::div(group_rows, identical, "floor"), /*return_inverse=*/true);
      voting = (run_of_row * identical).to(q.device());
      back = inverse.to(q.device());
    }
    auto group_q = select_rows(q, voting), group_q_positions = select_rows(q_positions, voting);
    auto keys = select_rows(l.keys.narrow(2, 0, s), voting);
    auto entry_positions = select_rows(l.positions.narrow(2, 0, s), voting);
    if (window) {  // this group's observation window: its policy's last voters() queries
      const int64_t v = std::min(policy.voters(), group_q.size(2));
      group_q = group_q.narrow(2, group_q.size(2) - v, v);
      group_q_positions = group_q_positions.narrow(1, group_q_positions.size(1) - v, v);
    }
    const int64_t b = group_q.size(0), h = group_q.size(1), voters = group_q.size(2),
                  d = group_q.size(3);
    const int64_t hk = l.keys.size(1), per_group = h / hk;
    // A window of no query (snapkv's min(32, M/2) at budget 1) casts no vote.
    if (voters == 0) return at::zeros({back.defined() ? back.size(0) : b, hk, s}, l.stat.options());
    // Another group or cache of a shared read may have cast these votes already.
    SharedVotes::Inputs inputs{group_q, group_q_positions, keys, entry_positions};
    at::Tensor mass = shared != nullptr ? shared->find(inputs) : at::Tensor();
    if (!mass.defined()) {
      auto all_q = group_q.to(at::kFloat).reshape({b, hk, per_group * voters, d});
      auto all_q_pos = group_q_positions.view({b, 1, 1, voters})
                           .repeat({1, 1, per_group, 1})
                           .view({b, 1, per_group * voters, 1});
      // The scores of a block of voting queries at a time: a 4k prompt's votes are 12k query
      // rows over 4k entries per sequence, 600 MB in fp32 at once, and the passes over them
      // (mask, softmax, sum) then run from memory instead of the CPU's cache (blocks of ~16 MiB;
      // on a GPU ~256 MiB, so a long prompt's votes neither exhaust its memory nor split into
      // many launches).
      const int64_t block_bytes = q.is_cuda() ? int64_t{256} << 20 : int64_t{16} << 20;
      mass = attention_vote_mass(all_q, all_q_pos, keys.to(at::kFloat).transpose(-1, -2),
                                 entry_positions, block_bytes);
      if (shared != nullptr) shared->store(std::move(inputs), mass);
    }
    auto shaped = policy.shape_votes(mass, {entry_positions, group_q_positions, tensor_parallel});
    return back.defined() ? shaped.index_select(0, back) : shaped;
  });
}

void QueryState::deepen() {
  for (auto& l : layers_)
    if (l.count.defined()) {
      l.count = l.count.clone();
      l.mean = l.mean.clone();
      l.m2 = l.m2.clone();
    }
}

bool QueryState::load_row(int64_t row, int64_t batch, const QueryState& source,
                          int64_t source_row) {
  bool allocated = false;
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& l = layers_[i];
    const Layer& s = source.layers_.at(i);
    if (!s.count.defined()) continue;
    if (!l.count.defined()) {
      l.count = at::zeros({batch}, s.count.options());
      l.mean = at::zeros({batch, s.mean.size(1), s.mean.size(2)}, s.mean.options());
      l.m2 = at::zeros({batch, s.m2.size(1), s.m2.size(2), s.m2.size(3)}, s.m2.options());
      allocated = true;
    }
    l.count.narrow(0, row, 1).copy_(s.count.narrow(0, source_row, 1));
    l.mean.narrow(0, row, 1).copy_(s.mean.narrow(0, source_row, 1));
    l.m2.narrow(0, row, 1).copy_(s.m2.narrow(0, source_row, 1));
  }
  return allocated;
}

void QueryState::clear_row(int64_t row) {
  for (auto& l : layers_)
    if (l.count.defined()) {
      l.count.narrow(0, row, 1).zero_();
      l.mean.narrow(0, row, 1).zero_();
      l.m2.narrow(0, row, 1).zero_();
    }
}

}  // namespace retain
