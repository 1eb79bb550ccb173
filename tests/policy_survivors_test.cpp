// Each eviction policy on hand-made statistics gives exactly the survivors its definition says
// (explicit loops compute the expected ones), the budget holds after every step, and specs are
// parsed, suggested and validated.
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>

#include "core/safetensors.h"
#include "eval/budgeted_cache.h"
#include "eval/cache_factory.h"
#include "eviction_fixtures.h"
#include "model/decoder.h"
#include "test_util.h"

namespace retain {
namespace {

using namespace eviction_testing;

TEST(Eviction, StreamingKeepsSinksAndTheMostRecent) {
  auto c = tiny_config(1, 1);
  PolicySpec p = parse_policy("streaming:sinks=2,buffer=0");
  BudgetedKvCache cache(c, p, 5, 10);
  feed(cache, c, 0, at::randn({1, 1, 10, 4}), at::zeros({1, 10, 8}));
  EXPECT_EQ(cache.live_positions(0, 0, 0), (std::vector<int64_t>{0, 1, 7, 8, 9}));
  feed(cache, c, 10, at::randn({1, 1, 1, 4}), at::zeros({1, 1, 8}));
  EXPECT_EQ(cache.live_positions(0, 0, 0), (std::vector<int64_t>{0, 1, 8, 9, 10}));
}

// Keys whose first coordinate is kVotes[i] and queries (10, 0, 0, 0): attention ranks keys by it.
const std::vector<float> kVotes = {5, 1, 9, 3, 8, 2, 7, 0, 6, 4, 1, 2};
at::Tensor vote_keys() {
  auto keys = at::zeros({1, 1, 12, 4});
  for (int i = 0; i < 12; ++i) keys[0][0][i][0] = kVotes[i];
  return keys;
}
at::Tensor vote_queries() {
  auto q = at::zeros({1, 1, 12, 4});
  q.select(3, 0).fill_(10);
  return q;
}

TEST(Eviction, SagekvAndSnapkvKeepTheirVotesSinksAndWindow) {
  auto c = tiny_config(1, 1);
  auto keys = vote_keys(), q = vote_queries();
  BudgetedKvCache sage(c, parse_policy("sagekv:sinks=1,window=2,buffer=0"), 6, 12);
  feed(sage, c, 0, keys, at::zeros({1, 12, 8}), q);
  // Sink 0, window 10-11, then the 3 keys the last token attends to most: v = 9, 8, 7.
  EXPECT_EQ(sage.live_positions(0, 0, 0), (std::vector<int64_t>{0, 2, 4, 6, 10, 11}));
  BudgetedKvCache snap(c, parse_policy("snapkv:window=2,kernel=1,buffer=0"), 6, 12);
  feed(snap, c, 0, keys, at::zeros({1, 12, 8}), q);
  EXPECT_EQ(snap.live_positions(0, 0, 0), (std::vector<int64_t>{2, 4, 6, 8, 10, 11}));
  // Decoding keeps the prompt's selection: one more token pushes out the oldest decoded-or-window
  // entry that is no longer protected, never a prompt token it chose.
  BudgetedKvCache decode(c, parse_policy("snapkv:window=2,kernel=1,buffer=0"), 6, 12);
  feed(decode, c, 0, keys, at::zeros({1, 12, 8}), q);
  feed(decode, c, 12, at::zeros({1, 1, 1, 4}), at::zeros({1, 1, 8}), at::zeros({1, 1, 1, 4}));
  EXPECT_EQ(decode.live_positions(0, 0, 0), (std::vector<int64_t>{2, 4, 6, 8, 11, 12}));
  EXPECT_ERROR_CONTAINS(BudgetedKvCache(c, parse_policy("h2o:window=8"), 6, 4),
                        "must be below the budget (6 per head)");
}

// Accumulated attention computed here with explicit loops: queries (10, 0, 0, 0) and keys whose
// first coordinate is v[h][i], scale 1/2 (D = 4); query i sees keys 0..i.
std::vector<std::vector<double>> accumulated_attention(const std::vector<std::vector<float>>& v) {
  std::vector<std::vector<double>> mass(v.size(), std::vector<double>(v[0].size(), 0.0));
  for (size_t h = 0; h < v.size(); ++h)
    for (size_t i = 0; i < v[h].size(); ++i) {
      double z = 0;
      for (size_t j = 0; j <= i; ++j) z += std::exp(10.0 * v[h][j] / 2.0);
      for (size_t j = 0; j <= i; ++j) mass[h][j] += std::exp(10.0 * v[h][j] / 2.0) / z;
    }
  return mass;
}

std::vector<int64_t> top_positions(const std::vector<double>& score, size_t k,
                                   size_t protect_from) {
  std::vector<std::pair<double, int64_t>> ranked;
  for (size_t i = 0; i < score.size(); ++i)
    ranked.emplace_back(i >= protect_from ? 1e300 : score[i], static_cast<int64_t>(i));
  std::sort(ranked.rbegin(), ranked.rend());
  std::vector<int64_t> out;
  for (size_t i = 0; i < k; ++i) out.push_back(ranked[i].second);
  std::sort(out.begin(), out.end());
  return out;
}

// snapkv:pool=avg is kvpress's SnapKV: the window's votes (queries 10 and 11, each over the keys it
// sees) summed per key, the window's own keys zeroed, then averaged over `kernel` neighbours with
// the zero padding counted; the window is kept, then the best pooled keys. Explicit loops here.
TEST(Eviction, SnapkvAveragePoolingIsKvpressDefinition) {
  auto c = tiny_config(1, 1);
  const std::vector<float>& v = kVotes;
  auto keys = vote_keys(), q = vote_queries();
  std::vector<double> mass(12, 0.0);
  for (int query : {10, 11}) {
    double z = 0;
    for (int j = 0; j <= query; ++j) z += std::exp(10.0 * v[j] / 2.0);
    for (int j = 0; j <= query; ++j) mass[j] += std::exp(10.0 * v[j] / 2.0) / z;
  }
  mass[10] = mass[11] = 0;  // the window lends nothing to its neighbours
  std::vector<double> pooled(12, 0.0);
  for (int j = 0; j < 12; ++j)
    for (int n = j - 1; n <= j + 1; ++n) pooled[j] += (n >= 0 && n < 12 ? mass[n] : 0.0) / 3.0;
  BudgetedKvCache snap(c, parse_policy("snapkv:window=2,kernel=3,pool=avg,buffer=0"), 6, 12);
  feed(snap, c, 0, keys, at::zeros({1, 12, 8}), q);
  EXPECT_EQ(snap.live_positions(0, 0, 0), top_positions(pooled, 6, 10));
  EXPECT_ERROR_CONTAINS(parse_policy("h2o:pool=avg"), "pool applies to snapkv");
  EXPECT_ERROR_CONTAINS(parse_policy("snapkv:pool=mean"), "pool must be max or avg");
}

// TOVA: after every step the entries the latest query attends to least go, its attention summed
// over the layer's heads (every head keeps the same tokens), each step's vote replacing the last.
// Queries (2, 0, 0, 0), so a key's logit is its first coordinate (scale 1/2); head 1's keys are
// head 0's rotated by five, so no two entries tie. Explicit loops here.
TEST(Eviction, TovaKeepsWhatTheLatestQueryAttendsTo) {
  auto c = tiny_config(1, 2);
  std::vector<std::vector<float>> v(2);
  for (int i = 0; i < 12; ++i) {
    v[0].push_back(kVotes[i]);
    v[1].push_back(kVotes[(i + 5) % 12]);
  }
  auto keys = at::zeros({1, 2, 12, 4});
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 12; ++i) keys[0][h][i][0] = v[h][i];
  auto q = at::zeros({1, 2, 12, 4});
  q.select(3, 0).fill_(2);
  // The mass the query (first coordinate `query`) gives each of `live`, summed over the heads.
  auto latest_vote = [&](const std::vector<int64_t>& live, double query) {
    std::vector<double> mass(live.size(), 0.0);
    for (int h = 0; h < 2; ++h) {
      double z = 0;
      for (int64_t p : live) z += std::exp(query * v[h][p] / 2.0);
      for (size_t j = 0; j < live.size(); ++j) mass[j] += std::exp(query * v[h][live[j]] / 2.0) / z;
    }
    return mass;
  };
  auto top_live = [](const std::vector<int64_t>& live, const std::vector<double>& mass) {
    std::vector<int64_t> out;
    for (int64_t i : top_positions(mass, 6, mass.size())) out.push_back(live[i]);
    std::sort(out.begin(), out.end());
    return out;
  };
  std::vector<int64_t> all(12);
  for (int64_t i = 0; i < 12; ++i) all[i] = i;
  BudgetedKvCache tova(c, parse_policy("tova:buffer=0"), 6, 12);
  feed(tova, c, 0, keys, at::zeros({1, 12, 8}), q);
  auto first = top_live(all, latest_vote(all, 2));
  for (int h = 0; h < 2; ++h) EXPECT_EQ(tova.live_positions(0, 0, h), first) << "head " << h;
  // A decoded token (keys 0) whose query prefers small keys: its vote alone decides.
  v[0].push_back(0);
  v[1].push_back(0);
  auto live = first;
  live.push_back(12);
  auto second = top_live(live, latest_vote(live, -2));
  auto query = at::zeros({1, 2, 1, 4});
  query.select(3, 0).fill_(-2);
  feed(tova, c, 12, at::zeros({1, 2, 1, 4}), at::zeros({1, 1, 8}), query);
  for (int h = 0; h < 2; ++h) EXPECT_EQ(tova.live_positions(0, 0, h), second) << "head " << h;
  // Accumulating the two votes (h2o's way) would keep a different set: the test tells them apart.
  auto prompt_vote = latest_vote(all, 2), decode_vote = latest_vote(live, -2);
  for (size_t j = 0; j < live.size(); ++j)
    if (live[j] < 12) decode_vote[j] += prompt_vote[live[j]];
  EXPECT_NE(top_live(live, decode_vote), second);
}

TEST(Eviction, H2oAndImportanceKeepTheHeaviestHitters) {
  auto c = tiny_config(1, 2);
  const std::vector<std::vector<float>> v = {
      {0.1f, 0.9f, 0.2f, 0.8f, 0.3f, 0.05f, 0.7f, 0.4f, 0.6f, 0.5f},
      {0.5f, 0.4f, 0.95f, 0.1f, 0.6f, 0.2f, 0.3f, 0.9f, 0.05f, 0.15f}};
  auto keys = at::zeros({1, 2, 10, 4});
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 10; ++i) keys[0][h][i][0] = v[h][i];
  auto q = at::zeros({1, 2, 10, 4});
  q.select(3, 0).fill_(10);
  auto mass = accumulated_attention(v);
  BudgetedKvCache h2o(c, parse_policy("h2o:window=2,buffer=0"), 5, 10);
  feed(h2o, c, 0, keys, at::zeros({1, 10, 8}), q);
  for (int h = 0; h < 2; ++h)
    EXPECT_EQ(h2o.live_positions(0, 0, h), top_positions(mass[h], 5, 8)) << "head " << h;
  // importance: one score per token, the sum over heads; both heads keep the same tokens.
  std::vector<double> total(10);
  for (int i = 0; i < 10; ++i) total[i] = mass[0][i] + mass[1][i];
  BudgetedKvCache importance(c, parse_policy("importance:buffer=0"), 5, 10);
  feed(importance, c, 0, keys, at::zeros({1, 10, 8}), q);
  EXPECT_EQ(importance.live_positions(0, 0, 0), top_positions(total, 5, 10));
  EXPECT_EQ(importance.live_positions(0, 0, 1), top_positions(total, 5, 10));
}

// The random policy's score of an entry: SplitMix64's finaliser chained over seed, layer, KV head
// and position, its top 24 bits as a fraction (eval/policies/random.cpp states the formula).
double random_policy_score(uint64_t seed, uint64_t layer, uint64_t head, uint64_t position) {
  auto mix = [](uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  };
  return static_cast<double>(mix(mix(mix(seed ^ layer) ^ head) ^ position) >> 40) / (1 << 24);
}

TEST(Eviction, RandomKeepsTheTopOfItsSeededScores) {
  auto c = tiny_config(1, 1);
  BudgetedKvCache cache(c, parse_policy("random:seed=42,buffer=0"), 4, 12);
  feed(cache, c, 0, at::randn({1, 1, 12, 4}), at::zeros({1, 12, 8}));
  std::vector<double> score(12);
  for (int i = 0; i < 12; ++i) score[i] = random_policy_score(42, 0, 0, i);
  EXPECT_EQ(cache.live_positions(0, 0, 0), top_positions(score, 4, 12));
  // Another seed keeps other entries; the same seed read in other chunks keeps the same ones.
  BudgetedKvCache other(c, parse_policy("random:seed=43,buffer=0"), 4, 12);
  feed(other, c, 0, at::randn({1, 1, 12, 4}), at::zeros({1, 12, 8}));
  EXPECT_NE(other.live_positions(0, 0, 0), cache.live_positions(0, 0, 0));
  BudgetedKvCache chunked(c, parse_policy("random:seed=42,buffer=0"), 4, 5);
  for (int start = 0; start < 12; start += 5) {
    const int n = std::min(5, 12 - start);
    feed(chunked, c, start, at::randn({1, 1, n, 4}), at::zeros({1, n, 8}));
  }
  EXPECT_EQ(chunked.live_positions(0, 0, 0), cache.live_positions(0, 0, 0));
}

TEST(Eviction, ProtectedQuestionSurvivesThePrefillOnly) {
  auto c = tiny_config(1, 1);
  auto keys = at::zeros({1, 1, 10, 4});
  for (int i = 0; i < 10; ++i)
    keys[0][0][i][0] = static_cast<float>(i);  // knorm prefers the oldest
  BudgetedKvCache plain(c, parse_policy("knorm:buffer=0"), 4, 10);
  feed(plain, c, 0, keys, at::zeros({1, 10, 8}));
  EXPECT_EQ(plain.live_positions(0, 0, 0), (std::vector<int64_t>{0, 1, 2, 3}));
  BudgetedKvCache guarded(c, parse_policy("knorm:buffer=0"), 4, 10);
  guarded.protect_from({8});  // the "question" is positions 8 and 9
  feed(guarded, c, 0, keys, at::zeros({1, 10, 8}));
  EXPECT_EQ(guarded.live_positions(0, 0, 0), (std::vector<int64_t>{0, 1, 8, 9}));
  guarded.end_prefill();  // decoding: the question competes like everything else
  auto next = at::zeros({1, 1, 1, 4});
  next[0][0][0][0] = 0.5;
  feed(guarded, c, 10, next, at::zeros({1, 1, 8}));
  EXPECT_EQ(guarded.live_positions(0, 0, 0), (std::vector<int64_t>{0, 1, 8, 10}));
}

// locret / kvzap score each entry once, from the token itself, with the exported scorer. A kvzap
// scorer whose score is silu(hidden[0]) (linear1 picks coordinate 0, linear2 is 1 for every
// head): each head keeps the largest hidden[0]; with a threshold, the ones below it go too.
TEST(Eviction, LearnedScorersKeepTheirTopScores) {
  auto c = tiny_config(1, 2);
  ScorerConfig config;
  config.kind = ScorerKind::kKvzap;
  config.width = 1;
  ScorerBank scorer(config, c, at::kCPU, 0);
  auto w1 = at::zeros({1, 8});
  w1[0][0] = 1;
  scorer.load({{"layers.0.scorer.linear1.weight", w1},
               {"layers.0.scorer.linear1.bias", at::zeros({1})},
               {"layers.0.scorer.linear2.weight", at::ones({2, 1})},
               {"layers.0.scorer.linear2.bias", at::zeros({2})}},
              "probe");
  const std::vector<float> x = {0.5f, 3, 1, 2.5f, 0.1f, 2, 0.2f, 4};
  auto hidden = at::zeros({1, 8, 8});
  for (int i = 0; i < 8; ++i) hidden[0][i][0] = x[i];
  BudgetedKvCache top(c, parse_policy("kvzap:scorer=s.safetensors,buffer=0,window=0"), 4, 8,
                      LearnedModules(nullptr, &scorer));
  feed(top, c, 0, at::randn({1, 2, 8, 4}), hidden);
  EXPECT_EQ(top.live_positions(0, 0, 0), (std::vector<int64_t>{1, 3, 5, 7}));
  EXPECT_EQ(top.live_positions(0, 0, 1), (std::vector<int64_t>{1, 3, 5, 7}));
  // By default the last min(32, M/2) = 2 positions stay whatever their score (6 scores 0.2).
  for (const char* spec : {"kvzap:scorer=s.safetensors,buffer=0",
                           "kvzap:scorer=s.safetensors,buffer=0,threshold=7.389"}) {
    BudgetedKvCache recent(c, parse_policy(spec), 4, 8, LearnedModules(nullptr, &scorer));
    feed(recent, c, 0, at::randn({1, 2, 8, 4}), hidden);
    EXPECT_EQ(recent.live_positions(0, 0, 0), (std::vector<int64_t>{1, 3, 6, 7})) << spec;
  }
  // threshold exp(2): silu(x) >= 2 holds for x = 3, 2.5 and 4 only (silu(2) = 1.76).
  BudgetedKvCache cut(c,
                      parse_policy("kvzap:scorer=s.safetensors,buffer=0,window=0,threshold=7.389"),
                      4, 8, LearnedModules(nullptr, &scorer));
  feed(cut, c, 0, at::randn({1, 2, 8, 4}), hidden);
  EXPECT_EQ(cut.live_positions(0, 0, 0), (std::vector<int64_t>{1, 3, 7}));
  // The kind and the file are checked.
  EXPECT_ERROR_CONTAINS(BudgetedKvCache(c, parse_policy("locret:scorer=s.safetensors"), 4, 8,
                                        LearnedModules(nullptr, &scorer)),
                        "its scorer file holds a kvzap scorer");
  EXPECT_ERROR_CONTAINS(BudgetedKvCache(c, parse_policy("kvzap"), 4, 8),
                        "needs its learned scorer: kvzap:scorer=FILE");
  EXPECT_ERROR_CONTAINS(parse_policy("locret:window=x"), "needs an integer");
}

TEST(Eviction, KnormKeepsTheSmallestKeysPerHead) {
  auto c = tiny_config(1, 2);
  BudgetedKvCache cache(c, parse_policy("knorm:buffer=0"), 3, 8);
  // Head 0 norms 8,1,7,2,6,3,5,4 -> keeps positions 1,3,5; head 1 reversed -> keeps 2,4,6.
  std::vector<float> n0 = {8, 1, 7, 2, 6, 3, 5, 4}, n1 = {1.5f, 9, 1, 9, 1.2f, 9, 1.1f, 9};
  auto keys = at::zeros({1, 2, 8, 4});
  for (int i = 0; i < 8; ++i) {
    keys[0][0][i][0] = n0[i];
    keys[0][1][i][0] = n1[i];
  }
  feed(cache, c, 0, keys, at::zeros({1, 8, 8}));
  EXPECT_EQ(cache.live_positions(0, 0, 0), (std::vector<int64_t>{1, 3, 5}));
  EXPECT_EQ(cache.live_positions(0, 0, 1), (std::vector<int64_t>{2, 4, 6}));
  // The kept keys moved with their positions.
  EXPECT_EQ(cache.live_bytes(), 2 * 2 * 3 * 4 * 4);
}

TEST(Eviction, BufferDelaysEvictionAndTheBudgetHoldsAfterEveryStep) {
  auto c = tiny_config(2, 2);
  BudgetedKvCache cache(c, parse_policy("random:seed=3,buffer=4"), 6, 3);
  for (int64_t step = 0; step < 40; ++step) {
    feed(cache, c, 3 * step, at::randn({1, 2, 3, 4}), at::zeros({1, 3, 8}));
    for (int64_t l = 0; l < 2; ++l) EXPECT_LE(cache.lengths(l).max().item<int64_t>(), 6 + 4);
  }
  EXPECT_LE(cache.peak_bytes(), 2 * 2 * 2 * (6 + 4 + 3) * 4 * 4);
}

TEST(Eviction, TrimkvKeepsTheTopRetentionScoresPerHead) {
  auto c = tiny_config(1, 1);
  auto gates = probe_gates(c);
  BudgetedKvCache cache(c, parse_policy("trimkv:buffer=0"), 4, 12, gates.get());
  std::vector<float> x = {3, -1, 2.5f, 0, 4, 1, -0.5f, 2, 0.2f, 5, 1.5f, 0.1f};
  auto hidden = at::zeros({1, 12, 8});
  for (int i = 0; i < 12; ++i) hidden[0][i][0] = x[i];
  feed(cache, c, 0, at::randn({1, 1, 12, 4}), hidden);
  // Expected: top-4 of (12 - pos) * log beta_pos, computed here from the definition.
  auto lb = at::log_sigmoid(at::silu(hidden.select(2, 0)))[0];
  std::vector<std::pair<double, int64_t>> ranked;
  for (int64_t i = 0; i < 12; ++i) ranked.emplace_back((12.0 - i) * lb[i].item<double>(), i);
  std::sort(ranked.rbegin(), ranked.rend());
  std::vector<int64_t> expected;
  for (int k = 0; k < 4; ++k) expected.push_back(ranked[k].second);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(cache.live_positions(0, 0, 0), expected);
}

TEST(Eviction, DbtrimkvKeepsTheGlobalTopAcrossLayersAndHeads) {
  auto c = tiny_config(3, 2);
  auto gates = probe_gates(c, /*distinct=*/true);
  BudgetedKvCache cache(c, parse_policy("dbtrimkv:buffer=0"), 4, 16, gates.get());
  auto hidden = at::randn({1, 16, 8}, at::make_generator<at::CPUGeneratorImpl>(5)) * 3;
  feed(cache, c, 0, at::randn({1, 2, 16, 4}), hidden);
  // Expected: the top L Hk M = 24 of (16 - pos) log beta_{l,h}(pos) over all 96 entries.
  std::vector<std::tuple<double, int64_t, int64_t, int64_t>> ranked;
  for (int64_t l = 0; l < 3; ++l)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t i = 0; i < 16; ++i) {
        double lb =
            at::log_sigmoid(probe_scale(l, h, true) * at::silu(hidden[0][i][0])).item<double>();
        ranked.emplace_back((16.0 - i) * lb, l, h, i);
      }
  std::sort(ranked.rbegin(), ranked.rend());
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> expected;
  for (int k = 0; k < 24; ++k)
    expected[{std::get<1>(ranked[k]), std::get<2>(ranked[k])}].push_back(std::get<3>(ranked[k]));
  int64_t total = 0;
  std::set<int64_t> lengths;
  for (int64_t l = 0; l < 3; ++l)
    for (int64_t h = 0; h < 2; ++h) {
      auto want = expected[{l, h}];
      std::sort(want.begin(), want.end());
      EXPECT_EQ(cache.live_positions(0 + l, 0, h), want) << "layer " << l << " head " << h;
      total += static_cast<int64_t>(want.size());
      lengths.insert(static_cast<int64_t>(want.size()));
    }
  EXPECT_EQ(total, 3 * 2 * 4);    // per-head lengths sum to the global budget L Hk M
  EXPECT_GT(lengths.size(), 1u);  // and they differ between heads
  // With a minimum per head, no head falls below it.
  BudgetedKvCache floor(c, parse_policy("dbtrimkv:buffer=0,min_per_head=3"), 4, 16, gates.get());
  feed(floor, c, 0, at::randn({1, 2, 16, 4}), hidden);
  for (int64_t l = 0; l < 3; ++l) EXPECT_GE(floor.lengths(l).min().item<int64_t>(), 3);
}

TEST(Eviction, ChunkedPrefillWithTheFullCacheEqualsOneShot) {
  c10::InferenceMode guard;
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "llama_gqa4_llama3", {});
  auto ids = SafetensorsFile::open(testing::fixture_dir("hf") / "llama_gqa4_llama3" /
                                   "reference.safetensors")
                 ->tensor("input_ids")
                 .clone();
  const int64_t t = ids.size(1);
  auto one = model.forward(ids, at::arange(t).view({1, t}), nullptr);
  FullKvCache cache(model.config().num_layers);
  std::vector<at::Tensor> parts;
  for (int64_t b = 0; b < t; b += 10) {
    int64_t n = std::min<int64_t>(10, t - b);
    parts.push_back(model.forward(ids.narrow(1, b, n), at::arange(b, b + n).view({1, n}), &cache));
  }
  EXPECT_LE((at::cat(parts, 1) - one).abs().max().item<double>(), 1e-4);
}

// The registry: unknown names and options get the closest valid one; an option of another policy
// names the policies that take it; every registered policy has a help line and a docs table row.
TEST(Eviction, RegistrySuggestsAndDocumentsEveryPolicy) {
  EXPECT_ERROR_CONTAINS(parse_policy("h2p"), "did you mean 'h2o'");
  EXPECT_ERROR_CONTAINS(parse_policy("h2o:windw=3"), "did you mean 'window'");
  EXPECT_ERROR_CONTAINS(parse_policy("h2o:min_per_head=2"),
                        "min_per_head applies to trimkv and dbtrimkv");
  EXPECT_ERROR_CONTAINS(parse_policy("snapkv:kernel=4"), "kernel must be odd, found 4");
  EXPECT_ERROR_CONTAINS(parse_policy("trimkv:horizon=0"), "horizon must be >= 1, found 0");
  EXPECT_ERROR_CONTAINS(parse_policy("full:buffer=3"), "full takes no options");
  EXPECT_EQ(parse_policy("h2o:window=3,buffer=5").buffer, 5);
  EXPECT_EQ(parse_policy("dbtrimkv:gates=a.safetensors").gates(), "a.safetensors");
  const std::string help = policy_help(), table = policy_table_markdown();
  for (const auto& r : policy_registry()) {
    EXPECT_NE(help.find("\n  " + r.name + ": "), std::string::npos) << r.name;
    EXPECT_NE(table.find("| `" + r.name + "` |"), std::string::npos) << r.name;
  }
}

TEST(Eviction, OptionsAndBudgetsAreValidated) {
  EXPECT_ERROR_CONTAINS(parse_policy("lru"), "--policy 'lru' is not known");
  EXPECT_ERROR_CONTAINS(parse_policy("h2o:window=x"), "needs an integer");
  EXPECT_ERROR_CONTAINS(parse_policy("h2o:colour=3"), "unknown option 'colour'");
  EXPECT_EQ(resolve_budget(0.1, 452), 45);
  EXPECT_EQ(resolve_budget(512, 10), 512);
  EXPECT_ERROR_CONTAINS(resolve_budget(2.5, 10), "must be an integer");
  auto c = tiny_config(1, 1);
  EXPECT_ERROR_CONTAINS(BudgetedKvCache(c, parse_policy("trimkv"), 8, 4), "needs learned gates");
}

TEST(Eviction, StreamingWindowAndDbtrimkvThreshold) {
  auto c = tiny_config(1, 1);
  BudgetedKvCache streaming(c, parse_policy("streaming:sinks=1,window=2,buffer=0"), 8, 10);
  feed(streaming, c, 0, at::randn({1, 1, 10, 4}), at::zeros({1, 10, 8}));
  EXPECT_EQ(streaming.live_positions(0, 0, 0),
            (std::vector<int64_t>{0, 8, 9}));  // below the budget: the window decides
  EXPECT_ERROR_CONTAINS(BudgetedKvCache(c, parse_policy("streaming:sinks=4,window=8"), 8, 4),
                        "exceed the budget");

  // Threshold mode: entries whose retention beta^(10 - pos) fell below 0.3 go, whatever the budget.
  auto gates = probe_gates(c);
  auto hidden = at::zeros({1, 10, 8});
  const std::vector<float> x = {4, -2, 3, 0.5f, 5, -1, 2, 1, 6, 0};
  for (int i = 0; i < 10; ++i) hidden[0][i][0] = x[i];
  BudgetedKvCache threshold(c, parse_policy("dbtrimkv:threshold=0.3"), 100, 10, gates.get());
  feed(threshold, c, 0, at::randn({1, 1, 10, 4}), hidden);
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 10; ++i) {
    double lb = at::log_sigmoid(at::silu(hidden[0][i][0])).item<double>();
    if ((10.0 - i) * lb >= std::log(0.3)) expected.push_back(i);
  }
  ASSERT_LT(expected.size(), 10u);
  EXPECT_EQ(threshold.live_positions(0, 0, 0), expected);
  EXPECT_ERROR_CONTAINS(parse_policy("h2o:threshold=0.5"),
                        "threshold applies to trimkv, dbtrimkv and kvzap");
  EXPECT_ERROR_CONTAINS(parse_policy("dbtrimkv:threshold=2"), "threshold must be in (0, 1)");
}

}  // namespace
}  // namespace retain
