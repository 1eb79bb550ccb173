// The CPU loops of the budgeted cache (kernels/cache_cpu.h) against the ATen operations they
// replace: compaction bit for bit against compact_cache_reference, and the append against a
// scatter and a plain loop, on views narrower than their buffers, heads that keep everything or
// nothing, and several dtypes.
#include <gtest/gtest.h>

#include "kernels/cache_cpu.h"
#include "kernels/decode_attention.h"
#include "test_util.h"

namespace retain {
namespace {

TEST(CacheCpu, CompactEqualsTheReferenceExactly) {
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kDouble})
    for (int64_t slots : {1, 37, 300}) {
      const int64_t b = 3, hk = 4, d = 16, capacity = 320;
      auto gen = at::make_generator<at::CPUGeneratorImpl>(slots);
      auto keys = at::randn({b, hk, capacity, d}, gen, at::kFloat).to(dtype);
      auto values = at::randn({b, hk, capacity, d}, gen, at::kFloat).to(dtype);
      auto stat = at::randn({b, hk, capacity}, gen, at::kFloat);
      auto lengths = at::randint(0, slots + 1, {b, hk}, gen, at::kLong);
      auto slot = at::arange(capacity, at::kLong).view({1, 1, capacity});
      auto positions = at::where(slot < lengths.unsqueeze(-1), slot * 3, at::full_like(slot, -1));
      auto keep = at::rand({b, hk, slots}, gen, at::kFloat) < 0.5;
      keep[1][2].fill_(false);  // a head that loses everything
      keep[2][0].fill_(true);   // one that keeps every slot
      auto k2 = keys.clone(), v2 = values.clone(), p2 = positions.clone(), s2 = stat.clone();
      auto view = [&](const at::Tensor& t) { return t.narrow(2, 0, slots); };
      ASSERT_TRUE(
          compact_cache_uses_cpu_loop(view(keys), view(values), view(positions), view(stat)));
      auto got = compact_cache(view(keys), view(values), view(positions), view(stat), keep);
      auto want = compact_cache_reference(view(k2), view(v2), view(p2), view(s2), keep);
      EXPECT_TRUE(at::equal(got, want)) << slots;
      EXPECT_TRUE(at::equal(keys, k2)) << slots << " " << c10::toString(dtype);
      EXPECT_TRUE(at::equal(values, v2)) << slots;
      EXPECT_TRUE(at::equal(positions, p2)) << slots;
      EXPECT_TRUE(at::equal(stat, s2)) << slots;
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
