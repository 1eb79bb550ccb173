// The CPU fused attention's additive mask (attention_bias) against the bool mask it replaces, and
// the fused path against the eager one on per-head cache positions: empty slots, a padding query
// that sees nothing, a sliding window, GQA, and one shared position row.
#include <gtest/gtest.h>

#include <limits>

#include "model/attention.h"
#include "test_util.h"

namespace retain {
namespace {

// Per-head positions with empty slots (-1) and keys both before and after the queries.
at::Tensor cache_positions(int64_t b, int64_t hk, int64_t s) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  auto positions = at::randint(0, 30, {b, hk, s}, gen, at::kLong);
  positions.masked_fill_(at::rand({b, hk, s}, gen) < 0.25, -1);
  return positions;
}

// The bool mask attention_fused built before: visible, a blind row made all visible, repeated over
// the query heads of each KV head; as SDPA turns it into an additive one.
at::Tensor bias_by_hand(const at::Tensor& q_pos, const at::Tensor& k_pos, int64_t group,
                        int64_t window) {
  auto k = k_pos.unsqueeze(-2), q = q_pos.view({q_pos.size(0), 1, q_pos.size(1), 1});
  auto visible = (k >= 0).logical_and(k <= q);
  if (window > 0) visible = visible.logical_and(q - k < window);
  visible = visible.logical_or(visible.any(-1, true).logical_not());
  if (visible.size(1) > 1) visible = visible.repeat_interleave(group, 1);
  return at::where(visible, 0.0, -std::numeric_limits<double>::infinity()).to(at::kFloat);
}

TEST(AttentionCpu, BiasEqualsTheBoolMask) {
  const int64_t b = 2, t = 5, s = 11;
  auto q_pos = at::tensor({-1, 20, 21, 22, 23, 3, 4, 5, 6, 7}, at::kLong).view({b, t});
  for (int64_t hk : {1, 3})
    for (int64_t group : {1, 2})
      for (int64_t window : {0, 4}) {
        auto k_pos = cache_positions(b, hk, s);
        k_pos[1].fill_(40);  // row 1 sees nothing: every query of it is blind
        auto got = attention_bias(q_pos, k_pos, group, window, at::kFloat);
        EXPECT_EQ(got.sizes(), at::IntArrayRef({b, hk > 1 ? hk * group : 1, t, s}));
        EXPECT_TRUE(at::equal(got, bias_by_hand(q_pos, k_pos, group, window)))
            << "hk " << hk << " group " << group << " window " << window;
      }
  auto strided = cache_positions(b, 2, 2 * s).narrow(2, 0, s);  // a view of a longer buffer
  EXPECT_TRUE(at::equal(attention_bias(q_pos, strided, 1, 0, at::kBFloat16).to(at::kFloat),
                        bias_by_hand(q_pos, strided, 1, 0)));
}

TEST(AttentionCpu, FusedEqualsEagerOnCachePositions) {
  const int64_t b = 2, hk = 2, t = 6, s = 13, d = 16;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(9);
  auto q_pos = at::tensor({-1, -1, 26, 27, 28, 29, 10, 11, 12, 13, 14, 15}, at::kLong).view({b, t});
  for (int64_t group : {1, 3})
    for (int64_t window : {0, 5}) {
      auto q = at::randn({b, hk * group, t, d}, gen, at::kDouble);
      auto keys = at::randn({b, hk, s, d}, gen, at::kDouble);
      auto values = at::randn({b, hk, s, d}, gen, at::kDouble);
      auto k_pos = cache_positions(b, hk, s);
      auto fused = attention_fused(q, keys, values, q_pos, k_pos, 0.25, window);
      auto eager = attention_eager(q, keys, values, q_pos, k_pos, 0.25, window);
      EXPECT_FALSE(fused.isnan().any().item<bool>());
      // A query that sees nothing attends to every key on the fused path (by its scores) and
      // uniformly on the eager one: both finite, neither used. The others agree up to the eager
      // path's fp32 softmax.
      auto k = k_pos.unsqueeze(-2), qp = q_pos.view({b, 1, t, 1});
      auto visible = (k >= 0).logical_and(k <= qp);
      if (window > 0) visible = visible.logical_and(qp - k < window);
      auto sees = visible.any(-1).repeat_interleave(group, 1).unsqueeze(-1);  // (B, H, T, 1)
      ASSERT_TRUE(sees.logical_not().any().item<bool>());  // the case is exercised
      EXPECT_LE((fused - eager).masked_fill(sees.logical_not(), 0).abs().max().item<double>(), 1e-6)
          << "group " << group << " window " << window;
    }
}

}  // namespace
}  // namespace retain
