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

at::Tensor QueryState::votes(const PolicyRows& rows, const CacheLayer& l, const at::Tensor& q,
                             const at::Tensor& q_positions, int64_t s, bool window,
                             Collectives* tensor_parallel, int64_t identical) const {
  // As the model computes it: fp32 scores over the live entries, masked by position.
  return rows.by_group([&](const EvictionPolicy& policy, const at::Tensor& group) {
    auto group_q = select_rows(q, group), group_q_positions = select_rows(q_positions, group);
    auto keys = select_rows(l.keys.narrow(2, 0, s), group);
    auto entry_positions = select_rows(l.positions.narrow(2, 0, s), group);
    // Runs of identical rows (one policy holds them all): one row of each votes for the run.
    const int64_t run =
        !group.defined() && identical > 1 && q.size(0) % identical == 0 ? identical : 1;
    if (run > 1) {
      auto first = [run](const at::Tensor& t) { return t.slice(0, 0, t.size(0), run); };
      group_q = first(group_q);
      group_q_positions = first(group_q_positions);
      keys = first(keys);
      entry_positions = first(entry_positions);
    }
    if (window) {  // this group's observation window: its policy's last voters() queries
      const int64_t v = std::min(policy.voters(), group_q.size(2));
      group_q = group_q.narrow(2, group_q.size(2) - v, v);
      group_q_positions = group_q_positions.narrow(1, group_q_positions.size(1) - v, v);
    }
    const int64_t b = group_q.size(0), h = group_q.size(1), voters = group_q.size(2),
                  d = group_q.size(3);
    const int64_t hk = l.keys.size(1), per_group = h / hk;
    // A window of no query (snapkv's min(32, M/2) at budget 1) casts no vote.
    if (voters == 0) return at::zeros({b * run, hk, s}, l.stat.options());
    auto all_q = group_q.to(at::kFloat).reshape({b, hk, per_group * voters, d});
    auto keys_t = keys.to(at::kFloat).transpose(-1, -2);
    auto k_pos = entry_positions.unsqueeze(-2);  // (B, Hk, 1, S)
    auto all_q_pos = group_q_positions.view({b, 1, 1, voters})
                         .repeat({1, 1, per_group, 1})
                         .view({b, 1, per_group * voters, 1});
    // The scores of a block of voting queries at a time: a 4k prompt's votes are 12k query rows
    // over 4k entries per sequence, 600 MB in fp32 at once, and the passes over them (mask,
    // softmax, sum) then run from memory instead of the CPU's cache (blocks of ~16 MiB; on a GPU
    // ~256 MiB, so a long prompt's votes neither exhaust its memory nor split into many
    // launches).
    const int64_t query_rows = per_group * voters;
    const int64_t block_bytes = q.is_cuda() ? int64_t{256} << 20 : int64_t{16} << 20;
    const int64_t block = std::max<int64_t>(64, block_bytes / std::max<int64_t>(1, b * hk * s * 4));
    constexpr float kInf = std::numeric_limits<float>::infinity();
    at::Tensor mass;  // (B, Hk, S): summed over the group's heads and the voting queries
    for (int64_t r = 0; r < query_rows; r += block) {
      const int64_t n = std::min(block, query_rows - r);
      auto scores = at::matmul(all_q.narrow(2, r, n), keys_t) / std::sqrt(static_cast<double>(d));
      auto visible = (k_pos >= 0).logical_and(k_pos <= all_q_pos.narrow(2, r, n));
      auto probs =
          at::softmax(scores.masked_fill_(visible.logical_not(), -kInf), -1).nan_to_num_(0);
      auto part = probs.sum(2);
      mass = mass.defined() ? mass.add_(part) : part;
    }
    auto shaped = policy.shape_votes(mass, {entry_positions, group_q_positions, tensor_parallel});
    return run > 1 ? shaped.repeat_interleave(run, 0) : shaped;
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
