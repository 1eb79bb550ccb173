// The fused RMSNorm and RoPE kernels against their composite ATen forms on the same GPU: RoPE bit
// for bit, RMSNorm within fp32 rounding (fp32) or one unit in the last place on rare elements
// (bf16/fp16), and the dispatchers' choice: the composite wherever a gradient is wanted, on the
// CPU, or in a build without CUDA sources. Tests named *_CUDA skip themselves without a GPU.
#include <ATen/core/grad_mode.h>
#include <torch/cuda.h>

#include "cuda_skip.h"
#include "kernels/device_info.h"
#include "kernels/fused_ops.h"
#include "test_util.h"

namespace retain {
namespace {

const at::ScalarType kTypes[] = {at::kFloat, at::kBFloat16, at::kHalf};

TEST(FusedOps, RopeEqualsTheCompositeBitForBit_CUDA) {
  RETAIN_SKIP_WITHOUT_CUDA();
  at::NoGradGuard no_grad;
  at::manual_seed(3);
  for (auto type : kTypes) {
    for (int64_t d : {64, 128}) {
      auto opts = at::TensorOptions(at::kCUDA).dtype(type);
      // (B, T, H, D) as the projections give it, seen as (B, H, T, D): a strided view.
      auto x = at::randn({2, 7, 3, d}, opts).transpose(1, 2);
      auto cos = at::randn({2, 7, d}, opts), sin = at::randn({2, 7, d}, opts);
      ASSERT_TRUE(rope_rotate_uses_kernel(x, cos, sin));
      auto got = rope_rotate(x, cos, sin);
      auto want = rope_rotate_reference(x, cos, sin);
      EXPECT_TRUE(at::equal(got, want)) << type << " D " << d;
      EXPECT_TRUE(got.is_contiguous());
    }
  }
}

TEST(FusedOps, RmsNormEqualsTheCompositeUpToRounding_CUDA) {
  RETAIN_SKIP_WITHOUT_CUDA();
  at::NoGradGuard no_grad;
  at::manual_seed(4);
  for (auto type : kTypes) {
    // A hidden state (rows of 2560 and of 37, not a multiple of the block) and q/k heads of 128.
    for (auto shape : {std::vector<int64_t>{3, 5, 2560}, std::vector<int64_t>{2, 4, 6, 128},
                       std::vector<int64_t>{9, 37}}) {
      auto opts = at::TensorOptions(at::kCUDA).dtype(type);
      auto x = at::randn(shape, opts) * 3;
      auto w = at::rand({shape.back()}, opts) + 0.5;
      ASSERT_TRUE(rms_norm_uses_kernel(x, w));
      auto got = rms_norm(x, w, 1e-6).to(at::kDouble);
      auto want = rms_norm_reference(x, w, 1e-6).to(at::kDouble);
      auto diff = (got - want).abs();
      if (type == at::kFloat) {
        EXPECT_LE(diff.max().item<double>(), 1e-6 * want.abs().max().item<double>()) << type;
      } else {
        // One unit in the last place: 2^-7 (bf16) or 2^-10 (fp16) of the value, at most.
        const double ulp = type == at::kBFloat16 ? 1.0 / 128 : 1.0 / 1024;
        EXPECT_TRUE((diff <= want.abs() * ulp + 1e-30).all().item<bool>()) << type;
        EXPECT_LE((diff > 0).to(at::kDouble).mean().item<double>(), 0.01) << type;
      }
    }
  }
}

TEST(FusedOps, TheCompositeRunsWhereAGradientIsWanted_CUDA) {
  RETAIN_SKIP_WITHOUT_CUDA();
  auto x = at::randn({2, 3, 64}, at::kCUDA).requires_grad_(true);
  auto w = at::ones({64}, at::kCUDA);
  EXPECT_FALSE(rms_norm_uses_kernel(x, w));
  auto y = rms_norm(x, w, 1e-6);
  y.sum().backward();  // the composite form is differentiable
  EXPECT_TRUE(x.grad().defined());
  {
    at::NoGradGuard no_grad;
    EXPECT_TRUE(rms_norm_uses_kernel(x, w));
  }
  auto q = at::randn({1, 2, 3, 8}, at::kCUDA).requires_grad_(true);
  auto cs = at::randn({1, 3, 8}, at::kCUDA);
  EXPECT_FALSE(rope_rotate_uses_kernel(q, cs, cs));
}

TEST(FusedOps, TheCpuRunsTheComposite) {
  auto x = at::randn({2, 3, 3, 8});
  auto cs = at::randn({2, 3, 8});
  EXPECT_FALSE(rope_rotate_uses_kernel(x, cs, cs));
  EXPECT_TRUE(at::equal(rope_rotate(x, cs, cs), rope_rotate_reference(x, cs, cs)));
  auto w = at::rand({8});
  EXPECT_FALSE(rms_norm_uses_kernel(x, w));
  EXPECT_TRUE(at::equal(rms_norm(x, w, 1e-5), rms_norm_reference(x, w, 1e-5)));
  // HF's definition, spelled out: weight * x * rsqrt(mean(x^2) + eps).
  auto want = w * x * at::rsqrt(x.pow(2).mean(-1, true) + 1e-5);
  EXPECT_TRUE(at::allclose(rms_norm(x, w, 1e-5), want, 1e-6, 1e-6));
}

}  // namespace
}  // namespace retain
