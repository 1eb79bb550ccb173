#include "eval/budgeted_cache.h"

#include <algorithm>

#include "core/error.h"
#include "dist/collectives.h"
#include "eval/cache/ranking.h"
#include "kernels/decode_attention.h"

namespace retain {

namespace {

int64_t capacity_for(const std::vector<int64_t>& budgets, const PolicySpec& policy, int64_t chunk) {
  RETAIN_CHECK(chunk >= 1, "--chunk must be >= 1");
  RETAIN_CHECK(!budgets.empty(), "BudgetedKvCache: no budget");
  return *std::max_element(budgets.begin(), budgets.end()) + policy.buffer + chunk;
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
      chunk_(chunk),
      learned_(learned),
      rows_(model, policy, budgets, learned),
      storage_(model.num_layers, capacity_for(budgets, policy, chunk)),
      queries_(model.num_layers),
      planner_(make_eviction_planner(policy, rows_.policy())),
      step_stat_(static_cast<size_t>(model.num_layers)) {
  for (int64_t w : model.sliding_window)
    RETAIN_CHECK(w == 0,
                 "eviction policies on sliding-window layers are not supported (the model's window "
                 "already bounds them)");
}

void BudgetedKvCache::bind_rows(int64_t batch, const at::Device& device) {
  const bool first = !rows_.bound();
  rows_.bind(batch, device);
  if (first) row_peaks_.assign(static_cast<size_t>(batch), 0);
}

EvictionScope BudgetedKvCache::scope() {
  return {storage_, rows_, model_, tp_ != nullptr && tp_->world() > 1 ? tp_ : nullptr,
          [this](int64_t layer) { return scores(layer); }};
}

void BudgetedKvCache::observe(const LayerTensors& t) {
  bind_rows(t.q.size(0), t.q.device());
  step_stat_.at(t.layer) =
      rows_.by_group([&](const EvictionPolicy& policy, const at::Tensor& rows) {
        if (!rows.defined()) return policy.token_statistic(t, learned_);
        return policy.token_statistic(
            {t.layer, select_rows(t.hidden, rows), select_rows(t.q, rows), select_rows(t.k, rows),
             select_rows(t.v, rows), select_rows(t.positions, rows),
             select_rows(t.q_before_rope, rows)},
            learned_);
      });
  queries_.observe(rows_, t, /*window_frozen=*/static_ || frozen_, /*statistics_frozen=*/frozen_);
}

KvEntries BudgetedKvCache::append(int64_t layer, const at::Tensor& keys, const at::Tensor& values,
                                  const at::Tensor& positions) {
  bind_rows(keys.size(0), keys.device());
  const int64_t n = keys.size(2);
  RETAIN_CHECK(n <= chunk_, "BudgetedKvCache: a step of ", n,
               " tokens exceeds the prefill chunk the cache was sized for");
  // The new entries go after each head's live ones. Static decode returns every slot (its shape
  // must not change between steps; end_static_step made room); the empty ones carry position -1,
  // which attention masks.
  int64_t longest = storage_.append(layer, keys, values, positions, step_stat_.at(layer), static_);
  step_positions_ = positions;

  if (n > 1 && !final_step_) generating_ = false;  // a new prompt's chunk: not generating

  // The votes (see Votes): accumulated every step, the latest query's every step, or the
  // observation window's at each prompt chunk and at the prompt's last token, never while decoding.
  // Keep mode evicts nothing after the context: no vote counts any more.
  CacheLayer& l = storage_.layer(layer);
  auto vote = [&](const at::Tensor& q, const at::Tensor& q_positions, bool window) {
    return queries_.votes(rows_, l, q, q_positions, longest, window, tp_, identical_rows_,
                          shared_votes_.get());
  };
  switch (frozen_ ? Votes::kNone : rows_.policy().votes()) {
    case Votes::kNone:
      break;
    case Votes::kAccumulate:
      l.stat.narrow(2, 0, longest).add_(vote(queries_.step_queries(layer), positions, false));
      break;
    case Votes::kLatestQuery:
      l.stat.narrow(2, 0, longest)
          .copy_(vote(queries_.step_queries(layer).narrow(2, n - 1, 1),
                      positions.narrow(1, n - 1, 1), false));
      break;
    case Votes::kObservationWindow:
      if (n >= 2 || final_step_)  // the latest vote replaces the earlier ones
        l.stat.narrow(2, 0, longest)
            .copy_(vote(queries_.window_queries(layer), queries_.window_positions(layer), true));
      break;
  }
  if (final_step_) {
    planner_->after_generating_append(scope(), layer, n);
    longest = l.longest;
  }
  return {l.keys.narrow(2, 0, longest), l.values.narrow(2, 0, longest),
          l.positions.narrow(2, 0, longest)};
}

at::Tensor BudgetedKvCache::scores(int64_t layer) const {
  const CacheLayer& l = storage_.layer(layer);
  const int64_t s = l.length.max().item<int64_t>();
  auto pos = l.positions.narrow(2, 0, s), stat = l.stat.narrow(2, 0, s);
  auto seen = seen_.view({-1, 1, 1});
  auto keys = l.keys.narrow(2, 0, s), values = l.values.narrow(2, 0, s);
  const at::Tensor mean = queries_.query_mean(layer), covariance = queries_.query_covariance(layer);
  auto score = rows_.by_group([&](const EvictionPolicy& policy, const at::Tensor& rows) {
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
    return policy.score(context);
  });
  if (!protect_.empty()) {
    // Row b's entries at positions >= protect[b] (when >= 0) are never evicted.
    std::vector<int64_t> from = protect_;
    if (from.size() == 1) from.assign(static_cast<size_t>(pos.size(0)), protect_.front());
    RETAIN_CHECK(static_cast<int64_t>(from.size()) == pos.size(0), "BudgetedKvCache: ", from.size(),
                 " protected positions for a batch of ", pos.size(0));
    auto first = per_row(at::tensor(from, at::kLong).to(pos.device()), 3);
    score = score.masked_fill((first >= 0).logical_and(pos >= first), kInfScore);
  }
  return score.masked_fill(pos < 0, -kInfScore);
}

at::Tensor BudgetedKvCache::attend(int64_t layer, const at::Tensor& q,
                                   const at::Tensor& q_positions, const KvEntries& entries,
                                   double scale, int64_t window) const {
  if (q.size(2) == 1 && window == 0 &&
      decode_attention_uses_kernel(q, entries.keys, entries.values, entries.positions))
    return decode_attention(q, entries.keys, entries.values, entries.positions,
                            storage_.layer(layer).length, q_positions, scale);
  return KvCache::attend(layer, q, q_positions, entries, scale, window);
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
    for (int64_t li = 0; li < storage_.num_layers(); ++li)
      lengths.push_back(storage_.layer(li).length);
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
  identical_rows_ = 1;
  shared_votes_.reset();
  if (!static_) evict_now();
}

void BudgetedKvCache::evict_now() {
  // Padding (position -1: a batched prompt's left padding, a finished row's steps) was stored
  // like a token; drop it before anything counts it, so a padded row evicts exactly as it would
  // alone and the peak counts tokens only. One read says whether the steps since the last
  // eviction had any (static decode stores several steps before evicting).
  const bool padded = !step_positions_.defined() || static_step_count_ > 0 ||
                      step_positions_.lt(0).any().item<bool>();
  static_step_count_ = 0;
  if (padded) storage_.drop_padding();
  // Keep mode evicts nothing after the context, so the entries only grow and the peak is what the
  // cache holds when asked (peak_bytes / row_bytes take the live count then).
  if (!frozen_) {
    // Before eviction: the real peak, of the batch and of each row.
    const std::vector<int64_t> entries = storage_.row_entries();
    const int64_t per_entry = storage_.bytes_per_entry();
    int64_t total = 0;
    for (size_t r = 0; r < entries.size(); ++r) {
      total += entries[r];
      row_peaks_[r] = std::max(row_peaks_[r], entries[r] * per_entry);
    }
    peak_bytes_ = std::max(peak_bytes_, total * per_entry);
    planner_->end_of_step(scope(), spec_.buffer);
  }
  queries_.end_step();
  for (auto& stat : step_stat_) stat = at::Tensor();
}

void BudgetedKvCache::compress_context() {
  RETAIN_CHECK(!static_, "BudgetedKvCache: compress_context during static decode");
  if (rows_.policy().votes() == Votes::kObservationWindow)
    for (int64_t li = 0; li < storage_.num_layers(); ++li) {
      CacheLayer& l = storage_.layer(li);
      if (!l.allocated() || !queries_.window_queries(li).defined()) continue;
      const int64_t s = l.length.max().item<int64_t>();
      l.stat.narrow(2, 0, s).copy_(queries_.votes(rows_, l, queries_.window_queries(li),
                                                  queries_.window_positions(li), s, true, tp_));
    }
  if (!rows_.bound()) return;  // nothing read yet
  planner_->cut(scope(), 0, 0);
  frozen_ = true;
}

void BudgetedKvCache::begin_generating_step() {
  generating_ = true;
  if (frozen_) return;  // keep mode: the context was compressed once, nothing more goes
  final_step_ = true;
  planner_->before_generating_step(scope());
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
  if (!rows_.policy().static_decode() || !seen_.defined() || !storage_.all_allocated())
    return false;
  static_ = true;
  static_counts_.sync(storage_);
  static_counts_.ensure_room(storage_);
  return true;
}

bool BudgetedKvCache::end_static_step() {
  RETAIN_CHECK(static_, "BudgetedKvCache: end_static_step outside static decode");
  ++static_step_count_;  // steps whose padding (a finished row's) waits for the next eviction
  // Every head of every row gained one entry (finished rows one at position -1, which the next
  // eviction drops as an eager step drops it at once; it never changes a running row's choice).
  static_counts_.add_step(model_.num_kv_heads);
  // Keep mode evicts nothing after the context.
  const bool due = !frozen_ && planner_->due(static_counts_, rows_, model_, spec_.buffer);
  if (!due && !static_counts_.full(storage_)) return false;
  // Exactly the eager end of step; where the counts over-estimate it evicts nothing more.
  evict_now();
  static_counts_.sync(storage_);
  return static_counts_.ensure_room(storage_);
}

void BudgetedKvCache::end_static_decode() {
  if (!static_) return;
  static_ = false;
  evict_now();
  storage_.refresh_longest();  // the static steps grew the lengths on the device only
}

bool BudgetedKvCache::open_rows(int64_t rows, const at::Device& device, at::ScalarType dtype) {
  RETAIN_CHECK(!rows_.bound(), "BudgetedKvCache: open_rows on a cache that has read steps");
  RETAIN_CHECK(rows >= 1, "BudgetedKvCache: open_rows needs at least one row, found ", rows);
  if (!rows_.policy().static_decode() || (tp_ != nullptr && tp_->world() > 1)) return false;
  bind_rows(rows, device);
  storage_.allocate_rows(rows, model_.num_kv_heads, model_.head_dim,
                         at::TensorOptions(device).dtype(dtype));
  const auto counts = at::TensorOptions(device).dtype(at::kLong);
  seen_ = at::zeros({rows}, counts);
  attended_max_ = at::zeros({rows}, counts);
  attended_total_max_ = at::zeros({rows}, counts);
  // Every row that holds a request is past its prompt: steps record what their queries read.
  generating_ = true;
  static_ = true;
  static_counts_.sync(storage_);
  return true;
}

bool BudgetedKvCache::load_row(int64_t row, const BudgetedKvCache& source) {
  RETAIN_CHECK(static_ && rows_.bound(), "BudgetedKvCache: load_row before open_rows");
  RETAIN_CHECK(row >= 0 && row < rows_.batch(), "BudgetedKvCache: row ", row, " of ",
               rows_.batch());
  RETAIN_CHECK(source.spec_.text == spec_.text && source.learned_.gates == learned_.gates &&
                   source.learned_.scorer == learned_.scorer,
               "BudgetedKvCache: a cache of policy '", source.spec_.text,
               "' cannot move into rows of policy '", spec_.text,
               "' (or their learned modules differ)");
  RETAIN_CHECK(source.rows_.bound() && source.rows_.batch() == 1 && source.seen_.defined(),
               "BudgetedKvCache: load_row takes a cache of one row that has read its prompt");
  RETAIN_CHECK(source.rows_.budget(0) == rows_.budget(0), "BudgetedKvCache: a cache of budget ",
               source.rows_.budget(0), " cannot move into rows of budget ", rows_.budget(0));
  RETAIN_CHECK(source.generating_ && !source.static_ && !source.frozen_,
               "BudgetedKvCache: load_row takes an eager cache that has generated its first token");
  bool moved = storage_.load_row(row, source.storage_, 0);
  moved = queries_.load_row(row, rows_.batch(), source.queries_, 0) || moved;
  seen_.narrow(0, row, 1).copy_(source.seen_);
  if (source.attended_max_.defined()) {
    attended_max_.narrow(0, row, 1).copy_(source.attended_max_);
    attended_total_max_.narrow(0, row, 1).copy_(source.attended_total_max_);
  }
  row_peaks_.at(static_cast<size_t>(row)) = source.row_peaks_.at(0);
  static_counts_.sync(storage_);
  return static_counts_.ensure_room(storage_) || moved;
}

void BudgetedKvCache::clear_row(int64_t row) {
  RETAIN_CHECK(static_ && rows_.bound(), "BudgetedKvCache: clear_row before open_rows");
  RETAIN_CHECK(row >= 0 && row < rows_.batch(), "BudgetedKvCache: row ", row, " of ",
               rows_.batch());
  storage_.clear_row(row);
  queries_.clear_row(row);
  for (at::Tensor* t : {&seen_, &attended_max_, &attended_total_max_}) t->narrow(0, row, 1).zero_();
  row_peaks_.at(static_cast<size_t>(row)) = 0;
  static_counts_.sync(storage_);
}

int64_t BudgetedKvCache::allocated_bytes() const {
  int64_t bytes = 0;
  for (int64_t li = 0; li < storage_.num_layers(); ++li) {
    const CacheLayer& l = storage_.layer(li);
    if (l.allocated()) bytes += l.keys.nbytes() + l.values.nbytes();
  }
  return bytes;
}

int64_t BudgetedKvCache::live_bytes() const {
  int64_t entries = 0;
  for (int64_t e : storage_.row_entries()) entries += e;
  return entries * storage_.bytes_per_entry();
}

int64_t BudgetedKvCache::budget_bytes() const {
  int64_t bytes = 0;
  for (const auto& row : row_bytes()) bytes += row.budget;
  return bytes;
}

std::vector<KvCache::RowBytes> BudgetedKvCache::row_bytes() const {
  const std::vector<int64_t> entries = storage_.row_entries();
  const int64_t per_entry = storage_.bytes_per_entry();
  std::vector<RowBytes> out;
  for (size_t r = 0; r < entries.size(); ++r) {
    const int64_t live = entries[r] * per_entry;
    out.push_back({live, std::max(row_peaks_[r], live),
                   model_.num_layers * model_.num_kv_heads * rows_.budget(r) * per_entry});
  }
  return out;
}

std::unique_ptr<KvCache> BudgetedKvCache::clone() const {
  auto copy = std::make_unique<BudgetedKvCache>(*this);  // members are tensor handles: deepen them
  copy->storage_.deepen();
  copy->queries_.deepen();
  // Updated in place by the steps.
  for (at::Tensor* t : {&copy->seen_, &copy->attended_max_, &copy->attended_total_max_})
    if (t->defined()) *t = t->clone();
  return copy;
}

}  // namespace retain
