// The Triton kernels as the build compiled them (kernels/triton/compile_cubins.py): every
// (kernel, arch, dtype, head dim) of kernels/triton/configs.json is in the binary, each within
// the resource budget; the tile ranges the launchers compute equal a brute-force count and cover
// every visible (query, key) pair; the arch rule picks cubins that can load.
#include <set>
#include <tuple>

#include "core/json.h"
#include "kernels/cache_append_triton.h"
#include "kernels/cache_attention_triton.h"
#include "kernels/device_info.h"
#include "kernels/retention_triton.h"
#include "kernels/triton_launch.h"
#include "test_util.h"

namespace retain {
namespace {

// Dynamic shared memory a block may opt into (CUDA programming guide), per arch.
int shared_limit(int arch) {
  switch (arch) {
    case 80:
      return 163 * 1024;
    case 90:
    case 100:
      return 227 * 1024;
    case 120:
      return 99 * 1024;
  }
  return 48 * 1024;
}

// The budget: no stack frame and no local memory (spills land there), registers within the
// hardware's 255, shared memory within the arch's opt-in limit, one ELF image per entry.
TEST(TritonCubins, EveryConfiguredVariantIsBuiltWithinTheBudget) {
  if (!cuda_sources_compiled()) GTEST_SKIP() << "built without the CUDA sources";
  const Json configs = read_json_file(fs::path(RETAIN_SOURCE_DIR) / "kernels/triton/configs.json");
  std::set<std::tuple<std::string, int, std::string, int>> built;
  for (const auto& c : triton_cubins()) {
    SCOPED_TRACE(str_cat(c.kernel, " sm_", c.arch, " ", c.dtype, " D", c.head_dim));
    EXPECT_EQ(c.stack_bytes, 0);
    EXPECT_EQ(c.local_bytes, 0);
    EXPECT_LE(c.registers, 255);
    EXPECT_GT(c.registers, 0);
    EXPECT_LE(c.shared_bytes + c.static_shared_bytes, shared_limit(c.arch));
    ASSERT_GT(c.size, 4u);
    EXPECT_EQ(std::string(c.data, 4),
              "\x7f"
              "ELF");
    EXPECT_TRUE(built.insert({c.kernel, c.arch, c.dtype, c.head_dim}).second) << "twice";
    const auto& tile =
        configs.at("sm_" + std::to_string(c.arch)).at(c.kernel).at(std::to_string(c.head_dim));
    EXPECT_EQ(c.block_m, tile[0].get<int>());
    EXPECT_EQ(c.block_n, tile[1].get<int>());
    EXPECT_EQ(c.num_warps, tile[2].get<int>());
  }
  size_t expected = 0;
  for (const auto& [arch, kernels] : configs.items())
    for (const auto& [kernel, dims] : kernels.items()) {
      // The sums are fp32 only, attention bf16 / fp16, the cache append (a copy) all three.
      const bool sum = kernel.rfind("retention_sum", 0) == 0, append = kernel == "cache_append";
      for (const auto& [dim, tile] : dims.items()) {
        for (const char* dtype : {"bf16", "fp16", "fp32"}) {
          if (!append && sum != (std::string(dtype) == "fp32")) continue;
          ++expected;
          EXPECT_TRUE(built.count({kernel, std::stoi(arch.substr(3)), dtype, std::stoi(dim)}))
              << kernel << " " << arch << " " << dtype << " D" << dim << " is not in the binary";
        }
      }
    }
  EXPECT_EQ(built.size(), expected);
}

TEST(TritonCubins, ArchRulePicksCubinsThatLoad) {
  EXPECT_TRUE(triton_arch_runs_on(90, 90));
  EXPECT_FALSE(triton_arch_runs_on(90, 100));  // sm_90a runs on Hopper only
  EXPECT_FALSE(triton_arch_runs_on(100, 90));
  EXPECT_TRUE(triton_arch_runs_on(80, 86));  // sm_80 runs on every later 8.x
  EXPECT_TRUE(triton_arch_runs_on(80, 89));
  EXPECT_FALSE(triton_arch_runs_on(80, 90));
  EXPECT_FALSE(triton_arch_runs_on(86, 80));
  if (!triton_cubins().empty()) {
    const TritonCubin* c = find_triton_cubin("retention_fwd", 90, "bf16", 128);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->arch, 90);
    EXPECT_EQ(find_triton_cubin("retention_fwd", 90, "bf16", 96), nullptr);
    EXPECT_EQ(find_triton_cubin("retention_fwd", 75, "bf16", 128), nullptr);
  }
}

// The C++ launchers pass each cubin exactly the parameters it was compiled with, in order (the
// ABI between kernels/retention_triton.cpp and kernels/triton/), with grids that cover the
// tensors and outputs of the right shapes: planned on the CPU, for every arch and head dim built.
TEST(TritonPlans, EveryLaunchPassesTheCubinsParametersInOrder) {
  if (triton_cubins().empty()) GTEST_SKIP() << "this build has no Triton cubins";
  std::set<int> archs;
  for (const auto& c : triton_cubins()) archs.insert(c.arch);
  const int64_t b = 2, h = 8, hk = 2, t = 300;
  for (int arch : archs)
    for (int64_t d : {64, 128})
      for (auto dtype : {at::kBFloat16, at::kHalf}) {
        SCOPED_TRACE(str_cat("sm_", arch, " D", d, " ", dtype));
        auto opts = at::TensorOptions().dtype(dtype);
        auto q = at::randn({b, h, t, d}, opts), k = at::randn({b, hk, t, d}, opts),
             v = at::randn({b, hk, t, d}, opts);
        auto lb = -at::rand({b, hk, t});
        auto pos = at::arange(t, at::kLong).expand({b, t}).contiguous();
        auto seg = at::zeros({b, t}, at::kLong);
        auto check = [&](const TritonPlan& plan, size_t launches) {
          ASSERT_EQ(plan.launches.size(), launches);
          for (const auto& l : plan.launches) {
            EXPECT_NO_THROW(check_triton_args(*l.cubin, l.args)) << l.cubin->kernel;
            EXPECT_EQ(l.cubin->arch, arch);
            const bool per_kv_head = std::string(l.cubin->kernel) == "retention_bwd_dkdv";
            EXPECT_EQ(l.grid_y, b * (per_kv_head ? hk : h)) << l.cubin->kernel;
            const int64_t tile = per_kv_head ? l.cubin->block_n : l.cubin->block_m;
            EXPECT_EQ(l.grid_x, (t + tile - 1) / tile) << l.cubin->kernel;
          }
        };
        auto fwd = plan_retention_attention_forward(q, k, v, lb, pos, seg, 0.1, arch);
        check(fwd, 1);
        ASSERT_EQ(fwd.outputs.size(), 2u);
        EXPECT_EQ(fwd.outputs[0].sizes(), q.sizes());
        EXPECT_EQ(fwd.outputs[0].scalar_type(), dtype);
        EXPECT_EQ(fwd.outputs[1].sizes(), at::IntArrayRef({b, h, t}));
        auto bwd = plan_retention_attention_backward(q, k, v, lb, pos, seg, fwd.outputs[0],
                                                     fwd.outputs[1].zero_(), q, 0.1, arch);
        check(bwd, 3);
        ASSERT_EQ(bwd.outputs.size(), 4u);
        EXPECT_EQ(bwd.outputs[0].sizes(), q.sizes());
        EXPECT_EQ(bwd.outputs[1].sizes(), k.sizes());
        EXPECT_EQ(bwd.outputs[2].sizes(), v.sizes());
        EXPECT_EQ(bwd.outputs[3].sizes(), lb.sizes());
        auto sum = plan_retention_sum_forward(lb, pos, seg, arch);
        for (const auto& l : sum.launches) {
          EXPECT_NO_THROW(check_triton_args(*l.cubin, l.args));
          EXPECT_EQ(l.grid_y, b * hk);
        }
        auto dsum = plan_retention_sum_backward(lb, pos, seg, lb, arch);
        for (const auto& l : dsum.launches) EXPECT_NO_THROW(check_triton_args(*l.cubin, l.args));
      }
  // A launcher and a cubin that disagree are refused, naming both lists.
  TritonArgs wrong;
  auto x = at::zeros({4});
  wrong.tensor(x, "K").tensor(x, "Q");
  EXPECT_ERROR_CONTAINS(check_triton_args(triton_cubins()[0], wrong),
                        "the launcher passes (K:*fp32,Q:*fp32) but the cubin was compiled with (");
  // A view that starts off a 16-byte boundary is copied, not passed (the cubins assume it).
  auto base = at::randn({1, 2, 1001}), pos = at::arange(1001, at::kLong).unsqueeze(0);
  auto view = base.narrow(1, 1, 1);  // contiguous, 1001 floats in: 4 bytes past a boundary
  ASSERT_TRUE(view.is_contiguous());
  ASSERT_NE(reinterpret_cast<uintptr_t>(view.data_ptr()) % 16, 0u);
  auto plan = plan_retention_sum_forward(view, pos, at::zeros_like(pos), *archs.begin());
  EXPECT_NO_THROW(check_triton_args(*plan.launches[0].cubin, plan.launches[0].args));
}

// The fused cache append's launch (kernels/cache_append_triton.cpp) passes the cubin's parameters in
// order, one program per (sequence, KV head), with the strides of the views it was handed; what
// the kernel does not take is named, not launched.
TEST(TritonPlans, CacheAppendPassesTheCubinsParametersAndTheViewsStrides) {
  if (triton_cubins().empty()) GTEST_SKIP() << "this build has no Triton cubins";
  std::set<int> archs;
  for (const auto& c : triton_cubins()) archs.insert(c.arch);
  const int64_t b = 3, hk = 2, c = 40, n = 5;
  for (int arch : archs)
    for (int64_t d : {64, 128})
      for (auto dtype : {at::kBFloat16, at::kHalf, at::kFloat}) {
        SCOPED_TRACE(str_cat("sm_", arch, " D", d, " ", dtype));
        auto opts = at::TensorOptions().dtype(dtype);
        auto keys = at::zeros({b, hk, c, d}, opts), values = at::zeros_like(keys);
        auto positions = at::full({b, hk, c}, -1, at::kLong), stat = at::zeros({b, hk, c});
        auto lengths = at::zeros({b, hk}, at::kLong);
        // Heads split from (B, n, Hk, D), as a layer's projections hand them over.
        auto new_keys = at::randn({b, n, hk, d}, opts).transpose(1, 2);
        auto new_values = at::randn({b, n, hk, d}, opts).transpose(1, 2);
        auto new_positions = at::arange(n, at::kLong).expand({b, n}).contiguous();
        auto new_stat = at::randn({b, n, hk}).transpose(1, 2);  // strided, unit stride nowhere
        const CacheAppendTensors t{keys,     values,     positions,     stat,    lengths,
                                   new_keys, new_values, new_positions, new_stat};
        auto plan = plan_cache_append(t, arch);
        ASSERT_EQ(plan.launches.size(), 1u);
        const auto& l = plan.launches[0];
        EXPECT_NO_THROW(check_triton_args(*l.cubin, l.args));
        EXPECT_EQ(std::string(l.cubin->kernel), "cache_append");
        EXPECT_EQ(l.grid_x, b * hk);
        EXPECT_EQ(l.grid_y, 1);
        EXPECT_EQ(cache_append_triton_unsupported(t), "the tensors are not on one GPU");
      }
  // Layouts the kernel does not take are named (and the cache then appends with ATen).
  const int arch = *archs.begin();
  auto keys = at::zeros({1, 2, 8, 64}), positions = at::full({1, 2, 8}, -1, at::kLong);
  auto stat = at::zeros({1, 2, 8}), lengths = at::zeros({1, 2}, at::kLong);
  auto new_keys = at::zeros({1, 2, 1, 64}), new_positions = at::zeros({1, 1}, at::kLong);
  auto new_stat = at::zeros({1, 2, 1});
  auto half = keys.to(at::kHalf);
  EXPECT_ERROR_CONTAINS(plan_cache_append({keys, half, positions, stat, lengths, new_keys, new_keys,
                                           new_positions, new_stat},
                                          arch),
                        "keys and values differ in dtype");
  auto long_new = at::zeros({1, 2, kFusedAppendMaxTokens + 1, 64});
  auto long_pos = at::zeros({1, kFusedAppendMaxTokens + 1}, at::kLong);
  auto long_stat = at::zeros({1, 2, kFusedAppendMaxTokens + 1});
  EXPECT_ERROR_CONTAINS(
      plan_cache_append(
          {keys, keys, positions, stat, lengths, long_new, long_new, long_pos, long_stat}, arch),
      "65 new tokens (the fused append takes up to 64)");
  auto every_other = at::zeros({1, 2, 1, 128}).slice(3, 0, 128, 2);  // D stride 2
  EXPECT_ERROR_CONTAINS(plan_cache_append({keys, keys, positions, stat, lengths, every_other,
                                           new_keys, new_positions, new_stat},
                                          arch),
                        "unit stride along D");
  auto int_positions = positions.to(at::kInt);
  EXPECT_ERROR_CONTAINS(plan_cache_append({keys, keys, int_positions, stat, lengths, new_keys,
                                           new_keys, new_positions, new_stat},
                                          arch),
                        "positions and lengths are not int64");
}

TEST(TritonPlans, CacheAttentionPassesTheCubinsParametersAndTheViewsStrides) {
  if (triton_cubins().empty()) GTEST_SKIP() << "this build has no Triton cubins";
  std::set<int> archs;
  for (const auto& c : triton_cubins()) archs.insert(c.arch);
  const int64_t b = 2, h = 6, hk = 2, t = 37, s = 90;
  for (int arch : archs)
    for (int64_t d : {64, 128})
      for (auto dtype : {at::kBFloat16, at::kHalf})
        for (bool per_head : {true, false}) {
          SCOPED_TRACE(str_cat("sm_", arch, " D", d, " ", dtype, per_head ? " per-head" : ""));
          auto opts = at::TensorOptions().dtype(dtype);
          // As the cache hands them over: heads split from (B, T, H, D), buffers narrowed.
          auto q = at::randn({b, t, h, d}, opts).transpose(1, 2);
          auto keys = at::zeros({b, hk, s + 10, d}, opts).narrow(2, 0, s);
          auto values = at::zeros({b, hk, s + 10, d}, opts).narrow(2, 0, s);
          auto key_pos = at::full({b, per_head ? hk : 1, s + 10}, -1, at::kLong).narrow(2, 0, s);
          // A chunk's positions narrowed from the prompt's at an odd offset: copied to align.
          auto q_pos = at::arange(3 * t, at::kLong).view({1, 3 * t}).repeat({b, 1}).narrow(1, 1, t);
          const CacheAttentionTensors tensors{q, keys, values, key_pos, q_pos};
          auto plan = plan_cache_attention(tensors, 0.125, arch);
          ASSERT_EQ(plan.launches.size(), 1u);
          const auto& l = plan.launches[0];
          EXPECT_NO_THROW(check_triton_args(*l.cubin, l.args));
          EXPECT_EQ(std::string(l.cubin->kernel), "cache_attention");
          EXPECT_EQ(l.grid_x, (t + l.cubin->block_m - 1) / l.cubin->block_m);
          EXPECT_EQ(l.grid_y, b * h);
          ASSERT_EQ(plan.outputs.size(), 1u);
          EXPECT_EQ(plan.outputs[0].sizes(), q.sizes());
          EXPECT_EQ(cache_attention_triton_unsupported(tensors), "the tensors are not on one GPU");
        }
  // What the kernel does not take is named (and the model's attention then runs SDPA).
  const int arch = *archs.begin();
  auto q = at::zeros({1, 4, 8, 64}, at::kHalf), k = at::zeros({1, 2, 16, 64}, at::kHalf);
  auto kp = at::zeros({1, 2, 16}, at::kLong), qp = at::zeros({1, 8}, at::kLong);
  EXPECT_ERROR_CONTAINS(
      plan_cache_attention({q.to(at::kFloat), k.to(at::kFloat), k.to(at::kFloat), kp, qp}, 0.1,
                           arch),
      "no Triton cubin of cache_attention");
  EXPECT_ERROR_CONTAINS(plan_cache_attention({q, k.to(at::kBFloat16), k, kp, qp}, 0.1, arch),
                        "differ in dtype");
  auto every_other = at::zeros({1, 2, 16, 128}, at::kHalf).slice(3, 0, 128, 2);  // D stride 2
  EXPECT_ERROR_CONTAINS(plan_cache_attention({q, every_other, k, kp, qp}, 0.1, arch),
                        "unit stride along D");
  EXPECT_ERROR_CONTAINS(
      plan_cache_attention({q, k, k, kp, at::zeros({1, 9}, at::kLong)}, 0.1, arch),
      "shapes do not match");
  EXPECT_ERROR_CONTAINS(
      plan_cache_attention({at::zeros({1, 3, 8, 64}, at::kHalf), k, k, kp, qp}, 0.1, arch),
      "shapes do not match");  // 3 query heads over 2 KV heads
}

// The launchers' loop bounds against counting every (query, key) pair.
TEST(TritonTileRanges, EqualABruteForceCountAndCoverEveryVisiblePair) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t t = 1 + at::randint(200, {1}, gen, at::kLong).item<int64_t>();
    const int64_t b = 2;
    // Documents of random lengths; ids reused after another document (trial % 3 == 1), ids
    // beyond T (trial % 3 == 2); padding runs anywhere.
    auto seg = at::empty({b, t}, at::kLong);
    for (int64_t r = 0; r < b; ++r) {
      int64_t id = 0, i = 0;
      while (i < t) {
        const int64_t len = 1 + at::randint(40, {1}, gen, at::kLong).item<int64_t>();
        const bool padding = at::randint(5, {1}, gen, at::kLong).item<int64_t>() == 0;
        int64_t value = padding ? -1 : id;
        if (!padding && trial % 3 == 1) value = id % 3;
        if (!padding && trial % 3 == 2) value = 1000 + id;
        for (int64_t j = 0; j < len && i < t; ++j, ++i) seg[r][i] = value;
        ++id;
      }
    }
    const int64_t row_tile = int64_t{16} << (trial % 3),
                  col_tile = int64_t{16} << ((trial / 3) % 3);
    const auto ranges = retention_tile_ranges(seg, row_tile, col_tile);
    const int64_t row_tiles = (t + row_tile - 1) / row_tile,
                  col_tiles = (t + col_tile - 1) / col_tile;
    ASSERT_EQ(ranges.start.sizes(), at::IntArrayRef({b, row_tiles}));
    ASSERT_EQ(ranges.end.sizes(), at::IntArrayRef({b, col_tiles}));
    ASSERT_EQ(ranges.start.scalar_type(), at::kInt);
    auto s = seg.accessor<int64_t, 2>();
    auto start = ranges.start.accessor<int32_t, 2>(), end = ranges.end.accessor<int32_t, 2>();
    for (int64_t r = 0; r < b; ++r) {
      // Brute force: the first token of each row's document, the last; ids >= T share a slot.
      auto slot = [&](int64_t i) { return std::min<int64_t>(s[r][i], t - 1); };
      for (int64_t qt = 0; qt < row_tiles; ++qt) {
        int64_t want = t;
        for (int64_t i = qt * row_tile; i < std::min(t, (qt + 1) * row_tile); ++i)
          if (s[r][i] >= 0)
            for (int64_t j = 0; j < t; ++j)
              if (s[r][j] >= 0 && slot(j) == slot(i)) {
                want = std::min(want, j);
                break;
              }
        EXPECT_EQ(start[r][qt], want / col_tile) << "trial " << trial << " row " << r;
      }
      for (int64_t kt = 0; kt < col_tiles; ++kt) {
        int64_t last = -1;
        for (int64_t j = kt * col_tile; j < std::min(t, (kt + 1) * col_tile); ++j)
          if (s[r][j] >= 0)
            for (int64_t i = t - 1; i >= 0; --i)
              if (s[r][i] >= 0 && slot(i) == slot(j)) {
                last = std::max(last, i);
                break;
              }
        const int64_t want = last < 0 ? 0 : last / row_tile + 1;
        EXPECT_EQ(end[r][kt], want) << "trial " << trial << " row " << r;
      }
      // Coverage: every pair the attention keeps lies inside both loops' bounds.
      for (int64_t i = 0; i < t; ++i)
        for (int64_t j = 0; j <= i; ++j)
          if (s[r][i] >= 0 && s[r][i] == s[r][j]) {
            ASSERT_LE(start[r][i / row_tile], j / col_tile) << trial;
            ASSERT_LT(i / row_tile, end[r][j / col_tile]) << trial;
          }
    }
  }
}

}  // namespace
}  // namespace retain
