// model/projection.h: the decode-step products split over the intra-op threads equal at::linear,
// run on more than one thread, and leave training (grad) and long inputs to at::linear.
#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>

#include "model/projection.h"

namespace retain {
namespace {

struct Threads {
  int before = at::get_num_threads();
  explicit Threads(int n) { at::set_num_threads(n); }
  ~Threads() { at::set_num_threads(before); }
};

TEST(Projection, SplitProductsEqualLinear) {
  Threads threads(2);
  c10::InferenceMode inference;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  for (auto dtype : {at::kFloat, at::kBFloat16}) {
    // 1537 output rows: the blocks are uneven.
    auto w = at::randn({1537, 384}, gen).to(dtype);
    auto bias = at::randn({1537}, gen).to(dtype);
    for (int64_t rows : {1, 2, 4, 16}) {
      auto x = at::randn({rows, 1, 384}, gen).to(dtype);
      ASSERT_TRUE(project_splits(x, w)) << rows;
      auto split = project(x, w, bias), reference = at::linear(x, w, bias);
      ASSERT_EQ(split.sizes(), reference.sizes());
      // Each output is the same dot product, summed in another order where MKL blocks it
      // differently: fp32 within 1e-4 (measured up to 2e-5 on these 384-term sums), bf16 within
      // one unit in the last place (2^-7 relative).
      auto diff = (split.to(at::kFloat) - reference.to(at::kFloat)).abs();
      auto scale = reference.to(at::kFloat).abs().clamp_min(1.0);
      const double allowed = dtype == at::kFloat ? 1e-4 : 1.0 / 128;
      EXPECT_LE((diff / scale).max().item<double>(), allowed) << rows << " rows, " << dtype;
    }
  }
}

TEST(Projection, OnlyDecodeShapedInferenceProductsSplit) {
  Threads threads(2);
  auto w = at::randn({1024, 256});
  {
    c10::InferenceMode inference;
    EXPECT_FALSE(project_splits(at::randn({1, 17, 256}), w)) << "a prefill chunk";
    EXPECT_FALSE(project_splits(at::randn({1, 1, 256}), at::randn({8, 256}))) << "a small weight";
  }
  EXPECT_FALSE(project_splits(at::randn({1, 1, 256}), w.clone().requires_grad_(true)))
      << "training";
  Threads one(1);
  c10::InferenceMode inference;
  EXPECT_FALSE(project_splits(at::randn({1, 1, 256}), w)) << "one thread";
}

}  // namespace
}  // namespace retain
