#include "eval/cache_factory.h"

#include <cmath>

#include "core/error.h"
#include "eval/budgeted_cache.h"

namespace retain {

int64_t resolve_budget(double budget, int64_t prompt_tokens) {
  RETAIN_CHECK(budget > 0, "--budget must be positive, found ", budget);
  if (budget >= 1) {
    RETAIN_CHECK(budget == std::floor(budget), "--budget ", budget,
                 " must be an integer (tokens per head) or below 1 (a fraction of the prompt)");
    return static_cast<int64_t>(budget);
  }
  return std::max<int64_t>(
      1, static_cast<int64_t>(std::llround(budget * static_cast<double>(prompt_tokens))));
}

std::unique_ptr<KvCache> make_kv_cache(const ModelConfig& model, const PolicySpec& policy,
                                       double budget, int64_t prompt_tokens, int64_t chunk,
                                       LearnedModules learned) {
  if (!policy.budgeted()) return std::make_unique<FullKvCache>(model.num_layers);
  return std::make_unique<BudgetedKvCache>(model, policy, resolve_budget(budget, prompt_tokens),
                                           std::max<int64_t>(chunk, 1), learned);
}

std::unique_ptr<KvCache> make_batch_kv_cache(const ModelConfig& model, const PolicySpec& policy,
                                             double budget,
                                             const std::vector<int64_t>& prompt_tokens,
                                             int64_t chunk, LearnedModules learned,
                                             const std::vector<int64_t>& extra) {
  return make_batch_kv_cache(model, policy, std::vector<double>(prompt_tokens.size(), budget),
                             prompt_tokens, chunk, learned, extra);
}

std::unique_ptr<KvCache> make_batch_kv_cache(const ModelConfig& model, const PolicySpec& policy,
                                             const std::vector<double>& budgets,
                                             const std::vector<int64_t>& prompt_tokens,
                                             int64_t chunk, LearnedModules learned,
                                             const std::vector<int64_t>& extra) {
  RETAIN_CHECK(!prompt_tokens.empty(), "make_batch_kv_cache: no rows");
  RETAIN_CHECK(budgets.size() == prompt_tokens.size(), "make_batch_kv_cache: ", budgets.size(),
               " budgets for ", prompt_tokens.size(), " rows");
  RETAIN_CHECK(extra.empty() || extra.size() == prompt_tokens.size(),
               "make_batch_kv_cache: ", extra.size(), " extra budgets for ", prompt_tokens.size(),
               " rows");
  if (!policy.budgeted()) return std::make_unique<FullKvCache>(model.num_layers);
  std::vector<int64_t> entries;
  for (size_t r = 0; r < prompt_tokens.size(); ++r)
    entries.push_back(resolve_budget(budgets[r], prompt_tokens[r]) +
                      (extra.empty() ? 0 : extra[r]));
  return std::make_unique<BudgetedKvCache>(model, policy, std::move(entries),
                                           std::max<int64_t>(chunk, 1), learned);
}

}  // namespace retain
