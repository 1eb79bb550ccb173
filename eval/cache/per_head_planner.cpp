// Per-head eviction (alloc=uniform / pyramid) and AdaKV's pooled eviction over a layer's heads.
#include "eval/cache/eviction_planner.h"
#include "eval/cache/ranking.h"

namespace retain {

namespace {

class PerHeadPlanner : public EvictionPlanner {
 public:
  explicit PerHeadPlanner(bool pooled) : pooled_(pooled) {}

  void cut(const EvictionScope& scope, int64_t keep_extra, int64_t trigger_extra) const override {
    for (int64_t li = 0; li < scope.storage.num_layers(); ++li)
      cut_layer(scope, li, scope.rows.layer_budget(li) + keep_extra,
                scope.rows.layer_budget(li) + trigger_extra);
  }

  void after_generating_append(const EvictionScope& scope, int64_t layer,
                               int64_t tokens) const override {
    const auto& budget = scope.rows.layer_budget(layer);
    cut_layer(scope, layer, budget + tokens, budget + tokens);
  }

  bool due(const StaticDecodeCounts& counts, const PolicyRows& rows, const ModelConfig& model,
           int64_t buffer) const override {
    const int64_t hk = model.num_kv_heads;
    for (int64_t i = 0; i < counts.layers(); ++i)
      for (int64_t r = 0; r < counts.rows(); ++r) {
        const int64_t trigger = rows.host_layer_budget(i, static_cast<size_t>(r)) + buffer;
        if (pooled_ ? counts.layer_total(i, r) > hk * trigger : counts.longest(i, r) > trigger)
          return true;
      }
    return false;
  }

 private:
  // Per head: a head of sequence b holding more than trigger[b] entries keeps its top keep[b];
  // pooled: a layer of sequence b holding more than Hk trigger[b] keeps its top Hk keep[b] over
  // all its heads, each head its best adakv floor first.
  void cut_layer(const EvictionScope& scope, int64_t layer, const at::Tensor& keep_count,
                 const at::Tensor& trigger) const {
    const CacheLayer& l = scope.storage.layer(layer);
    if (!l.allocated()) return;
    const int64_t hk = l.keys.size(1);
    // Only the heads (pooled: the layers) over their row's trigger are cut back; the others keep
    // everything.
    auto over = pooled_ ? (l.length.sum(1) > trigger * hk).unsqueeze(1)  // (B, 1)
                        : l.length > trigger.unsqueeze(1);               // (B, Hk)
    if (!over.any().item<bool>()) return;
    auto score = scope.scores(layer);
    const int64_t b = score.size(0), s = score.size(2);
    at::Tensor keep;
    if (pooled_) {
      // AdaKV: each head's best `floor` entries rank above every other entry of the layer (below
      // the protected ones, which score +inf), then one top Hk keep over the layer's heads.
      auto floor = top_k_mask(score, scope.rows.adakv_floors()).logical_and(score > -kInfScore);
      auto ranked = at::where(floor, std::numeric_limits<float>::max(), score).reshape({b, hk * s});
      keep = top_k_mask(ranked, keep_count * hk).logical_and(ranked > -kInfScore).view({b, hk, s});
    } else {
      keep = top_k_mask(score, keep_count).logical_and(score > -kInfScore);
    }
    keep = at::where(over.unsqueeze(-1), keep, at::ones_like(keep));
    keep.logical_and_(l.positions.narrow(2, 0, s) >= 0);
    scope.storage.compact(layer, keep);
  }

  bool pooled_;
};

}  // namespace

std::shared_ptr<const EvictionPlanner> make_per_head_planner(bool pooled) {
  return std::make_shared<PerHeadPlanner>(pooled);
}

}  // namespace retain
