#include "eval/budgeted_cache.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/decode_attention.h"

namespace retain {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// log(1 - exp(x)) for x < 0, accurate at both ends.
at::Tensor log1mexp(const at::Tensor& x) {
  return at::where(x > -M_LN2, at::log(-at::expm1(x)), at::log1p(-at::exp(x)));
}

}  // namespace

BudgetedKvCache::BudgetedKvCache(const ModelConfig& model, const PolicyOptions& policy,
                                 int64_t budget, int64_t chunk, const GateBank* gates)
    : model_(model),
      policy_(policy),
      budget_(budget),
      capacity_(budget + policy.buffer + chunk),
      gates_(gates),
      layers_(static_cast<size_t>(model.num_layers)),
      generator_(at::make_generator<at::CPUGeneratorImpl>(policy.seed)) {
  RETAIN_CHECK(policy.kind != PolicyKind::kFull,
               "BudgetedKvCache: the full policy uses FullKvCache");
  RETAIN_CHECK(budget >= 1, "--budget must leave at least 1 entry per head, found ", budget);
  RETAIN_CHECK(chunk >= 1, "--chunk must be >= 1");
  RETAIN_CHECK(!policy.needs_gates() || gates != nullptr, "--policy ", policy.name,
               " needs learned gates: pass --gates FILE (retain export / import-gates)");
  if (policy_.sinks < 0) policy_.sinks = std::min<int64_t>(4, budget / 4);
  if (policy_.window < 0) {
    if (policy.kind == PolicyKind::kStreaming)
      policy_.window = budget - policy_.sinks;  // fill the budget
    else
      policy_.window =
          policy.kind == PolicyKind::kH2O ? budget / 2 : std::min<int64_t>(32, budget / 2);
  }
  // Entries a policy always keeps must leave room for the ones it chooses; streaming keeps
  // nothing but sinks + window, so those only have to fit.
  if (policy.kind == PolicyKind::kStreaming)
    RETAIN_CHECK(policy_.sinks + policy_.window <= budget, "--policy streaming: sinks + window (",
                 policy_.sinks + policy_.window, ") exceed the budget (", budget, " per head)");
  if (policy.kind == PolicyKind::kH2O || policy.kind == PolicyKind::kSnapKV ||
      policy.kind == PolicyKind::kSageKV) {
    const int64_t kept =
        policy_.window + (policy.kind == PolicyKind::kSageKV ? policy_.sinks : int64_t{0});
    RETAIN_CHECK(kept < budget, "--policy ", policy.name, ": the entries it always keeps (",
                 policy.kind == PolicyKind::kSageKV ? "sinks + window" : "window", " = ", kept,
                 ") must be below the budget (", budget, " per head); set them lower, e.g. ",
                 policy.name, ":window=", budget / 2);
  }
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
  const int64_t b = t.k.size(0), hk = t.k.size(1), n = t.k.size(2);
  switch (policy_.kind) {
    case PolicyKind::kTrimKV:
    case PolicyKind::kDBTrimKV:
      l.pending_stat = gates_->log_beta(t.layer, t.hidden);
      break;
    case PolicyKind::kKnorm:
      l.pending_stat = t.k.to(at::kFloat).norm(2, -1);
      break;
    case PolicyKind::kRandom:
      l.pending_stat = at::rand({b, hk, n}, generator_).to(t.k.device());
      break;
    default:
      l.pending_stat = at::zeros({b, hk, n}, t.k.options().dtype(at::kFloat));
  }
  if (policy_.needs_attention()) l.pending_q = t.q;
  if (one_time() && !static_) {
    // The observation window: the last `window` queries seen (sagekv: the last one), across
    // chunk boundaries. Decode steps never vote, so static decode leaves it alone.
    const int64_t w = policy_.kind == PolicyKind::kSageKV ? int64_t{1} : policy_.window;
    auto q = l.recent_q.defined() ? at::cat({l.recent_q, t.q}, 2) : t.q;
    auto pos =
        l.recent_positions.defined() ? at::cat({l.recent_positions, t.positions}, 1) : t.positions;
    const int64_t keep = std::min(w, q.size(2));
    l.recent_q = q.narrow(2, q.size(2) - keep, keep).contiguous();
    l.recent_positions = pos.narrow(1, pos.size(1) - keep, keep).contiguous();
  }
}

bool BudgetedKvCache::one_time() const {
  return policy_.kind == PolicyKind::kSnapKV || policy_.kind == PolicyKind::kSageKV;
}

KvEntries BudgetedKvCache::append(int64_t layer, const at::Tensor& keys, const at::Tensor& values,
                                  const at::Tensor& positions) {
  Layer& l = layers_.at(layer);
  if (!l.keys.defined()) allocate(l, keys);
  const int64_t b = keys.size(0), hk = keys.size(1), n = keys.size(2), d = keys.size(3);
  RETAIN_CHECK(n <= capacity_ - budget_ - policy_.buffer, "BudgetedKvCache: a step of ", n,
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

  // The votes: attention-scored policies add this step's attention mass to every entry; the
  // one-time policies replace every entry's score by their observation window's vote at each
  // prompt chunk and at the prompt's last token, never while decoding.
  const bool vote = policy_.needs_attention() && (!one_time() || n >= 2 || final_step_);
  if (vote) {
    const int64_t s = longest;
    auto mass = one_time() ? attention_mass(layer, l.recent_q, l.recent_positions, s)
                           : attention_mass(layer, l.pending_q, positions, s);
    if (policy_.kind == PolicyKind::kImportance)
      mass = mass.sum(1, /*keepdim=*/true).expand({b, hk, s});
    mass = pool_votes(layer, mass, s);
    if (one_time())
      l.stat.narrow(2, 0, s).copy_(mass);  // the latest vote replaces the earlier ones
    else
      l.stat.narrow(2, 0, s).add_(mass);
  }
  // The prompt's last token reads at most budget + 1 entries per head, its own included.
  if (final_step_ && !policy_.global()) {
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

at::Tensor BudgetedKvCache::attention_mass(int64_t layer, const at::Tensor& q,
                                           const at::Tensor& q_positions, int64_t s) const {
  // As the model computes it: fp32 scores over the live entries, masked by position.
  const Layer& l = layers_.at(layer);
  const int64_t b = q.size(0), h = q.size(1), voters = q.size(2), d = q.size(3);
  const int64_t hk = l.keys.size(1), g = h / hk;
  auto keys = l.keys.narrow(2, 0, s);
  auto scores = at::matmul(q.to(at::kFloat).reshape({b, hk, g * voters, d}),
                           keys.to(at::kFloat).transpose(-1, -2)) /
                std::sqrt(static_cast<double>(d));
  auto k_pos = l.positions.narrow(2, 0, s).unsqueeze(-2);  // (B, Hk, 1, S)
  auto q_pos = q_positions.view({b, 1, 1, voters}).repeat({1, 1, g, 1}).view({b, 1, g * voters, 1});
  auto visible = (k_pos >= 0).logical_and(k_pos <= q_pos);
  auto probs = at::softmax(scores.masked_fill(visible.logical_not(), -kInf), -1).nan_to_num(0);
  return probs.sum(2);  // (B, Hk, S): summed over the group's heads and the voting queries
}

at::Tensor BudgetedKvCache::pool_votes(int64_t layer, const at::Tensor& mass, int64_t s) const {
  if (policy_.kind != PolicyKind::kSnapKV || policy_.kernel <= 1) return mass;
  const Layer& l = layers_.at(layer);
  const int64_t b = mass.size(0), hk = mass.size(1), k = policy_.kernel;
  if (policy_.pool == "max")
    return at::max_pool1d(mass.reshape({b * hk, 1, s}), {k}, {1}, {k / 2}).view({b, hk, s});
  // kvpress: the window's own keys (kept anyway) lend nothing to their neighbours, and the
  // average divides by `kernel` at the edges too (zero padding counted).
  auto window_start = std::get<0>(
      l.recent_positions.masked_fill(l.recent_positions < 0, std::numeric_limits<int64_t>::max())
          .min(1));
  auto outside = mass.masked_fill(l.positions.narrow(2, 0, s) >= window_start.view({b, 1, 1}), 0);
  return at::avg_pool1d(outside.reshape({b * hk, 1, s}), {k}, {1}, {k / 2}, /*ceil_mode=*/false,
                        /*count_include_pad=*/true)
      .view({b, hk, s});
}

at::Tensor BudgetedKvCache::scores(int64_t layer) const {
  const Layer& l = layers_.at(layer);
  const int64_t s = l.length.max().item<int64_t>();
  auto pos = l.positions.narrow(2, 0, s);
  auto stat = l.stat.narrow(2, 0, s);
  auto posf = pos.to(at::kFloat);
  auto seen = seen_.view({-1, 1, 1});  // (B, 1, 1)
  at::Tensor score;
  switch (policy_.kind) {
    case PolicyKind::kStreaming:  // sinks, then the last `window` positions; older ones go
      score = at::where(pos < policy_.sinks, at::full_like(posf, kInf),
                        at::where(pos >= seen - policy_.window, posf, at::full_like(posf, -kInf)));
      break;
    case PolicyKind::kH2O:
    case PolicyKind::kSnapKV:
      score = at::where(pos >= seen - policy_.window, at::full_like(stat, kInf), stat);
      break;
    case PolicyKind::kSageKV:
      score = at::where((pos >= seen - policy_.window).logical_or(pos < policy_.sinks),
                        at::full_like(stat, kInf), stat);
      break;
    case PolicyKind::kKnorm:
      score = -stat;
      break;
    case PolicyKind::kTrimKV:
    case PolicyKind::kDBTrimKV: {
      // The next query sits at position seen (= t + 1 for the last position t seen).
      score = (seen.to(at::kFloat) - posf) * stat;
      if (policy_.horizon > 1)
        score = score + log1mexp(stat * static_cast<double>(policy_.horizon)) - log1mexp(stat);
      break;
    }
    default:
      score = stat.clone();
  }
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
  const double floor = std::log(policy_.threshold);
  for (int64_t li = 0; li < static_cast<int64_t>(layers_.size()); ++li) {
    Layer& l = layers_[li];
    if (!l.keys.defined()) continue;
    auto score = scores(li);
    auto live = l.positions.narrow(2, 0, score.size(2)) >= 0;
    auto keep = (score >= floor).logical_and(live);
    if (policy_.min_per_head > 0) {  // the floor per head applies here too
      auto k = std::min(policy_.min_per_head, score.size(2));
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
    if (policy_.min_per_head > 0) {
      // Each head's best min_per_head entries are kept whatever the global ranking says.
      auto k = std::min(policy_.min_per_head, score.size(2));
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
    if (!l.keys.defined() || !one_time() || !l.recent_q.defined()) continue;
    const int64_t s = l.length.max().item<int64_t>();
    l.stat.narrow(2, 0, s).copy_(
        pool_votes(li, attention_mass(li, l.recent_q, l.recent_positions, s), s));
  }
  if (policy_.global())
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
  if (policy_.global()) evict_global(budget_, budget_);
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
  if (policy_.kind == PolicyKind::kRandom || policy_.threshold > 0 || !seen_.defined())
    return false;
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
    due = due || (!policy_.global() && host_longest_[i] > budget_ + policy_.buffer);
    full = full || host_longest_[i] + 1 > layers_[i].keys.size(2);
  }
  host_total_ += nl * hk;
  due = due || (policy_.global() && host_total_ > nl * hk * (budget_ + policy_.buffer));
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
    if (policy_.threshold > 0) evict_below_threshold();
    if (policy_.global())
      evict_global(budget_, budget_ + policy_.buffer);
    else
      evict_per_head(budget_, budget_ + policy_.buffer);
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
  copy->generator_ = generator_.clone();
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
