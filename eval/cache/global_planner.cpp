// dbtrimkv's global eviction: one top-k over every entry of a sequence, across layers and heads
// (per-head lengths vary); under tensor parallelism the group's ranks rank their entries together.
#include "dist/collectives.h"
#include "eval/cache/eviction_planner.h"
#include "eval/cache/ranking.h"

namespace retain {

namespace {

class GlobalPlanner : public EvictionPlanner {
 public:
  void cut(const EvictionScope& scope, int64_t keep_extra, int64_t trigger_extra) const override {
    const auto& budget = scope.rows.budgets();
    evict(scope, budget + keep_extra, budget + trigger_extra);
  }
  void before_generating_step(const EvictionScope& scope) const override {
    // The step then adds L Hk entries.
    if (scope.rows.bound()) cut(scope, 0, 0);
  }
  bool due(const StaticDecodeCounts& counts, const PolicyRows& rows, const ModelConfig& model,
           int64_t buffer) const override {
    const int64_t pool = model.num_layers * model.num_kv_heads;
    for (int64_t r = 0; r < counts.rows(); ++r)
      if (counts.total(r) > pool * (rows.budget(static_cast<size_t>(r)) + buffer)) return true;
    return false;
  }

 private:
  // A sequence holding more than L Hk trigger[b] entries keeps its top L Hk keep[b].
  static void evict(const EvictionScope& scope, const at::Tensor& keep, const at::Tensor& trigger);
};

void GlobalPlanner::evict(const EvictionScope& scope, const at::Tensor& keep,
                          const at::Tensor& trigger) {
  CacheStorage& storage = scope.storage;
  const int64_t hk = scope.model.num_kv_heads, nl = scope.model.num_layers;
  // The pool spans every KV head of the model: under tensor parallelism the group's ranks rank
  // their entries together.
  const int64_t pool_heads = scope.model.global_kv_heads();
  Collectives* group = scope.tensor_parallel;
  if (!storage.all_allocated()) return;  // before the first step
  auto total = at::zeros_like(storage.layer(0).length.select(1, 0));
  for (int64_t li = 0; li < nl; ++li) total += storage.layer(li).length.sum(1);
  if (group != nullptr) group->all_reduce_sum(total);
  // Only the sequences over their global trigger are cut back; the others keep everything.
  auto over = total > trigger * (nl * pool_heads);  // (B,)
  if (!over.any().item<bool>()) return;
  // Scores of every entry of a sequence, across layers and heads, in one row per sequence.
  const int64_t min_per_head = scope.rows.policy().min_per_head();
  std::vector<at::Tensor> scored;
  std::vector<int64_t> widths;
  for (int64_t li = 0; li < nl; ++li) {
    auto score = scope.scores(li);
    if (min_per_head > 0) {
      // Each head's best min_per_head entries are kept whatever the global ranking says.
      auto k = std::min(min_per_head, score.size(2));
      auto top = top_k_indices(score, k);
      auto bonus = at::zeros_like(score).scatter_(2, top, kInfScore);
      score = at::where(score > -kInfScore, score + bonus, score);
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
      score = at::constant_pad_nd(score, {0, padded[li] - widths[li]}, -kInfScore);
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
    const int64_t s = widths[li], block = hk * padded[li];
    auto kept = keep_all.narrow(1, offset + rank * block, block)
                    .view({-1, hk, padded[li]})
                    .narrow(2, 0, s)
                    .logical_and(storage.layer(li).positions.narrow(2, 0, s) >= 0);
    storage.compact(li, kept);
    offset += ranks * block;
  }
}

}  // namespace

std::shared_ptr<const EvictionPlanner> make_global_planner() {
  return std::make_shared<GlobalPlanner>();
}

}  // namespace retain
