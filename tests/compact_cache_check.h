// A random budgeted-cache layout and the check that a compaction equals
// compact_cache_reference bit for bit; shared by the CUDA kernel's test and the CPU loop's.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "kernels/decode_attention.h"

namespace retain::testing {

// keys, values (B, Hk, C, D) in `dtype`, stat (B, Hk, C) fp32, positions with a random number of
// live slots per head (the rest -1), and a random keep mask over the first `slots` slots of the
// live ones, where head (1, 2) keeps nothing.
struct RandomCache {
  at::Tensor keys, values, positions, stat, keep;
};
inline RandomCache random_cache(int64_t b, int64_t hk, int64_t capacity, int64_t d, int64_t slots,
                                at::ScalarType dtype, at::Device device) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(slots);
  auto on = at::TensorOptions().device(device);
  RandomCache c;
  c.keys = at::randn({b, hk, capacity, d}, gen, at::kFloat).to(on.dtype(dtype));
  c.values = at::randn({b, hk, capacity, d}, gen, at::kFloat).to(on.dtype(dtype));
  c.stat = at::randn({b, hk, capacity}, gen, at::kFloat).to(on);
  auto lengths = at::randint(0, slots + 1, {b, hk}, gen, at::kLong);
  auto slot = at::arange(capacity, at::kLong).view({1, 1, capacity});
  c.positions = at::where(slot < lengths.unsqueeze(-1), slot * 2, at::full_like(slot, -1)).to(on);
  c.keep = (at::rand({b, hk, slots}, gen, at::kFloat) < 0.6).to(on);
  c.keep.logical_and_(c.positions.narrow(2, 0, slots) >= 0);
  c.keep[1][2].fill_(false);  // a head that loses everything
  return c;
}

// compact_cache on the first keep.size(2) slots of c against compact_cache_reference on a copy:
// the same lengths, and the same buffers (slots past the view untouched by both).
inline void expect_compaction_equals_reference(RandomCache c, const std::string& what) {
  const int64_t slots = c.keep.size(2);
  auto k2 = c.keys.clone(), v2 = c.values.clone(), p2 = c.positions.clone(), s2 = c.stat.clone();
  auto view = [&](const at::Tensor& t) { return t.narrow(2, 0, slots); };
  auto got = compact_cache(view(c.keys), view(c.values), view(c.positions), view(c.stat), c.keep);
  auto want = compact_cache_reference(view(k2), view(v2), view(p2), view(s2), c.keep);
  EXPECT_TRUE(at::equal(got, want)) << what;
  EXPECT_TRUE(at::equal(c.keys, k2)) << what;
  EXPECT_TRUE(at::equal(c.values, v2)) << what;
  EXPECT_TRUE(at::equal(c.positions, p2)) << what;
  EXPECT_TRUE(at::equal(c.stat, s2)) << what;
}

}  // namespace retain::testing
