// The budgeted cache's sequences and their policies (eval/budgeted_cache.h). Each sequence of a
// batch may have its own budget (a fractional budget resolves per prompt): one policy per distinct
// budget (budget-dependent defaults such as h2o's recent window differ), each applied to its group
// of rows, and the per-row tensors eviction reads: each row's budget, its per-head budget in each
// layer (its pyramid share under alloc=pyramid), its adakv floor and where its query statistics
// start.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "eval/policies/policy_registry.h"

namespace retain {

class PolicyRows {
 public:
  // One budget per sequence of the batch (the batch size must then match), or one for all.
  PolicyRows(const ModelConfig& model, const PolicySpec& spec, std::vector<int64_t> budgets,
             const LearnedModules& learned);

  // Fixes the batch size and device on the first step; later calls check the batch size.
  void bind(int64_t batch, const at::Device& device);
  bool bound() const { return budget_rows_.defined(); }
  int64_t batch() const { return budget_rows_.size(0); }

  // The properties every group's policy shares (checked at construction: they do not depend on
  // the budget).
  const EvictionPolicy& policy() const { return *groups_.front().policy.policy; }
  // The most voting queries any group's policy takes.
  int64_t max_voters() const;
  // Row r's budget (entries per KV head), on the host.
  int64_t budget(size_t row) const { return budgets_.size() == 1 ? budgets_[0] : budgets_[row]; }

  // From the first step (bind), on the cache's device:
  const at::Tensor& budgets() const { return budget_rows_; }  // (B,) int64
  // The per-head budget of `layer` for each sequence (B,): its budget, or its pyramid share.
  const at::Tensor& layer_budget(int64_t layer) const {
    return layer_budget_rows_.at(static_cast<size_t>(layer));
  }
  int64_t host_layer_budget(int64_t layer, size_t row) const {
    return host_layer_budgets_.at(static_cast<size_t>(layer)).at(row);
  }
  const at::Tensor& adakv_floors() const { return adakv_floor_rows_; }  // (B,)
  // Per sequence the first position its query statistics count (its group's policy's) (B,).
  const at::Tensor& query_statistics_from() const { return query_statistics_from_rows_; }

  // f(policy, rows) for each group; `rows` selects the group's sequences of a (B, ...) tensor
  // (undefined: every row, when one budget serves the batch). The groups' results (B_g, ...) are
  // put back in batch order.
  template <typename F>
  at::Tensor by_group(F&& f) const;

 private:
  // Each group's policy is copied with the cache (clone()).
  struct PolicyHandle {
    std::unique_ptr<EvictionPolicy> policy;
    explicit PolicyHandle(std::unique_ptr<EvictionPolicy> p) : policy(std::move(p)) {}
    PolicyHandle(const PolicyHandle& other) : policy(other.policy->clone()) {}
    PolicyHandle& operator=(const PolicyHandle&) = delete;
  };
  // The sequences sharing one budget, and that budget's policy.
  struct Group {
    PolicyHandle policy;
    int64_t budget;
    std::vector<int64_t> rows;  // empty: every row (one budget for the batch)
    at::Tensor index;           // rows on the cache's device (undefined for every row)
  };

  int64_t num_layers_;
  BudgetAllocation allocation_;
  std::vector<int64_t> budgets_;  // per sequence, or one for all
  std::vector<Group> groups_;
  at::Tensor budget_rows_;
  std::vector<at::Tensor> layer_budget_rows_;
  std::vector<std::vector<int64_t>> host_layer_budgets_;  // per layer, per row
  at::Tensor adakv_floor_rows_;
  at::Tensor query_statistics_from_rows_;
};

// t's rows `rows` (all of them when undefined).
inline at::Tensor select_rows(const at::Tensor& t, const at::Tensor& rows) {
  return rows.defined() ? t.index_select(0, rows) : t;
}

template <typename F>
at::Tensor PolicyRows::by_group(F&& f) const {
  if (groups_.size() == 1) return f(*groups_.front().policy.policy, at::Tensor());
  at::Tensor out;
  for (const auto& g : groups_) {
    at::Tensor part = f(*g.policy.policy, g.index);
    if (!out.defined()) {
      auto sizes = part.sizes().vec();
      sizes[0] = batch();
      out = at::empty(sizes, part.options());
    }
    out.index_copy_(0, g.index, part);
  }
  return out;
}

}  // namespace retain
