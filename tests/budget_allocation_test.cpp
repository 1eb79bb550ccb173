// The budget allocations (eval/budget_allocation.h) on hand-made statistics: pyramid's layer
// budgets follow PyramidKV's profile and sum to L M, each layer keeps its share of the best
// entries; adakv keeps a layer's top Hk M over all its heads with each head's floor; both hold
// L Hk M in all. Explicit expectations here.
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "eval/budgeted_cache.h"
#include "eviction_fixtures.h"
#include "test_util.h"

namespace retain {
namespace {

using namespace eviction_testing;

TEST(BudgetAllocation, PyramidBudgetsFollowTheProfileAndSumToTheTotal) {
  // M 5 over 4 layers, beta 20: profile 9.75, 6.58, 3.42, 0.25; floors 9, 6, 3, 0 and the 2 units
  // left to the largest fractions (0.75, 0.58) give 10, 7, 3, 0; the empty last layer keeps 1,
  // paid by the first.
  EXPECT_EQ(pyramid_layer_budgets(5, 4, 20), (std::vector<int64_t>{9, 7, 3, 1}));
  EXPECT_EQ(pyramid_layer_budgets(7, 1, 20), (std::vector<int64_t>{7}));
  EXPECT_EQ(pyramid_layer_budgets(1, 3, 20), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(pyramid_layer_budgets(8, 3, 1), (std::vector<int64_t>{8, 8, 8}));  // beta 1: flat
  for (int64_t budget : {16, 64, 512, 1000})
    for (int64_t layers : {2, 8, 28, 36})
      for (double beta : {2.0, 20.0}) {
        const auto shares = pyramid_layer_budgets(budget, layers, beta);
        EXPECT_EQ(std::accumulate(shares.begin(), shares.end(), int64_t{0}), budget * layers);
        // Within 1 of kvpress's get_layer_budget, which rounds each layer on its own.
        const double m = static_cast<double>(budget), min_num = m / beta, max_num = 2 * m - min_num,
                     step = (max_num - min_num) / static_cast<double>(layers - 1);
        for (int64_t l = 0; l < layers; ++l) {
          const double kvpress = std::round(max_num - static_cast<double>(l) * step);
          EXPECT_LE(std::abs(static_cast<double>(shares[l]) - kvpress), 1.0)
              << budget << " " << layers << " " << beta << " layer " << l;
          if (l > 0) {
            EXPECT_LE(shares[l], shares[l - 1]);
          }
        }
      }
  EXPECT_EQ(adakv_head_floor(10, 0.2), 2);
  EXPECT_EQ(adakv_head_floor(4, 0.2), 1);  // at least 1 when the safeguard is on
  EXPECT_EQ(adakv_head_floor(4, 0), 0);
  EXPECT_EQ(adakv_head_floor(4, 1), 4);
}

// Keys whose first coordinate is the L2 norm: knorm keeps the smallest.
at::Tensor norm_keys(const std::vector<std::vector<float>>& norms) {
  const auto heads = static_cast<int64_t>(norms.size()), n = static_cast<int64_t>(norms[0].size());
  auto keys = at::zeros({1, heads, n, 4});
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < n; ++i) keys[0][h][i][0] = norms[h][i];
  return keys;
}

std::vector<int64_t> smallest(const std::vector<float>& norms, size_t k) {
  std::vector<int64_t> order(norms.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return norms[a] < norms[b]; });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

TEST(BudgetAllocation, PyramidLayersKeepTheirShareOfTheBest) {
  c10::InferenceMode guard;
  auto c = tiny_config(4, 2);
  std::vector<float> norms;
  for (int i = 0; i < 20; ++i) norms.push_back(static_cast<float>((i * 7) % 20 + 1));
  BudgetedKvCache cache(c, parse_policy("knorm:alloc=pyramid,buffer=0"), 5, 20);
  feed(cache, c, 0, norm_keys({norms, norms}), at::zeros({1, 20, 8}));
  const std::vector<int64_t> shares = {9, 7, 3, 1};
  int64_t total = 0;
  for (int64_t l = 0; l < 4; ++l)
    for (int64_t h = 0; h < 2; ++h) {
      EXPECT_EQ(cache.live_positions(l, 0, h), smallest(norms, shares[l])) << l << " " << h;
      total += static_cast<int64_t>(cache.live_positions(l, 0, h).size());
    }
  EXPECT_EQ(total, 4 * 2 * 5);  // L Hk M, as uniform holds
  EXPECT_EQ(cache.live_bytes(), cache.budget_bytes());
  // A decoded token: every layer cut back to its own share again (buffer 0).
  feed(cache, c, 20, norm_keys({{0.5f}, {0.5f}}), at::zeros({1, 1, 8}));
  for (int64_t l = 0; l < 4; ++l) EXPECT_EQ(cache.live_positions(l, 0, 0).size(), shares[l]) << l;
  EXPECT_EQ(cache.live_positions(3, 0, 0), (std::vector<int64_t>{20}));
}

TEST(BudgetAllocation, AdakvPoolsEachLayerWithAFloorPerHead) {
  c10::InferenceMode guard;
  auto c = tiny_config(1, 2);
  // Head 0 holds the smallest norms of the layer: it takes the pool but for head 1's floor.
  std::vector<float> small = {8, 1, 7, 2, 6, 3, 5, 4}, large = {90, 20, 80, 30, 70, 10, 60, 50};
  BudgetedKvCache pooled(c, parse_policy("knorm:alloc=adakv,safeguard=0.25,buffer=0"), 4, 8);
  feed(pooled, c, 0, norm_keys({small, large}), at::zeros({1, 8, 8}));
  EXPECT_EQ(pooled.live_positions(0, 0, 0), smallest(small, 7));
  EXPECT_EQ(pooled.live_positions(0, 0, 1), (std::vector<int64_t>{5}));  // its floor: norm 10
  EXPECT_EQ(pooled.live_bytes(), pooled.budget_bytes());
  // Without the safeguard head 0 takes the whole pool of 8.
  BudgetedKvCache bare(c, parse_policy("knorm:alloc=adakv,safeguard=0,buffer=0"), 4, 8);
  feed(bare, c, 0, norm_keys({small, large}), at::zeros({1, 8, 8}));
  EXPECT_EQ(bare.live_positions(0, 0, 0).size(), 8u);
  EXPECT_TRUE(bare.live_positions(0, 0, 1).empty());
  // A large safeguard is the uniform allocation.
  BudgetedKvCache floor(c, parse_policy("knorm:alloc=adakv,safeguard=1,buffer=0"), 4, 8);
  feed(floor, c, 0, norm_keys({small, large}), at::zeros({1, 8, 8}));
  EXPECT_EQ(floor.live_positions(0, 0, 0), smallest(small, 4));
  EXPECT_EQ(floor.live_positions(0, 0, 1), smallest(large, 4));
  // The pool triggers on the layer's total, not on one head: a step that keeps the layer within
  // Hk (M + buffer) evicts nothing even though head 0 is far over M + buffer.
  BudgetedKvCache buffered(c, parse_policy("knorm:alloc=adakv,safeguard=0,buffer=2"), 4, 8);
  feed(buffered, c, 0, norm_keys({small, large}), at::zeros({1, 8, 8}));
  EXPECT_EQ(buffered.live_positions(0, 0, 0).size(), 8u);
  feed(buffered, c, 8, norm_keys({{0.5f, 0.6f}, {0.5f, 0.6f}}), at::zeros({1, 2, 8}));
  EXPECT_EQ(buffered.lengths(0)[0][0].item<int64_t>(), 10);  // head 0 over M + buffer = 6
  EXPECT_EQ(buffered.lengths(0).sum().item<int64_t>(), 12);  // the layer 12 <= 2 (4 + 2): no cut
  feed(buffered, c, 10, norm_keys({{0.7f, 0.8f}, {0.7f, 0.8f}}), at::zeros({1, 2, 8}));
  EXPECT_EQ(buffered.lengths(0).sum().item<int64_t>(), 8);  // 16 > 12: back to 2 x 4
}

TEST(BudgetAllocation, SpecsAreValidated) {
  EXPECT_EQ(parse_policy("snapkv:alloc=pyramid,pyramid_beta=4").allocation.pyramid_beta, 4);
  EXPECT_EQ(parse_policy("h2o:alloc=adakv").allocation.kind, BudgetAllocation::Kind::kAdaKV);
  EXPECT_EQ(parse_policy("h2o").allocation.kind, BudgetAllocation::Kind::kUniform);
  EXPECT_ERROR_CONTAINS(parse_policy("snapkv:safeguard=0.3"),
                        "safeguard applies to alloc=adakv, found alloc=uniform");
  EXPECT_ERROR_CONTAINS(parse_policy("snapkv:alloc=adakv,pyramid_beta=3"),
                        "pyramid_beta applies to alloc=pyramid, found alloc=adakv");
  EXPECT_ERROR_CONTAINS(parse_policy("snapkv:alloc=pyramid,pyramid_beta=0.5"),
                        "pyramid_beta must be >= 1, found 0.5");
  EXPECT_ERROR_CONTAINS(parse_policy("knorm:alloc=adakv,safeguard=1.5"),
                        "safeguard must be in [0, 1], found 1.5");
  EXPECT_ERROR_CONTAINS(parse_policy("knorm:alloc=layer"),
                        "alloc must be uniform, pyramid or adakv, found 'layer'");
  EXPECT_ERROR_CONTAINS(parse_policy("dbtrimkv:alloc=adakv"),
                        "alloc applies to the per-head policies; dbtrimkv ranks once");
  EXPECT_ERROR_CONTAINS(parse_policy("full:alloc=adakv"), "full takes no options");
  EXPECT_NE(policy_table_markdown().find("`alloc` (`uniform`; also `pyramid` or `adakv`)"),
            std::string::npos);
}

}  // namespace
}  // namespace retain
