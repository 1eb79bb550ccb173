#include "eval/budgeted_cache.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/decode_attention.h"

namespace retain {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::unique_ptr<EvictionPolicy> checked_policy(const PolicySpec& spec, int64_t budget,
                                               const GateBank* gates) {
  RETAIN_CHECK(spec.budgeted(), "BudgetedKvCache: the full policy uses FullKvCache");
  RETAIN_CHECK(budget >= 1, "--budget must leave at least 1 entry per head, found ", budget);
  RETAIN_CHECK(!spec.needs_gates() || gates != nullptr, "--policy ", spec.name(),
               " needs learned gates: pass --gates FILE (retain export / import-gates)");
  return make_policy(spec, budget);
}

}  // namespace

BudgetedKvCache::BudgetedKvCache(const ModelConfig& model, const PolicySpec& policy, int64_t budget,
                                 int64_t chunk, const GateBank* gates)
    : model_(model),
      spec_(policy),
      policy_(checked_policy(policy, budget, gates)),
      budget_(budget),
      capacity_(budget + policy.buffer + chunk),
      gates_(gates),
      layers_(static_cast<size_t>(model.num_layers)) {
  RETAIN_CHECK(chunk >= 1, "--chunk must be >= 1");
  for (int64_t w : model.sliding_window)
    RETAIN_CHECK(w == 0,
                 "eviction policies on sliding-window layers are not supported (the model's window "
                 "already bounds them)");
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
  Layer& l = layers_.at(t.layer);
  l.pending_stat = policy_->token_statistic(t, gates_);
  const Votes votes = policy_->votes();
  if (votes != Votes::kNone) l.pending_q = t.q;
  if (votes == Votes::kObservationWindow && !static_) {
    // The observation window: the last `voters` queries seen, across chunk boundaries. Decode
    // steps never vote, so static decode leaves it alone.
    const int64_t w = policy_->voters();
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
  if (!l.keys.defined()) allocate(l, keys);
  const int64_t b = keys.size(0), hk = keys.size(1), n = keys.size(2), d = keys.size(3);
  RETAIN_CHECK(n <= capacity_ - budget_ - spec_.buffer, "BudgetedKvCache: a step of ", n,
               " tokens exceeds the prefill chunk the cache was sized for");
  // Every head gains n entries, so the longest head after the append is known from one read
  // (none in static decode, whose shapes are the buffers' and where end_static_step made room).
  int64_t longest = static_ ? l.keys.size(2) : l.length.max().item<int64_t>() + n;
  if (!static_ && longest > l.keys.size(2)) grow(l, std::max(longest, 2 * l.keys.size(2)));
  // Slot of each new entry: after the head's live entries.
  auto slots = l.length.unsqueeze(-1) + at::arange(n, l.length.options());  // (B, Hk, T)
  l.keys.scatter_(2, slots.unsqueeze(-1).expand({b, hk, n, d}), keys);
  l.values.scatter_(2, slots.unsqueeze(-1).expand({b, hk, n, d}), values);
  l.positions.scatter_(2, slots, positions.unsqueeze(1).expand({b, hk, n}).contiguous());
  l.stat.scatter_(2, slots, l.pending_stat.to(at::kFloat));
  l.length += n;
  step_positions_ = positions;

  if (n > 1 && !final_step_) generating_ = false;  // a new prompt's chunk: not generating

  // The votes (see Votes): accumulated every step, the latest query's every step, or the
  // observation window's at each prompt chunk and at the prompt's last token, never while decoding.
  switch (policy_->votes()) {
    case Votes::kNone:
      break;
    case Votes::kAccumulate:
      l.stat.narrow(2, 0, longest).add_(votes(layer, l.pending_q, positions, longest));
      break;
    case Votes::kLatestQuery:
      l.stat.narrow(2, 0, longest)
          .copy_(votes(layer, l.pending_q.narrow(2, n - 1, 1), positions.narrow(1, n - 1, 1),
                       longest));
      break;
    case Votes::kObservationWindow:
      if (n >= 2 || final_step_)  // the latest vote replaces the earlier ones
        l.stat.narrow(2, 0, longest).copy_(votes(layer, l.recent_q, l.recent_positions, longest));
      break;
  }
  // The prompt's last token reads at most budget + 1 entries per head, its own included.
  if (final_step_ && !spec_.global()) {
    evict_layer(layer, budget_ + n, budget_ + n);
    longest = l.length.max().item<int64_t>();
  }

  if (generating_) {
    // What this step's queries read: every live entry of their head (all are in their past).
    // Rows whose query is padding (a finished row) read nothing that counts.
    if (!attended_max_.defined() || attended_max_.size(0) != b) {
      attended_max_ = at::zeros({b}, l.length.options());
      attended_total_max_ = at::zeros_like(attended_max_);
      step_total_ = at::zeros_like(attended_max_);
    }
    auto counts = l.length * positions.select(1, n - 1).ge(0).unsqueeze(1);  // (B, Hk)
    attended_max_.copy_(at::maximum(attended_max_, std::get<0>(counts.max(1))));
    step_total_.add_(counts.sum(1));
  }

  // Static decode returns every slot (its shape must not change between steps); the empty ones
  // carry position -1, which attention masks.
  return {l.keys.narrow(2, 0, longest), l.values.narrow(2, 0, longest),
          l.positions.narrow(2, 0, longest)};
}

at::Tensor BudgetedKvCache::votes(int64_t layer, const at::Tensor& q, const at::Tensor& q_positions,
                                  int64_t s) const {
  // As the model computes it: fp32 scores over the live entries, masked by position.
  const Layer& l = layers_.at(layer);
  const int64_t b = q.size(0), h = q.size(1), voters = q.size(2), d = q.size(3);
  const int64_t hk = l.keys.size(1), g = h / hk;
  auto keys = l.keys.narrow(2, 0, s);
  auto scores = at::matmul(q.to(at::kFloat).reshape({b, hk, g * voters, d}),
                           keys.to(at::kFloat).transpose(-1, -2)) /
                std::sqrt(static_cast<double>(d));
  auto entry_positions = l.positions.narrow(2, 0, s);
  auto k_pos = entry_positions.unsqueeze(-2);  // (B, Hk, 1, S)
  auto q_pos = q_positions.view({b, 1, 1, voters}).repeat({1, 1, g, 1}).view({b, 1, g * voters, 1});
  auto visible = (k_pos >= 0).logical_and(k_pos <= q_pos);
  auto probs = at::softmax(scores.masked_fill(visible.logical_not(), -kInf), -1).nan_to_num(0);
  // Summed over the group's heads and the voting queries: (B, Hk, S).
  return policy_->shape_votes(probs.sum(2), {entry_positions, q_positions});
}

at::Tensor BudgetedKvCache::scores(int64_t layer) const {
  const Layer& l = layers_.at(layer);
  const int64_t s = l.length.max().item<int64_t>();
  auto pos = l.positions.narrow(2, 0, s);
  auto score = policy_->score({pos, l.stat.narrow(2, 0, s), seen_.view({-1, 1, 1})});
  if (protect_from_ >= 0) score = score.masked_fill(pos >= protect_from_, kInf);
  return score.masked_fill(pos < 0, -kInf);
}

void BudgetedKvCache::compact(Layer& l, const at::Tensor& keep) {
  // Kept entries first, in their insertion order; the rest after them, emptied (position -1).
  const int64_t s = keep.size(2);
  // In place: a captured decode step reads the lengths through this tensor.
  l.length.copy_(compact_cache(l.keys.narrow(2, 0, s), l.values.narrow(2, 0, s),
                               l.positions.narrow(2, 0, s), l.stat.narrow(2, 0, s), keep));
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

}  // namespace

void BudgetedKvCache::evict_per_head(int64_t keep, int64_t trigger) {
  for (int64_t li = 0; li < static_cast<int64_t>(layers_.size()); ++li)
    evict_layer(li, keep, trigger);
}

void BudgetedKvCache::evict_layer(int64_t layer, int64_t keep_count, int64_t trigger) {
  Layer& l = layers_.at(layer);
  if (!l.keys.defined() || l.length.max().item<int64_t>() <= trigger) return;
  auto score = scores(layer);
  const int64_t s = score.size(2);
  auto top = top_k_indices(score, std::min(keep_count, s));
  auto keep = at::zeros_like(score, score.options().dtype(at::kBool)).scatter_(2, top, true);
  // Only the heads over the trigger are cut back; the others keep everything.
  auto over = (l.length > trigger).unsqueeze(-1);  // (B, Hk, 1)
  keep = at::where(over, keep.logical_and(score > -kInf), at::ones_like(keep));
  keep.logical_and_(l.positions.narrow(2, 0, s) >= 0);
  compact(l, keep);
}

void BudgetedKvCache::evict_below_threshold() {
  // Scores are log retention (log beta^(t + 1 - pos), or the horizon form): compare in log space.
  const double floor = std::log(policy_->threshold());
  for (int64_t li = 0; li < static_cast<int64_t>(layers_.size()); ++li) {
    Layer& l = layers_[li];
    if (!l.keys.defined()) continue;
    auto score = scores(li);
    auto live = l.positions.narrow(2, 0, score.size(2)) >= 0;
    auto keep = (score >= floor).logical_and(live);
    if (policy_->min_per_head() > 0) {  // the floor per head applies here too
      auto k = std::min(policy_->min_per_head(), score.size(2));
      auto top = top_k_indices(score, k);
      keep.logical_or_(at::zeros_like(keep).scatter_(2, top, true).logical_and(live));
    }
    if (keep.logical_not().logical_and(live).any().item<bool>()) compact(l, keep);
  }
}

void BudgetedKvCache::evict_global(int64_t keep, int64_t trigger) {
  const int64_t hk = model_.num_kv_heads, nl = model_.num_layers;
  for (const auto& l : layers_)
    if (!l.keys.defined()) return;  // before the first step
  auto total = at::zeros_like(layers_[0].length.select(1, 0));
  for (const auto& l : layers_) total += l.length.sum(1);
  if (total.max().item<int64_t>() <= nl * hk * trigger) return;
  // Scores of every entry of a sequence, across layers and heads, in one row per sequence.
  std::vector<at::Tensor> flat;
  std::vector<int64_t> widths;
  for (int64_t li = 0; li < nl; ++li) {
    auto score = scores(li);
    if (policy_->min_per_head() > 0) {
      // Each head's best min_per_head entries are kept whatever the global ranking says.
      auto k = std::min(policy_->min_per_head(), score.size(2));
      auto top = top_k_indices(score, k);
      auto bonus = at::zeros_like(score).scatter_(2, top, kInf);
      score = at::where(score > -kInf, score + bonus, score);
    }
    widths.push_back(score.size(2));
    flat.push_back(score.reshape({score.size(0), -1}));
  }
  auto all = at::cat(flat, 1);
  const int64_t keep_count = std::min(nl * hk * keep, all.size(1));
  auto top = top_k_indices(all, keep_count);
  auto keep_all = at::zeros_like(all, all.options().dtype(at::kBool)).scatter_(1, top, true);
  // Only the sequences over the global trigger are cut back; the others keep everything.
  auto over = (total > nl * hk * trigger).unsqueeze(-1);  // (B, 1)
  keep_all = at::where(over, keep_all, at::ones_like(keep_all));
  int64_t offset = 0;
  for (int64_t li = 0; li < nl; ++li) {
    Layer& l = layers_[li];
    const int64_t s = widths[li];
    auto keep = keep_all.narrow(1, offset, hk * s)
                    .view({-1, hk, s})
                    .logical_and(l.positions.narrow(2, 0, s) >= 0);
    compact(l, keep);
    offset += hk * s;
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
    attended_total_max_.copy_(at::maximum(attended_total_max_, step_total_));
    step_total_.zero_();
  }
  final_step_ = false;
  if (!static_) evict_now();
}

void BudgetedKvCache::compress_context() {
  RETAIN_CHECK(!static_, "BudgetedKvCache: compress_context during static decode");
  for (int64_t li = 0; li < static_cast<int64_t>(layers_.size()); ++li) {
    Layer& l = layers_[li];
    if (!l.keys.defined() || policy_->votes() != Votes::kObservationWindow || !l.recent_q.defined())
      continue;
    const int64_t s = l.length.max().item<int64_t>();
    l.stat.narrow(2, 0, s).copy_(votes(li, l.recent_q, l.recent_positions, s));
  }
  if (spec_.global())
    evict_global(budget_, budget_);
  else
    evict_per_head(budget_, budget_);
  frozen_ = true;
}

void BudgetedKvCache::begin_generating_step() {
  generating_ = true;
  if (frozen_) return;  // keep mode: the context was compressed once, nothing more goes
  final_step_ = true;
  // dbtrimkv's budget is global, and a layer cannot rank its entries against layers the step has
  // not reached yet: cut before the step to L Hk budget; the step adds L Hk.
  if (spec_.global()) evict_global(budget_, budget_);
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

bool BudgetedKvCache::begin_static_decode() {
  if (!policy_->static_decode() || !seen_.defined()) return false;
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
    counts.push_back(l.length.max().view({1}));
    total += l.length.sum(1);
  }
  counts.push_back(total.max().view({1}));
  auto host = at::cat(counts).to(at::kCPU);  // the one device-to-host read
  const auto* v = host.data_ptr<int64_t>();
  host_longest_.assign(v, v + layers_.size());
  host_total_ = v[layers_.size()];
}

bool BudgetedKvCache::ensure_room() {
  bool grew = false;
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& l = layers_[i];
    if (host_longest_[i] + 1 <= l.keys.size(2)) continue;
    grow(l, std::max(host_longest_[i] + 1, 2 * l.keys.size(2)));
    grew = true;
  }
  return grew;
}

bool BudgetedKvCache::end_static_step() {
  RETAIN_CHECK(static_, "BudgetedKvCache: end_static_step outside static decode");
  const int64_t hk = model_.num_kv_heads, nl = model_.num_layers;
  // Every head of every row gained one entry (finished rows one at position -1, which the next
  // eviction drops as an eager step drops it at once; it never changes a running row's choice).
  bool due = false, full = false;
  for (size_t i = 0; i < layers_.size(); ++i) {
    ++host_longest_[i];
    due = due || (!spec_.global() && host_longest_[i] > budget_ + spec_.buffer);
    full = full || host_longest_[i] + 1 > layers_[i].keys.size(2);
  }
  host_total_ += nl * hk;
  due = due || (spec_.global() && host_total_ > nl * hk * (budget_ + spec_.buffer));
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
}

void BudgetedKvCache::evict_now() {
  // Padding (position -1: a batched prompt's left padding, a finished row's steps) was stored
  // like a token; drop it before anything counts it, so a padded row evicts exactly as it would
  // alone and the peak counts tokens only.
  for (auto& l : layers_) {
    if (!l.keys.defined()) continue;
    const int64_t s = l.length.max().item<int64_t>();
    auto slot = at::arange(s, l.length.options()).view({1, 1, s});
    auto live = l.positions.narrow(2, 0, s) >= 0;
    auto counted = slot < l.length.unsqueeze(-1);
    if (counted.logical_and(live.logical_not()).any().item<bool>())
      compact(l, live.logical_and(counted));
  }
  peak_bytes_ = std::max(peak_bytes_, live_bytes());  // before eviction: the real peak
  if (!frozen_) {  // keep mode: nothing is evicted after the context
    if (policy_->threshold() > 0) evict_below_threshold();
    if (spec_.global())
      evict_global(budget_, budget_ + spec_.buffer);
    else
      evict_per_head(budget_, budget_ + spec_.buffer);
  }
  for (auto& l : layers_) {
    l.pending_q = at::Tensor();
    l.pending_stat = at::Tensor();
  }
}

int64_t BudgetedKvCache::live_bytes() const {
  int64_t bytes = 0;
  for (const auto& l : layers_)
    if (l.keys.defined())
      bytes += 2 * l.length.sum().item<int64_t>() * l.keys.size(3) *
               static_cast<int64_t>(l.keys.element_size());
  return bytes;
}

int64_t BudgetedKvCache::budget_bytes() const {
  int64_t bytes = 0;
  for (const auto& l : layers_)
    if (l.keys.defined())
      bytes += 2 * l.keys.size(0) * l.keys.size(1) * budget_ * l.keys.size(3) *
               static_cast<int64_t>(l.keys.element_size());
  return bytes;
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
  }
  // Updated in place by the steps.
  for (at::Tensor* t :
       {&copy->seen_, &copy->attended_max_, &copy->attended_total_max_, &copy->step_total_})
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
