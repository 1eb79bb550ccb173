// Builds the KV cache a policy needs: the full cache for `full`, a budgeted cache otherwise.
// A budget below 1 is a fraction of the prompt (0.2 = 20% of the prompt's tokens per head).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "eval/policies/policy_registry.h"
#include "gates/gate_bank.h"
#include "model/kv_cache.h"
#include "model/model_config.h"

namespace retain {

// Entries per KV head for `budget` (absolute when >= 1, a fraction of `prompt_tokens` below 1).
int64_t resolve_budget(double budget, int64_t prompt_tokens);

std::unique_ptr<KvCache> make_kv_cache(const ModelConfig& model, const PolicySpec& policy,
                                       double budget, int64_t prompt_tokens, int64_t chunk,
                                       LearnedModules learned);

// The cache of a batch: a fractional budget resolves for each row's `prompt_tokens`; `extra`
// (empty, or one per row) adds entries to a row's budget.
std::unique_ptr<KvCache> make_batch_kv_cache(const ModelConfig& model, const PolicySpec& policy,
                                             double budget,
                                             const std::vector<int64_t>& prompt_tokens,
                                             int64_t chunk, LearnedModules learned,
                                             const std::vector<int64_t>& extra = {});
// The same with a budget of its own for each row (a sweep's budgets sharing one context read).
std::unique_ptr<KvCache> make_batch_kv_cache(const ModelConfig& model, const PolicySpec& policy,
                                             const std::vector<double>& budgets,
                                             const std::vector<int64_t>& prompt_tokens,
                                             int64_t chunk, LearnedModules learned,
                                             const std::vector<int64_t>& extra = {});

}  // namespace retain
