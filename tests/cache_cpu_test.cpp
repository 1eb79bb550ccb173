// The CPU loops of the budgeted cache (kernels/cache_cpu.h) against the ATen operations they
// replace: compaction bit for bit against compact_cache_reference, and the append against a
// scatter and a plain loop, on views narrower than their buffers, heads that keep everything or
// nothing, and several dtypes.
#include <gtest/gtest.h>

#include "compact_cache_check.h"
#include "kernels/cache_cpu.h"
#include "kernels/decode_attention.h"
#include "test_util.h"

namespace retain {
namespace {

TEST(CacheCpu, CompactEqualsTheReferenceExactly) {
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kDouble})
    for (int64_t slots : {1, 37, 300}) {
      auto c = testing::random_cache(3, 4, 320, 16, slots, dtype, at::kCPU);
      c.keep[2][0].fill_(true);  // a head that keeps every slot, live or not
      auto view = [&](const at::Tensor& t) { return t.narrow(2, 0, slots); };
      ASSERT_TRUE(compact_cache_uses_cpu_loop(view(c.keys), view(c.values), view(c.positions),
                                              view(c.stat)));
      testing::expect_compaction_equals_reference(c, str_cat(slots, " ", c10::toString(dtype)));
    }
}

TEST(CacheCpu, CompactLeavesStridedRowsToTheReference) {
  auto wide = at::zeros({1, 2, 8, 6});
  auto keys = wide.narrow(3, 0, 4);  // rows of 4 inside rows of 6: not dense
  auto positions = at::zeros({1, 2, 8}, at::kLong), stat = at::zeros({1, 2, 8});
  EXPECT_FALSE(compact_cache_uses_cpu_loop(keys, keys, positions, stat));
  EXPECT_TRUE(compact_cache_uses_cpu_loop(keys.contiguous(), keys.contiguous(), positions, stat));
  EXPECT_FALSE(compact_cache_uses_cpu_loop(keys.contiguous(), keys.contiguous(),
                                           positions.to(at::kInt), stat));
}

// dst[b, h, lengths[b, h] + i] = src[b, h, i], by hand.
at::Tensor written_by_hand(at::Tensor dst, const at::Tensor& lengths, const at::Tensor& src) {
  dst = dst.clone();
  for (int64_t bi = 0; bi < dst.size(0); ++bi)
    for (int64_t h = 0; h < dst.size(1); ++h)
      for (int64_t i = 0; i < src.size(2); ++i)
        dst[bi][h][lengths[bi][h].item<int64_t>() + i] = src[bi][h][i];
  return dst;
}

TEST(CacheCpu, WriteAtLengthsEqualsAScatterAndALoop) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const int64_t b = 2, hk = 3, capacity = 40, n = 7, d = 8;
  auto lengths = at::randint(0, capacity - n + 1, {b, hk}, gen, at::kLong);
  lengths[0][1] = 0;
  lengths[1][2] = capacity - n;  // fills the last slot
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
    auto keys = at::randn({b, hk, capacity, d}, gen, at::kFloat).to(dtype);
    auto new_keys = at::randn({b, hk, n, d}, gen, at::kFloat).to(dtype);
    auto want = written_by_hand(keys, lengths, new_keys);
    auto got = keys.clone();
    write_at_lengths(got.narrow(2, 0, capacity), lengths, new_keys);
    EXPECT_TRUE(at::equal(got, want)) << c10::toString(dtype);
    // A strided source (a transposed view) and a strided destination (the scatter path).
    auto strided_src = new_keys.transpose(2, 3).contiguous().transpose(2, 3);
    auto wide = at::zeros({b, hk, capacity, d + 3}, keys.options());
    wide.narrow(3, 0, d).copy_(keys);
    write_at_lengths(wide.narrow(3, 0, d), lengths, strided_src);
    EXPECT_TRUE(at::equal(wide.narrow(3, 0, d), want)) << c10::toString(dtype);
  }
  // Three dimensions (positions, stat), from a broadcast source.
  auto positions = at::full({b, hk, capacity}, -1, at::kLong);
  auto step = at::arange(100, 100 + n, at::kLong).view({1, 1, n}).expand({b, hk, n});
  auto want = written_by_hand(positions, lengths, step);
  write_at_lengths(positions, lengths, step);
  EXPECT_TRUE(at::equal(positions, want));
}

TEST(CacheCpu, WriteAtLengthsRefusesWhatDoesNotFit) {
  auto dst = at::zeros({1, 2, 10, 4});
  auto lengths = at::tensor({3, 8}, at::kLong).view({1, 2});
  EXPECT_ERROR_CONTAINS(write_at_lengths(dst, lengths, at::ones({1, 2, 3, 4})),
                        "head 1 holds 8 entries; 3 more do not fit its 10 slots");
  EXPECT_ERROR_CONTAINS(write_at_lengths(dst, lengths, at::ones({1, 2, 3, 5})),
                        "expected dst (B, Hk, C, ...)");
  EXPECT_ERROR_CONTAINS(write_at_lengths(dst, lengths, at::ones({1, 2, 1, 4}, at::kDouble)),
                        "src is Double, dst Float");
  EXPECT_TRUE(at::equal(dst, at::zeros({1, 2, 10, 4})));  // nothing written by a refused call
}

}  // namespace
}  // namespace retain
