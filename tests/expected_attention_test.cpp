// Expected attention (eval/policies/expected_attention.cpp) against its definition computed here
// with explicit loops in double: the pre-RoPE queries' two-pass mean and covariance past the
// sinks, the RoPE rotation averaged over the next n_future positions, softmax over the entries
// past the sinks, averaged over the group's query heads, times ||v||. Chunked prefill gives the
// statistics of one pass.
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

constexpr int64_t kTokens = 12, kDim = 4, kSinks = 2, kFuture = 8;

// Expected attention of every entry (sinks: +inf) for keys = values (1, 1, T, D) and pre-RoPE
// queries (1, H, T, D), the next query at position T.
std::vector<double> expected_scores(const at::Tensor& keys, const at::Tensor& queries,
                                    bool covariance, bool value_norm) {
  auto k = keys.to(at::kDouble).contiguous(), q = queries.to(at::kDouble).contiguous();
  auto key = [&](int64_t j, int64_t d) { return k[0][0][j][d].item<double>(); };
  const int64_t heads = q.size(1), half = kDim / 2;
  // The averaged rotation: cos and sin of position p at frequency theta^(-2i/D), i = d mod D/2.
  std::vector<double> cos_mean(kDim, 0.0), sin_mean(kDim, 0.0);
  for (int64_t d = 0; d < kDim; ++d)
    for (int64_t p = kTokens; p < kTokens + kFuture; ++p) {
      const double angle =
          static_cast<double>(p) * std::pow(10000.0, -2.0 * static_cast<double>(d % half) / kDim);
      cos_mean[d] += std::cos(angle) / kFuture;
      sin_mean[d] += std::sin(angle) / kFuture;
    }
  double rotation[kDim][kDim] = {};
  for (int64_t i = 0; i < kDim; ++i) {
    rotation[i][i] = cos_mean[i];
    if (i < half)
      rotation[i][i + half] = -sin_mean[i];
    else
      rotation[i][i - half] = sin_mean[i];
  }
  std::vector<double> score(kTokens, 0.0);
  for (int64_t h = 0; h < heads; ++h) {
    double mean[kDim] = {}, cov[kDim][kDim] = {};
    const double n = static_cast<double>(kTokens - kSinks);
    for (int64_t t = kSinks; t < kTokens; ++t)
      for (int64_t d = 0; d < kDim; ++d) mean[d] += q[0][h][t][d].item<double>() / n;
    for (int64_t t = kSinks; t < kTokens; ++t)
      for (int64_t a = 0; a < kDim; ++a)
        for (int64_t b = 0; b < kDim; ++b)
          cov[a][b] += (q[0][h][t][a].item<double>() - mean[a]) *
                       (q[0][h][t][b].item<double>() - mean[b]) / n;
    double rmean[kDim] = {}, rcov[kDim][kDim] = {};
    for (int64_t a = 0; a < kDim; ++a)
      for (int64_t b = 0; b < kDim; ++b) {
        rmean[a] += rotation[a][b] * mean[b];
        for (int64_t x = 0; x < kDim; ++x)
          for (int64_t y = 0; y < kDim; ++y)
            rcov[a][b] += rotation[a][x] * cov[x][y] * rotation[b][y];
      }
    std::vector<double> logit(kTokens, 0.0);
    double z = 0;
    for (int64_t j = kSinks; j < kTokens; ++j) {
      for (int64_t a = 0; a < kDim; ++a) {
        logit[j] += key(j, a) * rmean[a] / std::sqrt(static_cast<double>(kDim));
        if (covariance)
          for (int64_t b = 0; b < kDim; ++b) logit[j] += key(j, a) * rcov[a][b] * key(j, b) / 8.0;
      }
      z += std::exp(logit[j]);
    }
    for (int64_t j = kSinks; j < kTokens; ++j)
      score[j] += std::exp(logit[j]) / z / static_cast<double>(heads);
  }
  for (int64_t j = kSinks; j < kTokens; ++j) {
    double norm = 0;
    for (int64_t a = 0; a < kDim; ++a) norm += key(j, a) * key(j, a);
    if (value_norm) score[j] *= std::sqrt(norm);
  }
  for (int64_t j = 0; j < kSinks; ++j) score[j] = INFINITY;
  return score;
}

ModelConfig grouped_config() {
  auto c = tiny_config(1, 1);
  c.num_heads = 2;  // two query heads share the KV head: their softmaxes are averaged
  return c;
}

void expect_scores(const at::Tensor& got, const std::vector<double>& want,
                   const std::string& what) {
  auto row = got[0][0].to(at::kDouble);
  ASSERT_EQ(row.size(0), kTokens) << what;
  for (int64_t j = 0; j < kTokens; ++j) {
    const double g = row[j].item<double>();
    if (std::isinf(want[j])) {
      EXPECT_TRUE(std::isinf(g) && g > 0) << what << " sink " << j;
    } else {
      EXPECT_NEAR(g, want[j], 1e-5 * std::max(1.0, std::abs(want[j]))) << what << " entry " << j;
    }
  }
}

TEST(ExpectedAttention, ScoresAreTheDefinition) {
  c10::InferenceMode guard;
  at::manual_seed(3);
  const auto c = grouped_config();
  auto keys = at::randn({1, 1, kTokens, kDim});
  // Queries with a large common mean next to their spread, as real pre-RoPE queries have.
  auto queries = at::randn({1, 2, kTokens, kDim}) + 3.0;
  const std::string spec = "expected_attention:sinks=2,n_future=8,buffer=0";
  BudgetedKvCache whole(c, parse_policy(spec), 20, kTokens);
  feed(whole, c, 0, keys, at::zeros({1, kTokens, 8}), {}, queries);
  const auto want = expected_scores(keys, queries, true, true);
  expect_scores(whole.scores(0), want, "one chunk");

  // Chunks of 5 and 7: the merged statistics equal one pass over the 10 counted queries.
  BudgetedKvCache chunked(c, parse_policy(spec), 20, 7);
  feed(chunked, c, 0, keys.narrow(2, 0, 5), at::zeros({1, 5, 8}), {}, queries.narrow(2, 0, 5));
  feed(chunked, c, 5, keys.narrow(2, 5, 7), at::zeros({1, 7, 8}), {}, queries.narrow(2, 5, 7));
  expect_scores(chunked.scores(0), want, "two chunks");

  BudgetedKvCache plain(
      c, parse_policy("expected_attention:sinks=2,n_future=8,covariance=off,vnorm=off"), 20,
      kTokens);
  feed(plain, c, 0, keys, at::zeros({1, kTokens, 8}), {}, queries);
  expect_scores(plain.scores(0), expected_scores(keys, queries, false, false), "mean only");
}

TEST(ExpectedAttention, KeepsTheSinksAndTheHighestExpectedAttention) {
  c10::InferenceMode guard;
  at::manual_seed(4);
  const auto c = grouped_config();
  auto keys = at::randn({1, 1, kTokens, kDim}), queries = at::randn({1, 2, kTokens, kDim}) + 1.0;
  BudgetedKvCache cache(c, parse_policy("expected_attention:sinks=2,n_future=8,buffer=0"), 6,
                        kTokens);
  feed(cache, c, 0, keys, at::zeros({1, kTokens, 8}), {}, queries);
  const auto score = expected_scores(keys, queries, true, true);
  std::vector<int64_t> order(kTokens);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return score[a] > score[b]; });
  std::vector<int64_t> kept(order.begin(), order.begin() + 6);
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept.front(), 0);
  EXPECT_EQ(kept[1], 1);
  EXPECT_EQ(cache.live_positions(0, 0, 0), kept);
  EXPECT_ERROR_CONTAINS(BudgetedKvCache(c, parse_policy("expected_attention:sinks=6"), 6, 4),
                        "e.g. expected_attention:sinks=3");
  EXPECT_ERROR_CONTAINS(parse_policy("expected_attention:n_future=0"), "n_future must be >= 1");
}

}  // namespace
}  // namespace retain
