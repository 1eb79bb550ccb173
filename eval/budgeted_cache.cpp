#include "eval/budgeted_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "dist/collectives.h"
#include "kernels/cache_cpu.h"
#include "kernels/decode_attention.h"

namespace retain {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::unique_ptr<EvictionPolicy> checked_policy(const PolicySpec& spec, int64_t budget,
                                               const LearnedModules& learned) {
  RETAIN_CHECK(spec.budgeted(), "BudgetedKvCache: the full policy uses FullKvCache");
  RETAIN_CHECK(budget >= 1, "--budget must leave at least 1 entry per head, found ", budget);
  RETAIN_CHECK(!spec.needs_gates() || learned.gates != nullptr, "--policy ", spec.name(),
               " needs learned gates: pass --gates FILE (retain export / import-gates)");
  RETAIN_CHECK(!spec.needs_scorer() || learned.scorer != nullptr, "--policy ", spec.name(),
               " needs its learned scorer: ", spec.name(), ":scorer=FILE (retain export of a ",
               spec.name(), " run)");
  RETAIN_CHECK(!spec.needs_scorer() || learned.scorer->config().kind == spec.name(), "--policy ",
               spec.name(), ": its scorer file holds a ", learned.scorer->config().kind, " scorer");
  return make_policy(spec, budget);
}

// t's rows `rows` (all of them when undefined).
at::Tensor select_rows(const at::Tensor& t, const at::Tensor& rows) {
  return rows.defined() ? t.index_select(0, rows) : t;
}

// (B,) counts as (B, 1, ..., 1) with `dims` dimensions, to broadcast against a (B, ...) tensor.
at::Tensor per_row(const at::Tensor& counts, int64_t dims) {
  std::vector<int64_t> shape(static_cast<size_t>(dims), 1);
  shape[0] = counts.size(0);
  return counts.view(shape);
}

}  // namespace

BudgetedKvCache::BudgetedKvCache(const ModelConfig& model, const PolicySpec& policy, int64_t budget,
                                 int64_t chunk, LearnedModules learned)
    : BudgetedKvCache(model, policy, std::vector<int64_t>{budget}, chunk, learned) {}

BudgetedKvCache::BudgetedKvCache(const ModelConfig& model, const PolicySpec& policy,
                                 std::vector<int64_t> budgets, int64_t chunk,
                                 LearnedModules learned)
    : model_(model),
      spec_(policy),
      budgets_(std::move(budgets)),
      capacity_(0),
      learned_(learned),
      layers_(static_cast<size_t>(model.num_layers)) {
  RETAIN_CHECK(chunk >= 1, "--chunk must be >= 1");
  RETAIN_CHECK(!budgets_.empty(), "BudgetedKvCache: no budget");
  for (int64_t w : model.sliding_window)
    RETAIN_CHECK(w == 0,
                 "eviction policies on sliding-window layers are not supported (the model's window "
                 "already bounds them)");
  // One policy per distinct budget, in order of first appearance.
  for (size_t r = 0; r < budgets_.size(); ++r) {
    const int64_t budget = budgets_[r];
    auto group = std::find_if(groups_.begin(), groups_.end(),
                              [&](const PolicyGroup& g) { return g.budget == budget; });
    if (group == groups_.end()) {
      groups_.push_back({PolicyHandle(checked_policy(spec_, budget, learned_)), budget, {}, {}});
      group = groups_.end() - 1;
    }
    group->rows.push_back(static_cast<int64_t>(r));
    capacity_ = std::max(capacity_, budget + policy.buffer + chunk);
  }
  if (groups_.size() == 1) groups_.front().rows.clear();  // every row: no selection needed
  // What the cache reads from policy() alone must not depend on the budget.
  for (const auto& g : groups_) {
    const EvictionPolicy& first = this->policy();
    RETAIN_CHECK(
        g.policy->votes() == first.votes() && g.policy->threshold() == first.threshold() &&
            g.policy->min_per_head() == first.min_per_head() &&
            g.policy->static_decode() == first.static_decode() &&
            (g.policy->query_statistics_from() >= 0) == (first.query_statistics_from() >= 0),
        "BudgetedKvCache: --policy ", spec_.name(),
        " behaves differently at different budgets beyond its scores and votes");
  }
}

void BudgetedKvCache::bind_rows(int64_t batch, const at::Device& device) {
  if (budget_rows_.defined()) {
    RETAIN_CHECK(budget_rows_.size(0) == batch, "BudgetedKvCache: batch size changed from ",
                 budget_rows_.size(0), " to ", batch);
    return;
  }
  RETAIN_CHECK(budgets_.size() == 1 || static_cast<int64_t>(budgets_.size()) == batch,
               "BudgetedKvCache: ", budgets_.size(), " budgets for a batch of ", batch);
  std::vector<int64_t> per_row = budgets_;
  if (per_row.size() == 1) per_row.assign(static_cast<size_t>(batch), budgets_.front());
  budget_rows_ = at::tensor(per_row, at::kLong).to(device);
  // Each layer's per-head budget: the row's budget, or its pyramid share.
  const BudgetAllocation& a = spec_.allocation;
  const int64_t nl = model_.num_layers;
  host_layer_budgets_.assign(static_cast<size_t>(nl), per_row);
  if (a.kind == BudgetAllocation::Kind::kPyramid)
    for (size_t r = 0; r < per_row.size(); ++r) {
      const auto shares = pyramid_layer_budgets(per_row[r], nl, a.pyramid_beta);
      for (int64_t li = 0; li < nl; ++li) host_layer_budgets_[li][r] = shares[li];
    }
  layer_budget_rows_.clear();
  for (const auto& budgets : host_layer_budgets_)
    layer_budget_rows_.push_back(a.kind == BudgetAllocation::Kind::kPyramid
                                     ? at::tensor(budgets, at::kLong).to(device)
                                     : budget_rows_);
  std::vector<int64_t> floors;
  for (int64_t budget : per_row) floors.push_back(adakv_head_floor(budget, a.safeguard));
  adakv_floor_rows_ = at::tensor(floors, at::kLong).to(device);
  // Where each row's query statistics start (expected_attention's sinks depend on the budget).
  std::vector<int64_t> from(static_cast<size_t>(batch), policy().query_statistics_from());
  for (auto& g : groups_) {
    if (!g.rows.empty()) g.index = at::tensor(g.rows, at::kLong).to(device);
    for (int64_t r : g.rows) from[static_cast<size_t>(r)] = g.policy->query_statistics_from();
  }
  query_statistics_from_rows_ = at::tensor(from, at::kLong).to(device);
  row_peaks_.assign(static_cast<size_t>(batch), 0);
}

template <typename F>
at::Tensor BudgetedKvCache::by_group(F&& f) const {
  if (groups_.size() == 1) return f(groups_.front(), at::Tensor());
  at::Tensor out;
  for (const auto& g : groups_) {
    at::Tensor part = f(g, g.index);
    if (!out.defined()) {
      auto sizes = part.sizes().vec();
      sizes[0] = budget_rows_.size(0);
      out = at::empty(sizes, part.options());
    }
    out.index_copy_(0, g.index, part);
  }
  return out;
}

void BudgetedKvCache::allocate(Layer& l, const at::Tensor& keys) {
  const int64_t b = keys.size(0), hk = keys.size(1), d = keys.size(3);
  l.keys = at::zeros({b, hk, capacity_, d}, keys.options());
  l.values = at::zeros_like(l.keys);
  l.positions = at::full({b, hk, capacity_}, -1, keys.options().dtype(at::kLong));
  l.stat = at::zeros({b, hk, capacity_}, keys.options().dtype(at::kFloat));
  l.length = at::zeros({b, hk}, keys.options().dtype(at::kLong));
}

void BudgetedKvCache::grow(Layer& l, int64_t capacity) {
  // dbtrimkv lets one head hold more than budget + buffer while others hold less (the global
  // total stays bounded), so a layer's buffers grow to its longest head when needed.
  auto widen = [&](const at::Tensor& t, int64_t fill) {
    auto sizes = t.sizes().vec();
    sizes[2] = capacity;
    auto out = at::full(sizes, fill, t.options());
    out.narrow(2, 0, t.size(2)).copy_(t);
    return out;
  };
  l.keys = widen(l.keys, 0);
  l.values = widen(l.values, 0);
  l.positions = widen(l.positions, -1);
  l.stat = widen(l.stat, 0);
}

void BudgetedKvCache::observe(const LayerTensors& t) {
  bind_rows(t.q.size(0), t.q.device());
  Layer& l = layers_.at(t.layer);
  l.pending_stat = by_group([&](const PolicyGroup& g, const at::Tensor& rows) {
    if (!rows.defined()) return g.policy->token_statistic(t, learned_);
    const auto hidden = select_rows(t.hidden, rows), q = select_rows(t.q, rows),
               k = select_rows(t.k, rows), v = select_rows(t.v, rows),
               positions = select_rows(t.positions, rows),
               q_before_rope = select_rows(t.q_before_rope, rows);
    return g.policy->token_statistic({t.layer, hidden, q, k, v, positions, q_before_rope},
                                     learned_);
  });
  if (policy().query_statistics_from() >= 0 && !frozen_)
    add_query_statistics(l, t.q_before_rope, t.positions);
  const Votes votes = policy().votes();
  if (votes != Votes::kNone) l.pending_q = t.q;
  if (votes == Votes::kObservationWindow && !static_ && !frozen_) {
    // The observation window: the last `voters` queries seen, across chunk boundaries (the most
    // any group's policy takes). Decode steps never vote, so static decode leaves it alone.
    int64_t w = 0;
    for (const auto& g : groups_) w = std::max(w, g.policy->voters());
    auto q = l.recent_q.defined() ? at::cat({l.recent_q, t.q}, 2) : t.q;
    auto pos =
        l.recent_positions.defined() ? at::cat({l.recent_positions, t.positions}, 1) : t.positions;
    const int64_t keep = std::min(w, q.size(2));
    l.recent_q = q.narrow(2, q.size(2) - keep, keep).contiguous();
    l.recent_positions = pos.narrow(1, pos.size(1) - keep, keep).contiguous();
  }
}

KvEntries BudgetedKvCache::append(int64_t layer, const at::Tensor& keys, const at::Tensor& values,
                                  const at::Tensor& positions) {
  Layer& l = layers_.at(layer);
  bind_rows(keys.size(0), keys.device());
  if (!l.keys.defined()) allocate(l, keys);
  const int64_t b = keys.size(0), hk = keys.size(1), n = keys.size(2);
  const int64_t largest_budget = *std::max_element(budgets_.begin(), budgets_.end());
  RETAIN_CHECK(n <= capacity_ - largest_budget - spec_.buffer, "BudgetedKvCache: a step of ", n,
               " tokens exceeds the prefill chunk the cache was sized for");
  // Every head gains n entries, so the longest head after the append is known on the host (static
  // decode returns the whole buffers, where end_static_step made room).
  int64_t longest = static_ ? l.keys.size(2) : l.longest + n;
  if (!static_ && longest > l.keys.size(2)) grow(l, std::max(longest, 2 * l.keys.size(2)));
  // The new entries go after each head's live ones.
  write_at_lengths(l.keys, l.length, keys);
  write_at_lengths(l.values, l.length, values);
  write_at_lengths(l.positions, l.length, positions.unsqueeze(1).expand({b, hk, n}));
  write_at_lengths(l.stat, l.length, l.pending_stat.to(at::kFloat));
  l.length += n;
  if (!static_) l.longest = longest;
  step_positions_ = positions;

  if (n > 1 && !final_step_) generating_ = false;  // a new prompt's chunk: not generating

  // The votes (see Votes): accumulated every step, the latest query's every step, or the
  // observation window's at each prompt chunk and at the prompt's last token, never while decoding.
  // Keep mode evicts nothing after the context: no vote counts any more.
  switch (frozen_ ? Votes::kNone : policy().votes()) {
    case Votes::kNone:
      break;
    case Votes::kAccumulate:
      l.stat.narrow(2, 0, longest).add_(votes(layer, l.pending_q, positions, longest, false));
      break;
    case Votes::kLatestQuery:
      l.stat.narrow(2, 0, longest)
          .copy_(votes(layer, l.pending_q.narrow(2, n - 1, 1), positions.narrow(1, n - 1, 1),
                       longest, false));
      break;
    case Votes::kObservationWindow:
      if (n >= 2 || final_step_)  // the latest vote replaces the earlier ones
        l.stat.narrow(2, 0, longest)
            .copy_(votes(layer, l.recent_q, l.recent_positions, longest, true));
      break;
  }
  // The prompt's last token reads at most budget + 1 entries per head, its own included.
  if (final_step_ && !spec_.global()) {
    evict_layer(layer, layer_budget(layer) + n, layer_budget(layer) + n);
    longest = l.longest;
  }

  // Static decode returns every slot (its shape must not change between steps); the empty ones
  // carry position -1, which attention masks.
  return {l.keys.narrow(2, 0, longest), l.values.narrow(2, 0, longest),
          l.positions.narrow(2, 0, longest)};
}

void BudgetedKvCache::add_query_statistics(Layer& l, const at::Tensor& q_before_rope,
                                           const at::Tensor& positions) {
  // Chan et al.'s pairwise update: the step's own mean and squared deviations, merged with the
  // running ones. Stable in fp32 where sum(q q^T) - n mu mu^T would cancel (queries have a large
  // mean next to their spread), and the same as kvpress's two-pass covariance over one prefill.
  const int64_t b = q_before_rope.size(0), h = q_before_rope.size(1), d = q_before_rope.size(3);
  if (!l.query_count.defined()) {
    auto options = q_before_rope.options().dtype(at::kFloat);
    l.query_count = at::zeros({b}, options);
    l.query_mean = at::zeros({b, h, d}, options);
    l.query_m2 = at::zeros({b, h, d, d}, options);
  }
  auto q = q_before_rope.to(at::kFloat);
  // Padding (position -1) and the first positions (attention sinks) are left out.
  auto counted = (positions >= query_statistics_from_rows_.view({b, 1})).to(at::kFloat);  // (B, T)
  auto n_step = counted.sum(1);                                                           // (B,)
  auto weight = counted.view({b, 1, -1, 1});
  auto mean_step = (q * weight).sum(2) / n_step.clamp_min(1).view({b, 1, 1});
  auto centered = (q - mean_step.unsqueeze(2)) * weight;
  auto m2_step = at::matmul(centered.transpose(-1, -2), centered);  // (B, H, D, D)
  auto n = l.query_count + n_step;
  auto delta = mean_step - l.query_mean;
  auto share = (n_step / n.clamp_min(1)).view({b, 1, 1});  // 0 where nothing is counted yet
  auto cross = (l.query_count * n_step / n.clamp_min(1)).view({b, 1, 1, 1});
  l.query_m2.add_(m2_step + delta.unsqueeze(-1) * delta.unsqueeze(-2) * cross);
  l.query_mean.add_(delta * share);
  l.query_count.copy_(n);
}

at::Tensor BudgetedKvCache::votes(int64_t layer, const at::Tensor& q, const at::Tensor& q_positions,
                                  int64_t s, bool window) const {
  // As the model computes it: fp32 scores over the live entries, masked by position.
  const Layer& l = layers_.at(layer);
  return by_group([&](const PolicyGroup& g, const at::Tensor& rows) {
    auto group_q = select_rows(q, rows), group_q_positions = select_rows(q_positions, rows);
    if (window) {  // this group's observation window: its policy's last voters() queries
      const int64_t v = std::min(g.policy->voters(), group_q.size(2));
      group_q = group_q.narrow(2, group_q.size(2) - v, v);
      group_q_positions = group_q_positions.narrow(1, group_q_positions.size(1) - v, v);
    }
    const int64_t b = group_q.size(0), h = group_q.size(1), voters = group_q.size(2),
                  d = group_q.size(3);
    const int64_t hk = l.keys.size(1), per_group = h / hk;
    // A window of no query (snapkv's min(32, M/2) at budget 1) casts no vote.
    if (voters == 0) return at::zeros({b, hk, s}, l.stat.options());
    auto keys = select_rows(l.keys.narrow(2, 0, s), rows);
    auto scores = at::matmul(group_q.to(at::kFloat).reshape({b, hk, per_group * voters, d}),
                             keys.to(at::kFloat).transpose(-1, -2)) /
                  std::sqrt(static_cast<double>(d));
    auto entry_positions = select_rows(l.positions.narrow(2, 0, s), rows);
    auto k_pos = entry_positions.unsqueeze(-2);  // (B, Hk, 1, S)
    auto q_pos = group_q_positions.view({b, 1, 1, voters})
                     .repeat({1, 1, per_group, 1})
                     .view({b, 1, per_group * voters, 1});
    auto visible = (k_pos >= 0).logical_and(k_pos <= q_pos);
    auto probs = at::softmax(scores.masked_fill(visible.logical_not(), -kInf), -1).nan_to_num(0);
    // Summed over the group's heads and the voting queries: (B, Hk, S).
    return g.policy->shape_votes(probs.sum(2), {entry_positions, group_q_positions, tp_});
  });
}

at::Tensor BudgetedKvCache::scores(int64_t layer) const {
  const Layer& l = layers_.at(layer);
  const int64_t s = l.length.max().item<int64_t>();
  auto pos = l.positions.narrow(2, 0, s), stat = l.stat.narrow(2, 0, s);
  auto seen = seen_.view({-1, 1, 1});
  auto keys = l.keys.narrow(2, 0, s), values = l.values.narrow(2, 0, s);
  at::Tensor mean, covariance;
  if (l.query_count.defined()) {
    mean = l.query_mean;
    covariance = l.query_m2 / l.query_count.clamp_min(1).view({-1, 1, 1, 1});
  }
  auto score = by_group([&](const PolicyGroup& g, const at::Tensor& rows) {
    ScoreContext context;
    context.positions = select_rows(pos, rows);
    context.stat = select_rows(stat, rows);
    context.seen = select_rows(seen, rows);
    context.keys = select_rows(keys, rows);
    context.values = select_rows(values, rows);
    if (mean.defined()) {
      context.query_mean = select_rows(mean, rows);
      context.query_covariance = select_rows(covariance, rows);
    }
    context.model = &model_;
    return g.policy->score(context);
  });
  if (!protect_.empty()) {
    // Row b's entries at positions >= protect[b] (when >= 0) are never evicted.
    std::vector<int64_t> from = protect_;
    if (from.size() == 1) from.assign(static_cast<size_t>(pos.size(0)), protect_.front());
    RETAIN_CHECK(static_cast<int64_t>(from.size()) == pos.size(0), "BudgetedKvCache: ", from.size(),
                 " protected positions for a batch of ", pos.size(0));
    auto first = per_row(at::tensor(from, at::kLong).to(pos.device()), 3);
    score = score.masked_fill((first >= 0).logical_and(pos >= first), kInf);
  }
  return score.masked_fill(pos < 0, -kInf);
}

void BudgetedKvCache::compact(Layer& l, const at::Tensor& keep) {
  // Kept entries first, in their insertion order; the rest after them, emptied (position -1).
  const int64_t s = keep.size(2);
  // In place: a captured decode step reads the lengths through this tensor.
  l.length.copy_(compact_cache(l.keys.narrow(2, 0, s), l.values.narrow(2, 0, s),
                               l.positions.narrow(2, 0, s), l.stat.narrow(2, 0, s), keep));
  l.longest = l.length.max().item<int64_t>();
}

at::Tensor BudgetedKvCache::attend(int64_t layer, const at::Tensor& q,
                                   const at::Tensor& q_positions, const KvEntries& entries,
                                   double scale, int64_t window) const {
  if (q.size(2) == 1 && window == 0 &&
      decode_attention_uses_kernel(q, entries.keys, entries.values, entries.positions))
    return decode_attention(q, entries.keys, entries.values, entries.positions,
                            layers_.at(layer).length, q_positions, scale);
  return KvCache::attend(layer, q, q_positions, entries, scale, window);
}

namespace {

// Indices of the k largest scores along the last dimension, ties going to the later entry (the
// more recent token within a head). at::topk breaks ties differently on CPU and CUDA, and max
// pooling (SnapKV) makes exact ties common, so the same run kept different entries on the two;
// a stable sort decides the same way on every device.
at::Tensor top_k_indices(const at::Tensor& score, int64_t k) {
  const int64_t s = score.size(-1);
  auto order = std::get<1>(score.flip(-1).sort(/*stable=*/true, -1, /*descending=*/true));
  return (s - 1) - order.narrow(-1, 0, k);
}

// A mask of the keep[b] largest scores along the last dimension of each row b (ties as
// top_k_indices breaks them); keep is (B,) int64.
at::Tensor top_k_mask(const at::Tensor& score, const at::Tensor& keep) {
  const int64_t s = score.size(-1);
  auto order = std::get<1>(score.flip(-1).sort(/*stable=*/true, -1, /*descending=*/true));
  auto chosen = at::arange(s, keep.options()) < per_row(keep, score.dim());
  return at::zeros_like(score, score.options().dtype(at::kBool))
      .scatter_(-1, (s - 1) - order, chosen.expand(score.sizes()).contiguous());
}

}  // namespace

const at::Tensor& BudgetedKvCache::layer_budget(int64_t layer) const {
  return layer_budget_rows_.at(static_cast<size_t>(layer));
}

void BudgetedKvCache::evict_per_head(int64_t keep_extra, int64_t trigger_extra) {
  for (int64_t li = 0; li < static_cast<int64_t>(layers_.size()); ++li)
    evict_layer(li, layer_budget(li) + keep_extra, layer_budget(li) + trigger_extra);
}

void BudgetedKvCache::evict_layer(int64_t layer, const at::Tensor& keep_count,
                                  const at::Tensor& trigger) {
  Layer& l = layers_.at(layer);
  if (!l.keys.defined()) return;
  const bool pooled = spec_.allocation.kind == BudgetAllocation::Kind::kAdaKV;
  const int64_t hk = l.keys.size(1);
  // Only the heads (adakv: the layers) over their row's trigger are cut back; the others keep
  // everything.
  auto over = pooled ? (l.length.sum(1) > trigger * hk).unsqueeze(1)  // (B, 1)
                     : l.length > trigger.unsqueeze(1);               // (B, Hk)
  if (!over.any().item<bool>()) return;
  auto score = scores(layer);
  const int64_t b = score.size(0), s = score.size(2);
  at::Tensor keep;
  if (pooled) {
    // AdaKV: each head's best `floor` entries rank above every other entry of the layer (below the
    // protected ones, which score +inf), then one top Hk keep over the layer's heads.
    auto floor = top_k_mask(score, adakv_floor_rows_).logical_and(score > -kInf);
    auto ranked = at::where(floor, std::numeric_limits<float>::max(), score).reshape({b, hk * s});
    keep = top_k_mask(ranked, keep_count * hk).logical_and(ranked > -kInf).view({b, hk, s});
  } else {
    keep = top_k_mask(score, keep_count).logical_and(score > -kInf);
  }
  keep = at::where(over.unsqueeze(-1), keep, at::ones_like(keep));
  keep.logical_and_(l.positions.narrow(2, 0, s) >= 0);
  compact(l, keep);
}

void BudgetedKvCache::evict_below_threshold() {
  // Scores are log retention (log beta^(t + 1 - pos), or the horizon form): compare in log space.
  const double floor = std::log(policy().threshold());
  for (int64_t li = 0; li < static_cast<int64_t>(layers_.size()); ++li) {
    Layer& l = layers_[li];
    if (!l.keys.defined()) continue;
    auto score = scores(li);
    auto live = l.positions.narrow(2, 0, score.size(2)) >= 0;
    auto keep = (score >= floor).logical_and(live);
    if (policy().min_per_head() > 0) {  // the floor per head applies here too
      auto k = std::min(policy().min_per_head(), score.size(2));
      auto top = top_k_indices(score, k);
      keep.logical_or_(at::zeros_like(keep).scatter_(2, top, true).logical_and(live));
    }
    if (keep.logical_not().logical_and(live).any().item<bool>()) compact(l, keep);
  }
}

void BudgetedKvCache::evict_global(const at::Tensor& keep, const at::Tensor& trigger) {
  const int64_t hk = model_.num_kv_heads, nl = model_.num_layers;
  // The pool spans every KV head of the model: under tensor parallelism the group's ranks rank
  // their entries together.
  const int64_t pool_heads = model_.global_kv_heads();
  Collectives* group = tp_ != nullptr && tp_->world() > 1 ? tp_ : nullptr;
  for (const auto& l : layers_)
    if (!l.keys.defined()) return;  // before the first step
  auto total = at::zeros_like(layers_[0].length.select(1, 0));
  for (const auto& l : layers_) total += l.length.sum(1);
  if (group != nullptr) group->all_reduce_sum(total);
  // Only the sequences over their global trigger are cut back; the others keep everything.
  auto over = total > trigger * (nl * pool_heads);  // (B,)
  if (!over.any().item<bool>()) return;
  // Scores of every entry of a sequence, across layers and heads, in one row per sequence.
  std::vector<at::Tensor> scored;
  std::vector<int64_t> widths;
  for (int64_t li = 0; li < nl; ++li) {
    auto score = scores(li);
    if (policy().min_per_head() > 0) {
      // Each head's best min_per_head entries are kept whatever the global ranking says.
      auto k = std::min(policy().min_per_head(), score.size(2));
      auto top = top_k_indices(score, k);
      auto bonus = at::zeros_like(score).scatter_(2, top, kInf);
      score = at::where(score > -kInf, score + bonus, score);
    }
    widths.push_back(score.size(2));
    scored.push_back(score);
  }
  // Each layer's block is (heads, width) with width = its longest live head; under tensor
  // parallelism the group's widths are padded to the longest rank's (-inf: empty slots), so the
  // blocks, gathered rank after rank within each layer, order the entries as one process would
  // (layer, head, slot) and ties fall the same way.
  std::vector<int64_t> padded = widths;
  if (group != nullptr) {
    auto all =
        all_gather_cat(*group, at::tensor(widths, at::kLong).unsqueeze(0).to(total.device()), 0);
    auto longest = std::get<0>(all.max(0));
    for (int64_t li = 0; li < nl; ++li) padded[li] = longest[li].item<int64_t>();
  }
  std::vector<at::Tensor> flat;
  for (int64_t li = 0; li < nl; ++li) {
    auto score = scored[li];
    if (padded[li] > widths[li])
      score = at::constant_pad_nd(score, {0, padded[li] - widths[li]}, -kInf);
    flat.push_back(score.reshape({score.size(0), -1}));
  }
  auto pool = at::cat(flat, 1);  // (B, sum_l hk padded_l): this rank's blocks
  const int64_t ranks = group != nullptr ? group->world() : 1;
  if (group != nullptr) {
    // Rank-major after the gather; reordered layer-major, rank by rank within a layer.
    auto gathered = all_gather_cat(*group, pool, 1).view({pool.size(0), ranks, pool.size(1)});
    std::vector<at::Tensor> by_layer;
    int64_t offset = 0;
    for (int64_t li = 0; li < nl; ++li) {
      by_layer.push_back(gathered.narrow(2, offset, hk * padded[li]).reshape({pool.size(0), -1}));
      offset += hk * padded[li];
    }
    pool = at::cat(by_layer, 1);
  }
  auto keep_all = top_k_mask(pool, keep * (nl * pool_heads));
  keep_all = at::where(over.unsqueeze(-1), keep_all, at::ones_like(keep_all));
  const int64_t rank = group != nullptr ? group->rank() : 0;
  int64_t offset = 0;
  for (int64_t li = 0; li < nl; ++li) {
    Layer& l = layers_[li];
    const int64_t s = widths[li], block = hk * padded[li];
    auto kept = keep_all.narrow(1, offset + rank * block, block)
                    .view({-1, hk, padded[li]})
                    .narrow(2, 0, s)
                    .logical_and(l.positions.narrow(2, 0, s) >= 0);
    compact(l, kept);
    offset += ranks * block;
  }
}

void BudgetedKvCache::end_step() {
  // Each row's next position: one past the largest position it has seen (padding is -1). In
  // place, as a captured decode step updates it.
  auto row_max = std::get<0>(step_positions_.max(1)) + 1;
  if (seen_.defined())
    seen_.copy_(at::maximum(seen_, row_max));
  else
    seen_ = row_max;
  if (generating_) {
    // What this step's queries read: every live entry of their head (all are in their past; the
    // prompt's last token after its cut), counted once for all layers. Rows whose query is
    // padding (a finished row) read nothing that counts.
    const int64_t b = step_positions_.size(0);
    std::vector<at::Tensor> lengths;
    for (const auto& l : layers_) lengths.push_back(l.length);
    if (!attended_max_.defined() || attended_max_.size(0) != b) {
      attended_max_ = at::zeros({b}, lengths.front().options());
      attended_total_max_ = at::zeros_like(attended_max_);
    }
    auto running = step_positions_.select(1, step_positions_.size(1) - 1).ge(0);
    auto counts = at::stack(lengths) * running.view({1, b, 1});  // (L, B, Hk)
    attended_max_.copy_(at::maximum(attended_max_, counts.amax({0, 2})));
    attended_total_max_.copy_(at::maximum(attended_total_max_, counts.sum(at::IntArrayRef{0, 2})));
  }
  final_step_ = false;
  if (!static_) evict_now();
}

void BudgetedKvCache::compress_context() {
  RETAIN_CHECK(!static_, "BudgetedKvCache: compress_context during static decode");
  for (int64_t li = 0; li < static_cast<int64_t>(layers_.size()); ++li) {
    Layer& l = layers_[li];
    if (!l.keys.defined() || policy().votes() != Votes::kObservationWindow || !l.recent_q.defined())
      continue;
    const int64_t s = l.length.max().item<int64_t>();
    l.stat.narrow(2, 0, s).copy_(votes(li, l.recent_q, l.recent_positions, s, true));
  }
  if (!budget_rows_.defined()) return;  // nothing read yet
  if (spec_.global())
    evict_global(budget_rows_, budget_rows_);
  else
    evict_per_head(0, 0);
  frozen_ = true;
}

void BudgetedKvCache::begin_generating_step() {
  generating_ = true;
  if (frozen_) return;  // keep mode: the context was compressed once, nothing more goes
  final_step_ = true;
  // dbtrimkv's budget is global, and a layer cannot rank its entries against layers the step has
  // not reached yet: cut before the step to L Hk budget; the step adds L Hk.
  if (spec_.global() && budget_rows_.defined()) evict_global(budget_rows_, budget_rows_);
}

KvCache::AttendedEntries BudgetedKvCache::attended_entries() const {
  if (!attended_max_.defined()) return {};
  auto per_head = attended_max_.to(at::kCPU), total = attended_total_max_.to(at::kCPU);
  AttendedEntries out;
  for (int64_t r = 0; r < per_head.size(0); ++r) {
    out.per_head.push_back(per_head[r].item<int64_t>());
    out.total.push_back(total[r].item<int64_t>());
  }
  return out;
}

void BudgetedKvCache::bind_tensor_parallel(Collectives* group) {
  if (tp_ == group) return;
  RETAIN_CHECK(spec_.allocation.kind != BudgetAllocation::Kind::kAdaKV, "--policy ", spec_.name(),
               ": alloc=adakv pools a layer's heads, which tensor ",
               "parallelism splits over ranks; use alloc=uniform or pyramid, or --tp 1");
  RETAIN_CHECK(!spec_.needs_scorer(), "--policy ", spec_.name(),
               ": learned scorers read every head of a layer; run them with --tp 1");
  tp_ = group;
}

bool BudgetedKvCache::begin_static_decode() {
  // Static steps decide eviction from host-side counts of this rank's heads alone; a tensor-
  // parallel group must decide together, as the eager steps do.
  if (tp_ != nullptr && tp_->world() > 1) return false;
  if (!policy().static_decode() || !seen_.defined()) return false;
  for (const auto& l : layers_)
    if (!l.keys.defined()) return false;
  static_ = true;
  sync_host_counts();
  ensure_room();
  return true;
}

void BudgetedKvCache::sync_host_counts() {
  std::vector<at::Tensor> counts;
  auto total = at::zeros_like(layers_[0].length.select(1, 0));
  for (const auto& l : layers_) {
    counts.push_back(std::get<0>(l.length.max(1)));
    counts.push_back(l.length.sum(1));
    total += l.length.sum(1);
  }
  counts.push_back(total);
  auto host = at::stack(counts).to(at::kCPU).contiguous();  // the one device-to-host read
  const int64_t b = host.size(1);
  const auto* v = host.data_ptr<int64_t>();
  host_longest_.clear();
  host_layer_total_.clear();
  for (size_t i = 0; i < layers_.size(); ++i) {
    host_longest_.emplace_back(v + 2 * i * b, v + (2 * i + 1) * b);
    host_layer_total_.emplace_back(v + (2 * i + 1) * b, v + (2 * i + 2) * b);
  }
  host_total_.assign(v + 2 * layers_.size() * b, v + (2 * layers_.size() + 1) * b);
}

bool BudgetedKvCache::ensure_room() {
  bool grew = false;
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& l = layers_[i];
    const int64_t longest = *std::max_element(host_longest_[i].begin(), host_longest_[i].end());
    if (longest + 1 <= l.keys.size(2)) continue;
    grow(l, std::max(longest + 1, 2 * l.keys.size(2)));
    grew = true;
  }
  return grew;
}

bool BudgetedKvCache::end_static_step() {
  RETAIN_CHECK(static_, "BudgetedKvCache: end_static_step outside static decode");
  ++static_step_count_;  // steps whose padding (a finished row's) waits for the next eviction
  const int64_t hk = model_.num_kv_heads, nl = model_.num_layers;
  auto budget_of = [&](size_t r) { return budgets_.size() == 1 ? budgets_[0] : budgets_[r]; };
  // Every head of every row gained one entry (finished rows one at position -1, which the next
  // eviction drops as an eager step drops it at once; it never changes a running row's choice).
  bool due = false, full = false;
  const bool pooled = spec_.allocation.kind == BudgetAllocation::Kind::kAdaKV;
  for (size_t i = 0; i < layers_.size(); ++i)
    for (size_t r = 0; r < host_longest_[i].size(); ++r) {
      const int64_t longest = ++host_longest_[i][r];
      const int64_t layer_total = host_layer_total_[i][r] += hk;
      const int64_t trigger = host_layer_budgets_[i][r] + spec_.buffer;
      if (!spec_.global()) due = due || (pooled ? layer_total > hk * trigger : longest > trigger);
      full = full || longest + 1 > layers_[i].keys.size(2);
    }
  for (size_t r = 0; r < host_total_.size(); ++r) {
    host_total_[r] += nl * hk;
    due = due || (spec_.global() && host_total_[r] > nl * hk * (budget_of(r) + spec_.buffer));
  }
  due = due && !frozen_;  // keep mode evicts nothing after the context
  if (!due && !full) return false;
  // Exactly the eager end of step; where the counts over-estimate it evicts nothing more.
  evict_now();
  sync_host_counts();
  return ensure_room();
}

void BudgetedKvCache::end_static_decode() {
  if (!static_) return;
  static_ = false;
  evict_now();
  for (auto& l : layers_)  // the static steps grew the lengths on the device only
    if (l.keys.defined()) l.longest = l.length.max().item<int64_t>();
}

void BudgetedKvCache::evict_now() {
  // Padding (position -1: a batched prompt's left padding, a finished row's steps) was stored
  // like a token; drop it before anything counts it, so a padded row evicts exactly as it would
  // alone and the peak counts tokens only. One read says whether the steps since the last
  // eviction had any (static decode stores several steps before evicting).
  const bool padded = !step_positions_.defined() || static_step_count_ > 0 ||
                      step_positions_.lt(0).any().item<bool>();
  static_step_count_ = 0;
  for (auto& l : layers_) {
    if (!padded || !l.keys.defined()) continue;
    const int64_t s = l.length.max().item<int64_t>();
    auto slot = at::arange(s, l.length.options()).view({1, 1, s});
    auto live = l.positions.narrow(2, 0, s) >= 0;
    auto counted = slot < l.length.unsqueeze(-1);
    if (counted.logical_and(live.logical_not()).any().item<bool>())
      compact(l, live.logical_and(counted));
  }
  // Before eviction: the real peak, of the batch and of each row. Keep mode evicts nothing after
  // the context, so the entries only grow and the peak is what the cache holds when asked
  // (peak_bytes / row_bytes take the live count then).
  if (!frozen_) {
    const std::vector<int64_t> entries = row_entries();
    int64_t total = 0;
    for (size_t r = 0; r < entries.size(); ++r) {
      total += entries[r];
      row_peaks_[r] = std::max(row_peaks_[r], entries[r] * bytes_per_entry());
    }
    peak_bytes_ = std::max(peak_bytes_, total * bytes_per_entry());
  }
  if (!frozen_) {  // keep mode: nothing is evicted after the context
    if (policy().threshold() > 0) evict_below_threshold();
    if (spec_.global())
      evict_global(budget_rows_, budget_rows_ + spec_.buffer);
    else
      evict_per_head(0, spec_.buffer);
  }
  for (auto& l : layers_) {
    l.pending_q = at::Tensor();
    l.pending_stat = at::Tensor();
  }
}

std::vector<int64_t> BudgetedKvCache::row_entries() const {
  at::Tensor total;
  for (const auto& l : layers_)
    if (l.keys.defined()) total = total.defined() ? total + l.length.sum(1) : l.length.sum(1);
  if (!total.defined()) return {};
  auto host = total.to(at::kCPU).contiguous();
  return {host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + host.numel()};
}

int64_t BudgetedKvCache::bytes_per_entry() const {
  for (const auto& l : layers_)  // a key and a value
    if (l.keys.defined()) return 2 * l.keys.size(3) * static_cast<int64_t>(l.keys.element_size());
  return 0;
}

int64_t BudgetedKvCache::live_bytes() const {
  int64_t entries = 0;
  for (int64_t e : row_entries()) entries += e;
  return entries * bytes_per_entry();
}

int64_t BudgetedKvCache::budget_bytes() const {
  int64_t bytes = 0;
  for (const auto& row : row_bytes()) bytes += row.budget;
  return bytes;
}

std::vector<KvCache::RowBytes> BudgetedKvCache::row_bytes() const {
  const std::vector<int64_t> entries = row_entries();
  const int64_t per_entry = bytes_per_entry();
  std::vector<RowBytes> out;
  for (size_t r = 0; r < entries.size(); ++r) {
    const int64_t budget = budgets_.size() == 1 ? budgets_[0] : budgets_[r];
    const int64_t live = entries[r] * per_entry;
    out.push_back({live, std::max(row_peaks_[r], live),
                   model_.num_layers * model_.num_kv_heads * budget * per_entry});
  }
  return out;
}

std::unique_ptr<KvCache> BudgetedKvCache::clone() const {
  auto copy = std::make_unique<BudgetedKvCache>(*this);  // members are tensor handles: deepen them
  for (auto& l : copy->layers_) {
    if (!l.keys.defined()) continue;
    l.keys = l.keys.clone();
    l.values = l.values.clone();
    l.positions = l.positions.clone();
    l.stat = l.stat.clone();
    l.length = l.length.clone();
    if (l.query_count.defined()) {
      l.query_count = l.query_count.clone();
      l.query_mean = l.query_mean.clone();
      l.query_m2 = l.query_m2.clone();
    }
  }
  // Updated in place by the steps.
  for (at::Tensor* t : {&copy->seen_, &copy->attended_max_, &copy->attended_total_max_})
    if (t->defined()) *t = t->clone();
  return copy;
}

int64_t BudgetedKvCache::allocated_bytes() const {
  int64_t bytes = 0;
  for (const auto& l : layers_)
    if (l.keys.defined()) bytes += 2 * static_cast<int64_t>(l.keys.nbytes());
  return bytes;
}

std::vector<int64_t> BudgetedKvCache::live_positions(int64_t layer, int64_t b, int64_t head) const {
  const Layer& l = layers_.at(layer);
  const int64_t n = l.length[b][head].item<int64_t>();
  auto pos = l.positions[b][head].narrow(0, 0, n).to(at::kCPU).contiguous();
  return {pos.data_ptr<int64_t>(), pos.data_ptr<int64_t>() + n};
}

}  // namespace retain
