// The retention attention and retention sum references against naive double-precision
// implementations, and their gradients against finite differences (log beta included), with GQA,
// packed documents, padding and tiles that do not divide T.
#include <cmath>

#include "kernels/retention_attention.h"
#include "test_util.h"

namespace retain {
namespace {

struct Batch {
  at::Tensor q, k, v, log_beta, positions, segments;
};

// Row 0: two documents (6 + 7 tokens); row 1: one document of 10 tokens, then 3 padding tokens.
Batch make_batch(int64_t heads, int64_t kv_heads, int64_t d, at::ScalarType dtype, uint64_t seed) {
  const int64_t t = 13;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto opts = at::TensorOptions().dtype(at::kDouble);
  Batch b;
  b.q = at::randn({2, heads, t, d}, gen, opts).to(dtype);
  b.k = at::randn({2, kv_heads, t, d}, gen, opts).to(dtype);
  b.v = at::randn({2, kv_heads, t, d}, gen, opts).to(dtype);
  // log beta in [-1.5, 0): strong enough decay that the bias matters.
  b.log_beta = (-1.5 * at::rand({2, kv_heads, t}, gen, opts))
                   .to(dtype == at::kDouble ? at::kDouble : at::kFloat);
  b.segments =
      at::tensor({0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1},
                 at::kLong)
          .view({2, t});
  b.positions =
      at::tensor({0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 6, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0},
                 at::kLong)
          .view({2, t});
  return b;
}

at::Tensor naive_attention(const Batch& b, double scale) {
  auto q = b.q.to(at::kDouble), k = b.k.to(at::kDouble), v = b.v.to(at::kDouble);
  auto lb = b.log_beta.to(at::kDouble);
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), Hk = k.size(1), G = H / Hk;
  auto out = at::zeros_like(q);
  auto seg = b.segments.accessor<int64_t, 2>();
  auto pos = b.positions.accessor<int64_t, 2>();
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < T; ++i) {
        if (seg[bi][i] < 0) continue;
        std::vector<int64_t> keys;
        std::vector<at::Tensor> scores;
        for (int64_t j = 0; j <= i; ++j) {
          if (seg[bi][j] != seg[bi][i]) continue;
          keys.push_back(j);
          scores.push_back((q[bi][h][i] * k[bi][h / G][j]).sum() * scale +
                           static_cast<double>(pos[bi][i] - pos[bi][j]) * lb[bi][h / G][j]);
        }
        auto p = at::softmax(at::stack(scores), 0);
        for (size_t n = 0; n < keys.size(); ++n) out[bi][h][i] += p[n] * v[bi][h / G][keys[n]];
      }
  return out;
}

at::Tensor naive_sum(const Batch& b) {
  auto lb = b.log_beta.to(at::kDouble);
  auto out = at::zeros_like(lb);
  auto seg = b.segments.accessor<int64_t, 2>();
  auto pos = b.positions.accessor<int64_t, 2>();
  for (int64_t bi = 0; bi < lb.size(0); ++bi)
    for (int64_t h = 0; h < lb.size(1); ++h)
      for (int64_t t = 0; t < lb.size(2); ++t) {
        if (seg[bi][t] < 0) continue;
        for (int64_t i = 0; i <= t; ++i)
          if (seg[bi][i] == seg[bi][t])
            out[bi][h][t] += at::exp(static_cast<double>(pos[bi][t] - pos[bi][i]) * lb[bi][h][i]);
      }
  return out;
}

double max_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

class RetentionAttention : public ::testing::TestWithParam<int64_t> {};  // GQA ratio

TEST_P(RetentionAttention, ForwardMatchesNaiveInEveryDtype) {
  const int64_t g = GetParam(), kv = 2;
  for (int64_t d : {8, 64}) {
    for (auto [dtype, tol] : {std::pair{at::kDouble, 1e-10},
                              {at::kFloat, 2e-5},
                              {at::kBFloat16, 2e-2},
                              {at::kHalf, 4e-3}}) {
      Batch b = make_batch(kv * g, kv, d, dtype, 1 + d);
      const double scale = 1.0 / std::sqrt(static_cast<double>(d));
      // Tiles of 4 x 5 do not divide T = 13: partial blocks on both axes.
      auto out = retention_attention(b.q, b.k, b.v, b.log_beta, b.positions, b.segments, {0, 4, 5});
      EXPECT_EQ(out.scalar_type(), dtype);
      // The reference sees the same rounded inputs; the bound covers the output's own rounding.
      EXPECT_LE(max_diff(out, naive_attention(b, scale)), tol)
          << "G=" << g << " D=" << d << " " << c10::toString(dtype);
    }
  }
}

TEST_P(RetentionAttention, BlockSizeDoesNotChangeTheResult) {
  Batch b = make_batch(2 * GetParam(), 2, 16, at::kFloat, 7);
  auto a = retention_attention(b.q, b.k, b.v, b.log_beta, b.positions, b.segments, {0, 3, 2});
  auto c = retention_attention(b.q, b.k, b.v, b.log_beta, b.positions, b.segments, {0, 128, 128});
  EXPECT_LE(max_diff(a, c), 1e-5);
}

// Central differences of L = sum(out * W) in double for sampled entries of every input.
TEST_P(RetentionAttention, GradientsMatchFiniteDifferences) {
  Batch b = make_batch(2 * GetParam(), 2, 8, at::kDouble, 11);
  auto weights = at::randn({2, 2 * GetParam(), 13, 8}, at::kDouble);
  auto loss = [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const at::Tensor& lb) {
    return (retention_attention(q, k, v, lb, b.positions, b.segments, {0, 4, 5}) * weights).sum();
  };
  std::vector<at::Tensor> inputs = {b.q.clone().requires_grad_(), b.k.clone().requires_grad_(),
                                    b.v.clone().requires_grad_(),
                                    b.log_beta.clone().requires_grad_()};
  loss(inputs[0], inputs[1], inputs[2], inputs[3]).backward();
  const char* names[] = {"q", "k", "v", "log_beta"};
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  for (size_t n = 0; n < inputs.size(); ++n) {
    auto grad = inputs[n].grad().view({-1});
    auto numel = inputs[n].numel();
    for (int trial = 0; trial < 25; ++trial) {
      int64_t idx = at::randint(numel, {1}, gen).item<int64_t>();
      std::vector<at::Tensor> plus, minus;
      for (auto& x : inputs) {
        plus.push_back(x.detach().clone());
        minus.push_back(x.detach().clone());
      }
      const double eps = 1e-6;
      plus[n].view({-1})[idx] += eps;
      minus[n].view({-1})[idx] -= eps;
      double numeric = (loss(plus[0], plus[1], plus[2], plus[3]).item<double>() -
                        loss(minus[0], minus[1], minus[2], minus[3]).item<double>()) /
                       (2 * eps);
      EXPECT_NEAR(grad[idx].item<double>(), numeric, 1e-6) << names[n] << "[" << idx << "]";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Gqa, RetentionAttention, ::testing::Values(1, 4, 8),
                         [](const auto& info) { return "G" + std::to_string(info.param); });

TEST(RetentionAttentionRef, ZeroLogBetaIsPlainCausalAttention) {
  Batch b = make_batch(4, 2, 16, at::kDouble, 5);
  auto zero = at::zeros_like(b.log_beta);
  auto out = retention_attention(b.q, b.k, b.v, zero, b.positions, b.segments);
  // One document, no padding: ordinary causal softmax attention.
  auto q = b.q[1].narrow(1, 0, 10), k = b.k[1].narrow(1, 0, 10).repeat_interleave(2, 0),
       v = b.v[1].narrow(1, 0, 10).repeat_interleave(2, 0);
  auto s = at::matmul(q, k.transpose(-1, -2)) / 4.0;
  s = s.masked_fill(at::ones({10, 10}, at::kBool).triu(1), -INFINITY);
  EXPECT_LE(max_diff(out[1].narrow(1, 0, 10), at::matmul(at::softmax(s, -1), v)), 1e-12);
  EXPECT_EQ(out[1].narrow(1, 10, 3).abs().max().item<double>(), 0.0);  // padding rows are zero
}

// Trained gates reach log beta of -20 and below: most of a block's weights then fall under the
// smallest normal float, which the fp32 path sends to 0 (kernels/retention_attention.cpp,
// exp_flushing_denormals_). What it drops must not show: fp32 against fp64, forward and every
// gradient, attention and retention sum.
TEST(RetentionAttentionRef, DecayPastTheFloatRangeMatchesDouble) {
  Batch f = make_batch(4, 2, 8, at::kFloat, 13);
  // From 0 to -60: weights of every size down to far under 1e-38 in one row.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(17);
  f.log_beta = -60.0 * at::rand(f.log_beta.sizes(), gen, at::kFloat).pow(2);
  Batch d{f.q.to(at::kDouble),        f.k.to(at::kDouble), f.v.to(at::kDouble),
          f.log_beta.to(at::kDouble), f.positions,         f.segments};
  auto weights = at::randn({2, 4, 13, 8}, gen, at::kDouble);
  auto sum_weights = at::randn({2, 2, 13}, gen, at::kDouble);
  auto grads = [&](const Batch& b) {
    std::vector<at::Tensor> in = {b.q.clone().requires_grad_(), b.k.clone().requires_grad_(),
                                  b.v.clone().requires_grad_(),
                                  b.log_beta.clone().requires_grad_()};
    auto out = retention_attention(in[0], in[1], in[2], in[3], b.positions, b.segments, {0, 4, 5});
    auto sums = retention_sum(in[3], b.positions, b.segments, 5);
    ((out.to(at::kDouble) * weights).sum() + (sums.to(at::kDouble) * sum_weights).sum()).backward();
    std::vector<at::Tensor> r = {out.detach(), sums.detach()};
    for (auto& x : in) r.push_back(x.grad());
    return r;
  };
  auto in_float = grads(f), in_double = grads(d);
  const char* names[] = {"out", "sum", "dq", "dk", "dv", "dlog_beta"};
  for (size_t n = 0; n < in_float.size(); ++n) {
    EXPECT_TRUE(in_float[n].isfinite().all().item<bool>()) << names[n];
    const double scale = 1 + in_double[n].abs().max().item<double>();
    EXPECT_LE(max_diff(in_float[n], in_double[n]), 2e-5 * scale) << names[n];
  }
  EXPECT_LE(max_diff(in_double[0], naive_attention(d, 1.0 / std::sqrt(8.0))), 1e-10);
  EXPECT_LE(max_diff(in_double[1], naive_sum(d)), 1e-12);
}

TEST(RetentionAttentionRef, RejectsBadShapes) {
  Batch b = make_batch(4, 2, 8, at::kFloat, 1);
  EXPECT_ERROR_CONTAINS(
      retention_attention(b.q, b.k, b.v, b.log_beta.narrow(2, 0, 5), b.positions, b.segments),
      "log_beta must be (B, Hk, T)");
  EXPECT_ERROR_CONTAINS(
      retention_attention(b.q.narrow(1, 0, 3), b.k, b.v, b.log_beta, b.positions, b.segments),
      "not a multiple of 2 KV heads");
}

TEST(RetentionSum, ForwardAndGradient) {
  Batch b = make_batch(4, 2, 8, at::kDouble, 9);
  EXPECT_LE(max_diff(retention_sum(b.log_beta, b.positions, b.segments, 4), naive_sum(b)), 1e-12);
  Batch f = make_batch(4, 2, 8, at::kFloat, 9);
  EXPECT_LE(max_diff(retention_sum(f.log_beta, f.positions, f.segments, 5), naive_sum(f)), 1e-5);
  // beta = 1 everywhere: S_t counts the tokens of t's document so far.
  auto ones = retention_sum(at::zeros_like(b.log_beta), b.positions, b.segments, 3);
  EXPECT_EQ(ones[0][0][5].item<double>(), 6.0);
  EXPECT_EQ(ones[0][1][12].item<double>(), 7.0);

  auto lb = b.log_beta.clone().requires_grad_();
  auto weights = at::randn_like(lb);
  (retention_sum(lb, b.positions, b.segments, 4) * weights).sum().backward();
  for (int64_t idx : {0, 5, 13, 20, 30, 45}) {
    auto plus = b.log_beta.clone(), minus = b.log_beta.clone();
    plus.view({-1})[idx] += 1e-6;
    minus.view({-1})[idx] -= 1e-6;
    double numeric = ((naive_sum({b.q, b.k, b.v, plus, b.positions, b.segments}) -
                       naive_sum({b.q, b.k, b.v, minus, b.positions, b.segments})) *
                      weights)
                         .sum()
                         .item<double>() /
                     2e-6;
    EXPECT_NEAR(lb.grad().view({-1})[idx].item<double>(), numeric, 1e-6) << idx;
  }
}

}  // namespace
}  // namespace retain
