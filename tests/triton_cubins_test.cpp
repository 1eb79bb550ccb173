// The Triton kernels as the build compiled them (kernels/triton/compile_cubins.py): every
// (kernel, arch, dtype, head dim) of kernels/triton/configs.json is in the binary, each within
// the resource budget; the tile ranges the launchers compute equal a brute-force count and cover
// every visible (query, key) pair; the arch rule picks cubins that can load.
#include <set>
#include <tuple>

#include "core/json.h"
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
    EXPECT_LE(c.shared_bytes, shared_limit(c.arch));
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
      const bool sum = kernel.rfind("retention_sum", 0) == 0;
      for (const auto& [dim, tile] : dims.items()) {
        for (const char* dtype : {"bf16", "fp16", "fp32"}) {
          if (sum != (std::string(dtype) == "fp32")) continue;
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
