#include "eval/cache/policy_rows.h"

#include <algorithm>

#include "core/error.h"

namespace retain {

namespace {

std::unique_ptr<EvictionPolicy> checked_policy(const PolicySpec& spec, int64_t budget,
                                               const LearnedModules& learned) {
  RETAIN_CHECK(spec.budgeted(), "BudgetedKvCache: the full policy uses FullKvCache");
  RETAIN_CHECK(budget >= 1, "--budget must leave at least 1 entry per head, found ", budget);
  RETAIN_CHECK(!spec.needs_gates() || learned.gates != nullptr, "--policy ", spec.name(),
               " needs learned gates: pass --gates FILE (retain export / import-gates)");
  RETAIN_CHECK(!spec.needs_scorer() || learned.scorer != nullptr, "--policy ", spec.name(),
               " needs its learned scorer: ", spec.name(), ":scorer=FILE (retain export of a ",
               spec.name(), " run)");
  RETAIN_CHECK(
      !spec.needs_scorer() || scorer_kind_name(learned.scorer->config().kind) == spec.name(),
      "--policy ", spec.name(), ": its scorer file holds a ",
      scorer_kind_name(learned.scorer->config().kind), " scorer");
  return make_policy(spec, budget);
}

}  // namespace

PolicyRows::PolicyRows(const ModelConfig& model, const PolicySpec& spec,
                       std::vector<int64_t> budgets, const LearnedModules& learned)
    : num_layers_(model.num_layers), allocation_(spec.allocation), budgets_(std::move(budgets)) {
  RETAIN_CHECK(!budgets_.empty(), "BudgetedKvCache: no budget");
  // One policy per distinct budget, in order of first appearance.
  for (size_t r = 0; r < budgets_.size(); ++r) {
    const int64_t budget = budgets_[r];
    auto group = std::find_if(groups_.begin(), groups_.end(),
                              [&](const Group& g) { return g.budget == budget; });
    if (group == groups_.end()) {
      groups_.push_back({PolicyHandle(checked_policy(spec, budget, learned)), budget, {}, {}});
      group = groups_.end() - 1;
    }
    group->rows.push_back(static_cast<int64_t>(r));
  }
  if (groups_.size() == 1) groups_.front().rows.clear();  // every row: no selection needed
  // What the cache reads from policy() alone must not depend on the budget.
  for (const auto& g : groups_) {
    const EvictionPolicy &first = policy(), &other = *g.policy.policy;
    RETAIN_CHECK(other.votes() == first.votes() && other.threshold() == first.threshold() &&
                     other.min_per_head() == first.min_per_head() &&
                     other.static_decode() == first.static_decode() &&
                     (other.query_statistics_from() >= 0) == (first.query_statistics_from() >= 0),
                 "BudgetedKvCache: --policy ", spec.name(),
                 " behaves differently at different budgets beyond its scores and votes");
  }
}

int64_t PolicyRows::max_voters() const {
  int64_t most = 0;
  for (const auto& g : groups_) most = std::max(most, g.policy.policy->voters());
  return most;
}

void PolicyRows::bind(int64_t batch, const at::Device& device) {
  if (bound()) {
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
  const bool pyramid = allocation_.kind == BudgetAllocation::Kind::kPyramid;
  host_layer_budgets_.assign(static_cast<size_t>(num_layers_), per_row);
  if (pyramid)
    for (size_t r = 0; r < per_row.size(); ++r) {
      const auto shares = pyramid_layer_budgets(per_row[r], num_layers_, allocation_.pyramid_beta);
      for (int64_t li = 0; li < num_layers_; ++li) host_layer_budgets_[li][r] = shares[li];
    }
  layer_budget_rows_.clear();
  for (const auto& budgets : host_layer_budgets_)
    layer_budget_rows_.push_back(pyramid ? at::tensor(budgets, at::kLong).to(device)
                                         : budget_rows_);
  std::vector<int64_t> floors;
  for (int64_t budget : per_row) floors.push_back(adakv_head_floor(budget, allocation_.safeguard));
  adakv_floor_rows_ = at::tensor(floors, at::kLong).to(device);
  // Where each row's query statistics start (expected_attention's sinks depend on the budget).
  std::vector<int64_t> from(static_cast<size_t>(batch), policy().query_statistics_from());
  for (auto& g : groups_) {
    if (!g.rows.empty()) g.index = at::tensor(g.rows, at::kLong).to(device);
    for (int64_t r : g.rows)
      from[static_cast<size_t>(r)] = g.policy.policy->query_statistics_from();
  }
  query_statistics_from_rows_ = at::tensor(from, at::kLong).to(device);
}

}  // namespace retain
