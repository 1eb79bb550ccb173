// The attention mass behind H2O's, importance's and SnapKV's votes: cast a block of queries at a
// time, each block leaving out the slots none of its queries may read, it is what the definition
// gives in fp64; and a mass kept for the other caches of a shared read is taken only for equal
// inputs.
#include <c10/core/InferenceMode.h>

#include <cmath>
#include <limits>

#include "eval/cache/query_state.h"
#include "eval/cache/shared_votes.h"
#include "test_util.h"

namespace retain {
namespace {

// The definition, in fp64: softmax over the slots at positions 0 <= p <= the query's, summed over
// the queries; a query that may read nothing adds nothing.
at::Tensor mass_by_definition(const at::Tensor& q, const at::Tensor& q_pos,
                              const at::Tensor& keys_t, const at::Tensor& entry_positions) {
  const int64_t b = q.size(0), hk = q.size(1), rows = q.size(2), s = keys_t.size(3);
  auto q64 = q.to(at::kDouble), k64 = keys_t.to(at::kDouble);
  auto mass = at::zeros({b, hk, s}, at::kDouble);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t h = 0; h < hk; ++h)
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t p = q_pos[i][0][r][0].item<int64_t>();
        auto pos = entry_positions[i][h];
        auto readable = (pos >= 0).logical_and(pos <= p);
        if (!readable.any().item<bool>()) continue;
        auto scores = at::matmul(q64[i][h][r], k64[i][h]) / std::sqrt(double(q.size(3)));
        scores =
            scores.masked_fill(readable.logical_not(), -std::numeric_limits<double>::infinity());
        mass[i][h] += at::softmax(scores, 0);
      }
  return mass;
}

TEST(AttentionVoteMass, BlocksLeavingOutUnreadableSlotsGiveWhatWholeRowsGive) {
  c10::InferenceMode guard;
  at::manual_seed(11);
  const int64_t b = 2, hk = 2, per_group = 2, voters = 150, d = 16;
  // Row 0, as evict mode holds a prompt's second chunk: 400 live entries of the earlier text
  // (positions 0, 3, 6, ..., some slots empty), then the chunk's 150 tokens at 1200..1349, which
  // vote. Row 1, as keep mode reads a context: its tokens 0..149 in slots 0..149, the rest empty,
  // and 20 of its voting queries padding (position -1).
  const int64_t s = 550;
  auto entry_positions = at::full({b, hk, s}, -1, at::kLong);
  entry_positions[0].narrow(1, 0, 400).copy_(at::arange(0, 1200, 3, at::kLong).expand({hk, 400}));
  entry_positions[0][0].narrow(0, 100, 7).fill_(-1);
  entry_positions[0][1].narrow(0, 390, 10).fill_(-1);
  entry_positions[0].narrow(1, 400, 150).copy_(at::arange(1200, 1350, at::kLong).expand({hk, 150}));
  entry_positions[1].narrow(1, 0, 150).copy_(at::arange(0, 150, at::kLong).expand({hk, 150}));
  auto q_positions =
      at::stack({at::arange(1200, 1350, at::kLong),
                 at::cat({at::full({20}, -1, at::kLong), at::arange(0, 130, at::kLong)})});
  auto all_q_pos = q_positions.view({b, 1, 1, voters})
                       .repeat({1, 1, per_group, 1})
                       .view({b, 1, per_group * voters, 1});
  auto q = at::randn({b, hk, per_group * voters, d}) * 2;
  auto keys_t = at::randn({b, hk, d, s});

  // 1 byte a block: blocks of 64 queries (the least), most of them reading part of the slots;
  // 1 GiB: one block, every slot. Both are the definition's, to fp32 rounding (the blocks sum
  // the queries in another order).
  const auto blocks = attention_vote_mass(q, all_q_pos, keys_t, entry_positions, 1);
  const auto whole = attention_vote_mass(q, all_q_pos, keys_t, entry_positions, int64_t{1} << 30);
  const auto want = mass_by_definition(q, all_q_pos, keys_t, entry_positions);
  for (const auto& got : {blocks, whole})
    EXPECT_TRUE(at::allclose(got.to(at::kDouble), want, 1e-5, 1e-6))
        << (got.to(at::kDouble) - want).abs().max().item<double>();
  // Sanity of the fixture: empty slots and the chunk's last slots get nothing from row 1's
  // queries; each voting query gives a total mass of 1.
  EXPECT_EQ(blocks[1].narrow(1, 150, 400).abs().sum().item<double>(), 0.0);
  EXPECT_NEAR(blocks[0].sum().item<double>(), hk * per_group * voters, 1e-2);
  EXPECT_NEAR(blocks[1].sum().item<double>(), hk * per_group * 130, 1e-2);
}

TEST(SharedVotes, AStoredMassIsTakenOnlyForEqualInputs) {
  c10::InferenceMode guard;
  at::manual_seed(12);
  SharedVotes::Inputs inputs{at::randn({1, 4, 6, 8}), at::arange(6, at::kLong).view({1, 6}),
                             at::randn({1, 2, 6, 8}),
                             at::arange(6, at::kLong).view({1, 1, 6}).expand({1, 2, 6})};
  SharedVotes shared;
  EXPECT_FALSE(shared.find(inputs).defined());
  const auto mass = at::rand({1, 2, 6});
  shared.store(inputs, mass);
  // Equal values in other tensors (another cache's copy) find it.
  SharedVotes::Inputs copy{inputs.queries.clone(), inputs.query_positions.clone(),
                           inputs.keys.clone(), inputs.entry_positions.clone()};
  ASSERT_TRUE(shared.find(copy).defined());
  EXPECT_TRUE(shared.find(copy).is_same(mass));
  EXPECT_EQ(shared.reused(), 2);
  // Any difference misses: a query, a key, a slot's position, a query's position, a shape.
  auto differ = [&](auto change) {
    SharedVotes::Inputs other{copy.queries.clone(), copy.query_positions.clone(), copy.keys.clone(),
                              copy.entry_positions.clone()};
    change(other);
    return !shared.find(other).defined();
  };
  EXPECT_TRUE(differ([](SharedVotes::Inputs& in) { in.queries[0][3][5][7] += 1e-6; }));
  EXPECT_TRUE(differ([](SharedVotes::Inputs& in) { in.keys[0][1][2][0] = 0; }));
  EXPECT_TRUE(differ([](SharedVotes::Inputs& in) { in.entry_positions[0][1][4] = -1; }));
  EXPECT_TRUE(differ([](SharedVotes::Inputs& in) { in.query_positions[0][0] = -1; }));
  EXPECT_TRUE(differ([](SharedVotes::Inputs& in) { in.queries = in.queries.narrow(2, 1, 5); }));
  EXPECT_EQ(shared.reused(), 2);
  // The latest four are kept: a fifth store drops the first.
  for (int i = 0; i < 4; ++i) {
    SharedVotes::Inputs other = copy;
    other.keys = copy.keys + (i + 1);
    shared.store(other, at::rand({1, 2, 6}));
  }
  EXPECT_FALSE(shared.find(copy).defined());
}

}  // namespace
}  // namespace retain
