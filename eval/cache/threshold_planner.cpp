// Threshold eviction (trimkv / kvzap with threshold > 0): entries whose retention score falls
// below the threshold leave at the end of every step, before the budget's cut.
#include <cmath>

#include "eval/cache/eviction_planner.h"
#include "eval/cache/ranking.h"

namespace retain {

namespace {

class ThresholdPlanner : public EvictionPlanner {
 public:
  ThresholdPlanner(std::shared_ptr<const EvictionPlanner> then, double threshold,
                   int64_t min_per_head)
      : then_(std::move(then)), threshold_(threshold), min_per_head_(min_per_head) {}

  void cut(const EvictionScope& scope, int64_t keep_extra, int64_t trigger_extra) const override {
    then_->cut(scope, keep_extra, trigger_extra);
  }
  void end_of_step(const EvictionScope& scope, int64_t buffer) const override {
    evict_below_threshold(scope);
    then_->end_of_step(scope, buffer);
  }
  void before_generating_step(const EvictionScope& scope) const override {
    then_->before_generating_step(scope);
  }
  void after_generating_append(const EvictionScope& scope, int64_t layer,
                               int64_t tokens) const override {
    then_->after_generating_append(scope, layer, tokens);
  }
  bool due(const StaticDecodeCounts& counts, const PolicyRows& rows, const ModelConfig& model,
           int64_t buffer) const override {
    return then_->due(counts, rows, model, buffer);
  }

 private:
  void evict_below_threshold(const EvictionScope& scope) const {
    // Scores are log retention (log beta^(t + 1 - pos), or the horizon form): compare in log
    // space.
    const double floor = std::log(threshold_);
    for (int64_t li = 0; li < scope.storage.num_layers(); ++li) {
      const CacheLayer& l = scope.storage.layer(li);
      if (!l.allocated()) continue;
      auto score = scope.scores(li);
      auto live = l.positions.narrow(2, 0, score.size(2)) >= 0;
      auto keep = (score >= floor).logical_and(live);
      if (min_per_head_ > 0) {  // the floor per head applies here too
        auto k = std::min(min_per_head_, score.size(2));
        auto top = top_k_indices(score, k);
        keep.logical_or_(at::zeros_like(keep).scatter_(2, top, true).logical_and(live));
      }
      if (keep.logical_not().logical_and(live).any().item<bool>()) scope.storage.compact(li, keep);
    }
  }

  std::shared_ptr<const EvictionPlanner> then_;
  double threshold_;
  int64_t min_per_head_;
};

}  // namespace

std::shared_ptr<const EvictionPlanner> make_threshold_planner(
    std::shared_ptr<const EvictionPlanner> then, double threshold, int64_t min_per_head) {
  return std::make_shared<ThresholdPlanner>(std::move(then), threshold, min_per_head);
}

}  // namespace retain
