// The budgeted cache and its policies: hand-made statistics give exactly the expected survivors,
// the budget holds after every step, large budgets change nothing, dbtrimkv's heads share one
// global budget, and chunked prefill equals one-shot prefill.
#include <c10/core/InferenceMode.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "core/json.h"
#include "core/safetensors.h"
#include "data/synthetic.h"
#include "eval/benchmarks/synthetic.h"
#include "eval/budgeted_cache.h"
#include "eval/cache_factory.h"
#include "eval/perplexity.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "model/init_model.h"
#include "test_util.h"

namespace retain {
namespace {

ModelConfig tiny_config(int64_t layers, int64_t kv_heads) {
  ModelConfig c;
  c.model_type = "qwen3";
  c.num_layers = layers;
  c.num_heads = kv_heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = 4;
  c.hidden_size = 8;
  c.sliding_window.assign(static_cast<size_t>(layers), 0);
  return c;
}

// Feeds one step of n tokens starting at position `start` with the given keys (B=1) into every
// layer, hidden states `hidden` (1, n, 8) for gates, queries `q` (zeros when undefined).
void feed(BudgetedKvCache& cache, const ModelConfig& c, int64_t start, const at::Tensor& keys,
          const at::Tensor& hidden, at::Tensor q = {}) {
  const int64_t n = keys.size(2);
  auto positions = at::arange(start, start + n, at::kLong).view({1, n});
  if (!q.defined()) q = at::zeros({1, c.num_heads, n, c.head_dim});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    cache.observe({l, hidden, q, keys, keys, positions});
    cache.append(l, keys, keys, positions);
  }
  cache.end_step();
}

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

TEST(Eviction, RandomKeepsTheTopOfItsSeededDraws) {
  auto c = tiny_config(1, 1);
  BudgetedKvCache cache(c, parse_policy("random:seed=42,buffer=0"), 4, 12);
  feed(cache, c, 0, at::randn({1, 1, 12, 4}), at::zeros({1, 12, 8}));
  auto draws = at::rand({1, 1, 12}, at::make_generator<at::CPUGeneratorImpl>(42));
  std::vector<double> score(12);
  for (int i = 0; i < 12; ++i) score[i] = draws[0][0][i].item<double>();
  EXPECT_EQ(cache.live_positions(0, 0, 0), top_positions(score, 4, 12));
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
  guarded.protect_from(8);  // the "question" is positions 8 and 9
  feed(guarded, c, 0, keys, at::zeros({1, 10, 8}));
  EXPECT_EQ(guarded.live_positions(0, 0, 0), (std::vector<int64_t>{0, 1, 8, 9}));
  guarded.end_prefill();  // decoding: the question competes like everything else
  auto next = at::zeros({1, 1, 1, 4});
  next[0][0][0][0] = 0.5;
  feed(guarded, c, 10, next, at::zeros({1, 1, 8}));
  EXPECT_EQ(guarded.live_positions(0, 0, 0), (std::vector<int64_t>{0, 1, 8, 10}));
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

// A gate bank whose log beta for token t depends only on hidden[t][0]: mlp2, width 1, W1 picks
// coordinate 0, W2 = scale(l, h), biases 0, so log beta = logsigmoid(scale(l, h) * silu(x0)).
double probe_scale(int64_t layer, int64_t head, bool distinct) {
  return distinct ? 1.0 + 0.7 * layer + 2.3 * head : 1.0;
}

std::unique_ptr<GateBank> probe_gates(const ModelConfig& c, bool distinct = false) {
  GateConfig g;
  g.arch = "mlp2";
  g.width = 1;
  g.tie_projection = false;
  auto bank = std::make_unique<GateBank>(g, c, at::kCPU, 0);
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    auto w1 = at::zeros({1, c.hidden_size});
    w1[0][0] = 1;
    auto w2 = at::zeros({c.num_kv_heads, 1});
    for (int64_t h = 0; h < c.num_kv_heads; ++h) w2[h][0] = probe_scale(l, h, distinct);
    named.emplace_back(str_cat("layers.", l, ".gate.linear1.weight"), w1);
    named.emplace_back(str_cat("layers.", l, ".gate.linear1.bias"), at::zeros({1}));
    named.emplace_back(str_cat("layers.", l, ".gate.linear2.weight"), w2);
    named.emplace_back(str_cat("layers.", l, ".gate.bias"), at::zeros({c.num_kv_heads}));
  }
  bank->load(named, "probe");
  return bank;
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

class PolicyOnModel : public ::testing::TestWithParam<std::string> {};

// On a real model: a budget that never triggers eviction gives exactly the full cache's tokens,
// and a small budget holds after every step.
TEST_P(PolicyOnModel, LargeBudgetEqualsFullAndSmallBudgetHolds) {
  c10::InferenceMode guard;
  fs::path dir = testing::fixture_dir("hf") / "qwen3_qknorm";
  Decoder model = Decoder::load(dir, {});
  auto gates = probe_gates(model.config());
  std::vector<int64_t> prompt;
  for (int i = 0; i < 60; ++i) prompt.push_back(3 + (i * 37) % 500);
  SamplingOptions options;
  options.max_new_tokens = 12;
  options.prefill_chunk = 16;
  FullKvCache full(model.config().num_layers);
  auto expected = generate(model, prompt, full, options).tokens;

  PolicySpec policy = parse_policy(GetParam());
  BudgetedKvCache large(model.config(), policy, 200, 16, gates.get());
  EXPECT_EQ(generate(model, prompt, large, options).tokens, expected) << GetParam();

  policy.buffer = 4;
  BudgetedKvCache small(model.config(), policy, 10, 16, gates.get());
  auto tokens = generate(model, prompt, small, options).tokens;
  EXPECT_EQ(tokens.size(), 12u);
  int64_t total = 0;
  for (int64_t l = 0; l < model.config().num_layers; ++l)
    total += small.lengths(l).sum().item<int64_t>();
  const int64_t heads = model.config().num_layers * model.config().num_kv_heads;
  EXPECT_LE(total, heads * (10 + 4)) << GetParam();
  if (!policy.global())
    for (int64_t l = 0; l < model.config().num_layers; ++l)
      EXPECT_LE(small.lengths(l).max().item<int64_t>(), 10 + 4) << GetParam();
  // One score per token (summed over the layer's heads): every head keeps the same tokens.
  if (policy.name() == "importance" || policy.name() == "tova")
    EXPECT_EQ(small.live_positions(0, 0, 0), small.live_positions(0, 0, 1));
}

INSTANTIATE_TEST_SUITE_P(Policies, PolicyOnModel,
                         ::testing::Values("streaming", "h2o", "snapkv", "sagekv", "tova", "random",
                                           "importance", "knorm", "trimkv", "dbtrimkv",
                                           "trimkv:horizon=8"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), ':', '_');
                           std::replace(n.begin(), n.end(), '=', '_');
                           return n;
                         });

// The bound (docs/evaluation.md), for every policy and chunk size: the prompt's last token (whose logits give
// the first new token) reads at most budget + 1 entries per KV head, its own included; every
// decoded token at most budget + buffer + 1; dbtrimkv the same in total over layers and heads.
TEST_P(PolicyOnModel, EveryGeneratingQueryReadsAtMostTheBudget) {
  c10::InferenceMode guard;
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "qwen3_qknorm", {});
  const ModelConfig& c = model.config();
  auto gates = probe_gates(c);
  std::vector<int64_t> prompt;
  for (int i = 0; i < 50; ++i) prompt.push_back(3 + (i * 37) % 500);
  const int64_t heads = c.num_layers * c.num_kv_heads, budget = 8;
  for (int64_t chunk : {1, 7, 64, 0}) {
    for (int64_t buffer : {0, 3}) {
      for (int64_t new_tokens : {1, 9}) {
        PolicySpec policy = parse_policy(GetParam());
        policy.buffer = buffer;
        SamplingOptions options;
        options.max_new_tokens = new_tokens;
        options.prefill_chunk = chunk;
        BudgetedKvCache cache(c, policy, budget, chunk > 0 ? chunk : 64, gates.get());
        auto r = generate(model, prompt, cache, options);
        // One new token: only the prompt's last token generated; more: decoded tokens too.
        const int64_t slack = new_tokens == 1 ? 0 : buffer;
        const std::string what = GetParam() + " chunk " + std::to_string(chunk) + " buffer " +
                                 std::to_string(buffer) + " new " + std::to_string(new_tokens);
        ASSERT_GT(r.max_attended_entries, 0) << what;
        EXPECT_LE(r.max_attended_total, heads * (budget + slack + 1)) << what;
        if (!policy.global()) {
          EXPECT_LE(r.max_attended_entries, budget + slack + 1) << what;
        }
      }
    }
  }
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

}  // namespace
}  // namespace retain

namespace retain {
namespace {

TEST(Synthetic, TasksAreSeededAndHoldTheirAnswers) {
  for (const auto& task : synthetic_task_names()) {
    auto a = make_synthetic(task, 4, 300, 11);
    auto b = make_synthetic(task, 6, 300, 11);
    ASSERT_EQ(a.size(), 4u);
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].context, b[i].context) << task;  // more examples never change earlier ones
      for (const auto& [q, answer] : a[i].turns)
        EXPECT_NE(a[i].context.find(answer), std::string::npos) << task;
      EXPECT_GE(std::count(a[i].context.begin(), a[i].context.end(), ' '), 290) << task;
    }
    EXPECT_NE(make_synthetic(task, 1, 300, 12)[0].context, a[0].context) << task;
  }
  EXPECT_EQ(make_synthetic("multi", 1, 100, 0)[0].turns.size(), 3u);
  auto ex = make_synthetic("multi", 1, 100, 0)[0];
  auto prompt = synthetic_prompt(ex, 1);
  EXPECT_NE(prompt.find("Answer: " + ex.turns[0].second + "\nQuestion: " + ex.turns[1].first +
                        "\nAnswer:"),
            std::string::npos);
  EXPECT_ERROR_CONTAINS(make_synthetic("sudoku", 1, 10, 0), "task 'sudoku' is not known");
  EXPECT_EQ(first_line_trimmed("  4821 \nmore"), "4821");
}

TEST(Synthetic, SpecShapesKeysValuesAndQuestions) {
  SyntheticSpec spec;
  spec.key_chars = 2;
  spec.key_alphabet = "bcdfg";
  spec.value_digits = 2;
  spec.multi_facts = 1;
  spec.multi_facts_max = 5;
  spec.multi_questions = 8;
  std::set<size_t> fact_counts;
  for (const auto& ex : make_synthetic("multi", 40, 30, 3, spec)) {
    std::set<std::string> keys;
    for (const auto& [q, a] : ex.turns) {
      const std::string key = q.substr(q.size() - 3, 2);  // "... of key XY?"
      for (char c : key) EXPECT_NE(spec.key_alphabet.find(c), std::string::npos) << q;
      EXPECT_TRUE(keys.insert(key).second) << "a key asked twice in " << ex.id;
      ASSERT_EQ(a.size(), 2u);
      EXPECT_NE(a[0], '0');
      EXPECT_NE(ex.context.find("Key " + key + ": value " + a + "."), std::string::npos);
    }
    // Never more questions than facts, every fact asked: the turn count is the fact count.
    fact_counts.insert(ex.turns.size());
  }
  EXPECT_EQ(fact_counts, (std::set<size_t>{1, 2, 3, 4, 5}));
  // Lengths drawn from a range stay inside it.
  for (const auto& ex : make_synthetic("needle", 10, 50, 3, spec, 200)) {
    const auto words = std::count(ex.context.begin(), ex.context.end(), ' ') + 1;
    EXPECT_GE(words, 50);
    EXPECT_LE(words, 210);
  }
  EXPECT_EQ(SyntheticSpec::from_json(spec.to_json(), "t").to_json(), spec.to_json());
  EXPECT_ERROR_CONTAINS(SyntheticSpec::from_json(Json{{"key_char", 2}}, "spec.json"),
                        "spec.json: unknown task spec key 'key_char'");
  SyntheticSpec bad = spec;
  bad.key_alphabet = "bb";
  EXPECT_ERROR_CONTAINS(bad.validate("x"), "none repeated");
  bad.key_alphabet = "b-";
  EXPECT_ERROR_CONTAINS(bad.validate("x"), "only hold letters and digits");
  bad.key_alphabet = "bc";
  bad.key_chars = 1;
  EXPECT_ERROR_CONTAINS(bad.validate("x"), "distinct keys");
}

TEST(Synthetic, DocumentsMarkTheirAnswersAndTaskFilesRoundTrip) {
  SyntheticSpec spec;
  spec.multi_questions = 4;
  for (const auto& task : synthetic_task_names()) {
    for (const auto& ex : make_synthetic(task, 3, 40, 5, spec)) {
      std::vector<std::pair<int64_t, int64_t>> spans;
      const std::string doc = synthetic_document(ex, &spans);
      ASSERT_EQ(spans.size(), ex.turns.size());
      for (size_t t = 0; t < spans.size(); ++t) {
        const std::string text = doc.substr(spans[t].first, spans[t].second - spans[t].first);
        const std::string answer = ": " + ex.turns[t].second;
        EXPECT_EQ(text, t + 1 < spans.size() ? answer + "\n" : answer) << ex.id;
        // The span starts where the prompt of that turn ends.
        EXPECT_EQ(synthetic_prompt(ex, t).size(), static_cast<size_t>(spans[t].first) + 1);
      }
      SyntheticExample back = synthetic_from_json(synthetic_to_json(ex), "t");
      EXPECT_EQ(back.id, ex.id);
      EXPECT_EQ(back.context, ex.context);
      EXPECT_EQ(back.turns, ex.turns);
    }
  }
  EXPECT_ERROR_CONTAINS(synthetic_from_json(Json{{"id", "a"}, {"task", "kv"}}, "f.jsonl:3"),
                        "f.jsonl:3: expected a string field 'context'");
  EXPECT_ERROR_CONTAINS(
      synthetic_from_json(Json{{"id", "a"}, {"task", "kv"}, {"context", "c"}, {"turns", {Json{}}}},
                          "f.jsonl:4"),
      "f.jsonl:4: turns[0]: expected a string field");
}

TEST(Synthetic, SweepWritesScoresAndResumes) {
  testing::TempDir dir;
  InitModelOptions init;
  init.arch = "llama";
  init.preset = "tiny";
  init.out = (dir / "model").string();
  init_model(init);
  SyntheticEvalOptions o;
  o.model.model_dir = init.out;
  o.policies = {"full", "streaming", "knorm"};
  o.budgets = {0.2, 40};
  o.count = 2;
  o.context_words = 120;
  o.max_new_tokens = 3;
  o.chunk = 64;
  o.out = (dir / "run").string();
  ASSERT_EQ(run_synthetic_eval(o), 0);
  Json scores = read_json_file(dir / "run" / "scores.json");
  EXPECT_EQ(scores["benchmark"], "synthetic");
  ASSERT_EQ(scores["results"].size(), 5u);  // full once + 2 policies x 2 budgets
  EXPECT_TRUE(scores["results"][0]["budget"].is_null());
  EXPECT_EQ(scores["results"][1]["budget"].get<double>(), 0.2);
  for (const auto& r : scores["results"]) {
    for (const char* k : {"em", "em_kv", "em_vars", "em_needle", "em_multi", "peak_kv_bytes"})
      EXPECT_TRUE(r["metrics"].contains(k)) << k;
  }
  // The budgeted runs hold less KV memory at their peak than the full cache.
  EXPECT_LT(scores["results"][1]["metrics"]["peak_kv_bytes"].get<double>(),
            scores["results"][0]["metrics"]["peak_kv_bytes"].get<double>());
  const std::string first = read_text_file(dir / "run" / "predictions.jsonl");
  const auto lines = std::count(first.begin(), first.end(), '\n');
  EXPECT_EQ(lines, 5 * (2 + 2 + 2 + 2 * 3));
  // A killed run keeps its finished lines: cut the file, rerun, get the same file back.
  write_text_file_atomic(dir / "run" / "predictions.jsonl",
                         first.substr(0, first.find('\n', first.size() / 2) + 1));
  ASSERT_EQ(run_synthetic_eval(o), 0);
  // Same predictions (timings aside), each exactly once.
  auto strip = [](const std::string& text) {
    std::multiset<std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      Json j = Json::parse(line);
      out.insert(j["policy"].dump() + j["budget"].dump() + j["id"].dump() + j["turn"].dump() +
                 j["pred"].dump() + j["peak_kv_bytes"].dump());
    }
    return out;
  };
  EXPECT_EQ(strip(read_text_file(dir / "run" / "predictions.jsonl")), strip(first));
  Json again = read_json_file(dir / "run" / "scores.json");
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(again["results"][i]["metrics"]["em"], scores["results"][i]["metrics"]["em"]);
    EXPECT_EQ(again["results"][i]["metrics"]["peak_kv_bytes"],
              scores["results"][i]["metrics"]["peak_kv_bytes"]);
  }
}

}  // namespace
}  // namespace retain

namespace retain {
namespace {

TEST(StreamingPerplexity, FullCacheEqualsTransformersLossAndPoliciesStayBounded) {
  fs::path dir = testing::fixture_dir("hf") / "llama_gqa4_llama3";
  Decoder model = Decoder::load(dir, {});
  auto ref = SafetensorsFile::open(dir / "reference.safetensors");
  auto ids_t = ref->tensor("input_ids").view({-1});
  std::vector<int64_t> ids(ids_t.data_ptr<int64_t>(), ids_t.data_ptr<int64_t>() + ids_t.numel());
  FullKvCache full(model.config().num_layers);
  auto r = compute_streaming_perplexity(model, ids, full, 8);  // 5 chunks, the last one partial
  double expected = ref->tensor("nll").item<double>();
  EXPECT_LE(std::abs(r.nll - expected) / expected, 1e-5);
  EXPECT_EQ(r.tokens, static_cast<int64_t>(ids.size()) - 1);
  BudgetedKvCache small(model.config(), parse_policy("h2o:buffer=2,window=4"), 8, 8);
  auto evicted = compute_streaming_perplexity(model, ids, small, 8);
  EXPECT_TRUE(std::isfinite(evicted.nll));
  EXPECT_NE(evicted.nll, r.nll);  // 8 entries per head of 37: the context really shrank
  EXPECT_LE(small.lengths(0).max().item<int64_t>(), 8 + 2);
}

}  // namespace
}  // namespace retain

#include <fstream>

#include "eval/benchmarks/dialogue.h"
#include "model/tokenizer.h"

namespace retain {
namespace {

// The persistent cache of a conversation gives the same answers as re-reading the whole history
// with a fresh cache, in both history modes.
TEST(Dialogue, PersistentCacheEqualsReReadingTheHistory) {
  testing::TempDir dir;
  InitModelOptions init;
  init.arch = "qwen2";
  init.preset = "tiny";
  init.seed = 5;
  init.sets = {"initializer_range=0.3"};  // peaked logits: greedy choices are not near-ties
  init.out = (dir / "model").string();
  init_model(init);
  auto record = [](const std::string& id) {
    return Json({{"id", id},
                 {"context", "The value of alpha is 17. The cat reads the door. The key is beta."},
                 {"multi_turns",
                  {{{"input", "What is alpha?"}, {"answer", "17"}},
                   {{"input", "What is the key?"}, {"answer", {"beta", "Beta"}}},
                   {{"input", "Who reads?"}, {"answer", "the cat"}}}}})
               .dump() +
           "\n";
  };
  write_text_file_atomic(dir / "d.jsonl", record("a") + record("b"));
  for (const std::string history : {"own", "gold"}) {
    DialogueOptions o;
    o.model.model_dir = init.out;
    o.data = (dir / "d.jsonl").string();
    o.history = history;
    o.policies = {"full", "streaming"};
    o.budgets = {20};
    o.chunk = 8;
    o.max_new_tokens = 4;
    o.out = (dir / history).string();
    ASSERT_EQ(run_dialogue_eval(o), 0);
    Json scores = read_json_file(dir / history / "scores.json");
    ASSERT_EQ(scores["results"].size(), 2u);
    for (const char* k : {"em", "f1", "rouge_l", "em_turn1", "f1_turn3", "rouge_l_turn2"})
      EXPECT_TRUE(scores["results"][0]["metrics"].contains(k)) << k;

    // Re-read the history from scratch for record "a" under the full cache.
    Decoder model = Decoder::load(init.out, {});
    auto tok = load_tokenizer(init.out);
    std::ifstream in(dir / history / "predictions.jsonl");
    std::string line;
    Json record_a;
    while (std::getline(in, line)) {
      Json j = Json::parse(line);
      if (j["policy"] == "full" && j["id"] == "a") record_a = j;
    }
    ASSERT_FALSE(record_a.is_null());
    const std::vector<std::string> questions = {"What is alpha?", "What is the key?", "Who reads?"};
    const std::vector<std::string> gold = {"17", "beta", "the cat"};
    auto history_ids =
        tok->encode_prompt("The value of alpha is 17. The cat reads the door. The key is beta.");
    for (size_t t = 0; t < 3; ++t) {
      auto q = tok->encode("\n\nQuestion: " + questions[t] + "\nAnswer:");
      history_ids.insert(history_ids.end(), q.begin(), q.end());
      FullKvCache fresh(model.config().num_layers);
      SamplingOptions sampling;
      sampling.max_new_tokens = 4;
      if (tok->eos_id()) sampling.stop_ids = {*tok->eos_id()};
      c10::InferenceMode guard;
      auto g = generate(model, history_ids, fresh, sampling);
      EXPECT_EQ(tok->decode(g.tokens, true), record_a["turns"][t]["pred"].get<std::string>())
          << history << " turn " << t;
      auto next = history == "own" ? g.tokens : tok->encode(" " + gold[t]);
      history_ids.insert(history_ids.end(), next.begin(), next.end());
    }
  }
}

}  // namespace
}  // namespace retain

namespace retain {
namespace {

TEST(BatchGeneration, PromptsOfDifferentLengthsEqualEachAlone) {
  c10::InferenceMode guard;
  fs::path dir = testing::fixture_dir("hf") / "qwen2_bias_yarn";
  Decoder model = Decoder::load(dir, {});
  std::vector<std::vector<int64_t>> prompts = {
      {5, 9, 33, 71, 2, 400, 8, 8, 13}, {17, 3}, {250, 251, 252, 253, 254}};
  SamplingOptions options;
  options.max_new_tokens = 10;
  options.stop_ids = {prompts[1][0]};  // some row may stop early; the others go on
  // One prefill forward: with chunks, a left-padded row's tokens would fall at other chunk
  // boundaries than alone (and accumulating policies see a different history).
  options.prefill_chunk = 0;
  // Budget 6 evicts at the prompt's end and while decoding; padding must not change what a row
  // keeps. (Not knorm: RoPE keeps a key's norm, so a token that greedy decoding repeats gives keys
  // of mathematically equal norm, and which of them survives is decided by rounding, which differs
  // between a batch's matrix products and one row's. h2o covers the same per-head path.)
  for (const std::string policy : {"full", "h2o:buffer=2,window=2", "dbtrimkv:buffer=2"}) {
    auto gates = probe_gates(model.config(), true);
    PolicySpec p = parse_policy(policy);
    auto batch_cache = make_kv_cache(model.config(), p, 6, 9, 9, gates.get());
    auto batch = generate_batch(model, prompts, *batch_cache, options);
    for (size_t i = 0; i < prompts.size(); ++i) {
      auto alone_cache = make_kv_cache(model.config(), p, 6, 9, 9, gates.get());
      auto alone = generate(model, prompts[i], *alone_cache, options);
      EXPECT_EQ(batch[i].tokens, alone.tokens) << policy << " row " << i;
      EXPECT_EQ(batch[i].finish_reason, alone.finish_reason);
    }
  }
}

// Static decode (fixed buffers, eviction decided by host-side counts; what CUDA graphs replay)
// must decode exactly what eager decode does and leave the same cache, for every policy that
// supports it, across several evictions and with a row that stops early.
TEST(BatchGeneration, StaticDecodeEqualsEager) {
  c10::InferenceMode guard;
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "qwen2_bias_yarn", {});
  const ModelConfig& c = model.config();
  std::vector<std::vector<int64_t>> prompts = {
      {5, 9, 33, 71, 2, 400, 8, 8, 13}, {17, 3}, {250, 251, 252, 253, 254}};
  auto gates = probe_gates(c, true);
  for (const std::string policy :
       {"trimkv:buffer=3", "dbtrimkv:buffer=2", "streaming:buffer=1", "h2o:buffer=2,window=2",
        "snapkv:buffer=0,window=2", "sagekv:buffer=2,window=2,sinks=1", "knorm:buffer=4"}) {
    SCOPED_TRACE(policy);
    PolicySpec p = parse_policy(policy);
    SamplingOptions options;
    options.max_new_tokens = 24;
    options.prefill_chunk = 4;
    std::vector<std::unique_ptr<KvCache>> caches;
    std::vector<std::vector<GenerationResult>> runs;
    for (DecodeMode mode : {DecodeMode::kEager, DecodeMode::kStatic}) {
      options.decode = mode;
      caches.push_back(make_kv_cache(c, p, 6, 4, 9, gates.get()));
      if (runs.empty()) {
        runs.push_back(generate_batch(model, prompts, *caches.back(), options));
        // Row 1 stops at its 5th token; its steps at position -1 must change nothing.
        options.stop_ids = {runs[0][1].tokens.at(4)};
        caches.back() = make_kv_cache(c, p, 6, 4, 9, gates.get());
      }
      runs.push_back(generate_batch(model, prompts, *caches.back(), options));
    }
    const auto& eager = runs[1];
    const auto& fixed = runs[2];
    EXPECT_EQ(eager[0].decode_mode, "eager");
    EXPECT_EQ(fixed[0].decode_mode, "static");
    EXPECT_EQ(eager[1].finish_reason, "stop");
    for (size_t r = 0; r < prompts.size(); ++r) EXPECT_EQ(eager[r].tokens, fixed[r].tokens) << r;
    auto& a = dynamic_cast<BudgetedKvCache&>(*caches[0]);
    auto& b = dynamic_cast<BudgetedKvCache&>(*caches[1]);
    EXPECT_EQ(a.peak_bytes(), b.peak_bytes());
    for (int64_t l = 0; l < c.num_layers; ++l)
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t h = 0; h < c.num_kv_heads; ++h)
          EXPECT_EQ(a.live_positions(l, r, h), b.live_positions(l, r, h))
              << "layer " << l << " row " << r << " head " << h;
  }
  // Policies whose steps need the host every time stay eager.
  auto random_cache = make_kv_cache(c, parse_policy("random:seed=1"), 6, 4, 9, nullptr);
  SamplingOptions options;
  options.max_new_tokens = 3;
  options.decode = DecodeMode::kStatic;
  EXPECT_EQ(generate(model, prompts[0], *random_cache, options).decode_mode, "eager");
  FullKvCache full(c.num_layers);
  EXPECT_EQ(generate(model, prompts[0], full, options).decode_mode, "eager");
}

// A needle in the prompt's last chunk: before the fix, the last chunk's queries (the last one
// gives the first new token) read the whole chunk on top of the budget. Now streaming at a budget
// that excludes the needle leaves the last token the sink and the recent window only.
TEST(BatchGeneration, TheLastChunkIsEvictedBeforeTheFirstTokenIsComputed) {
  c10::InferenceMode guard;
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "llama_gqa4_llama3", {});
  std::vector<int64_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(3 + (i * 37) % 500);
  PolicySpec policy = parse_policy("streaming:sinks=1,buffer=4");
  BudgetedKvCache cache(model.config(), policy, 4, 16);
  SamplingOptions options;
  options.max_new_tokens = 1;
  options.prefill_chunk = 16;  // chunks 0-15, 16-31, 32-38, then token 39 alone
  auto r = generate(model, prompt, cache, options);
  EXPECT_EQ(r.max_attended_entries, 5);  // budget 4 + the token itself
  for (int64_t l = 0; l < model.config().num_layers; ++l)
    for (int64_t h = 0; h < model.config().num_kv_heads; ++h)
      EXPECT_EQ(cache.live_positions(l, 0, h), (std::vector<int64_t>{0, 36, 37, 38, 39}));
  // The full cache records everything it read: the prompt and every token decoded but the last.
  FullKvCache full(model.config().num_layers);
  options.max_new_tokens = 3;
  auto f = generate(model, prompt, full, options);
  EXPECT_EQ(f.max_attended_entries, 42);
  EXPECT_EQ(f.max_attended_total, 42 * model.config().num_layers * model.config().num_kv_heads);
}

// Streaming ranks by position alone, so what it keeps cannot depend on the chunk size (the other
// policies rank by values that depend on what earlier chunks read, see "The bound" in docs/evaluation.md).
TEST(BatchGeneration, StreamingKeepsTheSameEntriesWhateverTheChunk) {
  c10::InferenceMode guard;
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "llama_gqa4_llama3", {});
  std::vector<int64_t> prompt;
  for (int i = 0; i < 45; ++i) prompt.push_back(3 + (i * 37) % 500);
  std::vector<std::vector<int64_t>> first;
  for (int64_t chunk : {1, 7, 64, 0}) {
    BudgetedKvCache cache(model.config(), parse_policy("streaming:sinks=2,buffer=3"), 6,
                          chunk > 0 ? chunk : 64);
    SamplingOptions options;
    options.max_new_tokens = 1;
    options.prefill_chunk = chunk;
    generate(model, prompt, cache, options);
    std::vector<std::vector<int64_t>> kept;
    for (int64_t l = 0; l < model.config().num_layers; ++l)
      for (int64_t h = 0; h < model.config().num_kv_heads; ++h)
        kept.push_back(cache.live_positions(l, 0, h));
    EXPECT_EQ(kept.front(), (std::vector<int64_t>{0, 1, 40, 41, 42, 43, 44})) << chunk;
    if (first.empty()) first = kept;
    EXPECT_EQ(kept, first) << "chunk " << chunk;
  }
}

// --question-mode keep (kvpress's semantics): the context alone is compressed to the budget once,
// then the question and every generated token stay on top, never evicted.
TEST(BatchGeneration, KeepModeCompressesTheContextOnceAndKeepsTheQuestion) {
  c10::InferenceMode guard;
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "llama_gqa4_llama3", {});
  const ModelConfig& c = model.config();
  auto gates = probe_gates(c, true);
  std::vector<int64_t> context, question = {7, 8, 9, 10, 11, 12};
  for (int i = 0; i < 40; ++i) context.push_back(3 + (i * 37) % 500);
  for (const std::string spec : {"snapkv:window=4,buffer=0", "streaming:buffer=0", "dbtrimkv"}) {
    SCOPED_TRACE(spec);
    PolicySpec policy = parse_policy(spec);
    BudgetedKvCache cache(c, policy, 8, 16, gates.get());
    prefill(model, context, cache, 0, 16);
    cache.compress_context();
    int64_t total = 0;
    std::vector<std::vector<int64_t>> kept;
    for (int64_t l = 0; l < c.num_layers; ++l)
      for (int64_t h = 0; h < c.num_kv_heads; ++h) {
        kept.push_back(cache.live_positions(l, 0, h));
        total += static_cast<int64_t>(kept.back().size());
        if (!policy.global()) EXPECT_EQ(kept.back().size(), 8u);
      }
    EXPECT_EQ(total, c.num_layers * c.num_kv_heads * 8);
    SamplingOptions options;
    options.max_new_tokens = 5;
    options.prefill_chunk = 4;
    options.start_position = 40;
    auto r = generate(model, question, cache, options);
    ASSERT_EQ(r.tokens.size(), 5u);
    // The question (40-45) and the decoded tokens but the last (46-49) on top of the context.
    size_t i = 0;
    for (int64_t l = 0; l < c.num_layers; ++l)
      for (int64_t h = 0; h < c.num_kv_heads; ++h, ++i) {
        auto want = kept[i];
        for (int64_t p = 40; p < 50; ++p) want.push_back(p);
        EXPECT_EQ(cache.live_positions(l, 0, h), want) << "layer " << l << " head " << h;
      }
    EXPECT_EQ(r.max_attended_total, c.num_layers * c.num_kv_heads * (8 + 10));
    if (!policy.global()) EXPECT_EQ(r.max_attended_entries, 8 + 10);
  }
}

TEST(BatchGeneration, StopStringsEndGeneration) {
  c10::InferenceMode guard;
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "llama_tied_mha", {});
  SamplingOptions options;
  options.max_new_tokens = 20;
  FullKvCache cache(model.config().num_layers);
  auto free_run = generate(model, {3, 4, 5}, cache, options);
  ASSERT_EQ(free_run.tokens.size(), 20u);
  // Stop once the "text" (ids joined) contains the third generated id.
  options.detokenize = [](const std::vector<int64_t>& ids) {
    std::string s;
    for (auto id : ids) s += "<" + std::to_string(id) + ">";
    return s;
  };
  options.stop_strings = {"<" + std::to_string(free_run.tokens[2]) + ">"};
  FullKvCache again(model.config().num_layers);
  auto stopped = generate(model, {3, 4, 5}, again, options);
  EXPECT_EQ(stopped.finish_reason, "stop");
  EXPECT_LE(stopped.tokens.size(), 3u);
  EXPECT_EQ(cut_at_stop("answer\nmore", {"\n", "Question:"}), "answer");
  EXPECT_EQ(cut_at_stop("no stop", {"\n"}), "no stop");
}

}  // namespace
}  // namespace retain

namespace retain {
namespace {

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
                        "threshold applies to trimkv and dbtrimkv");
  EXPECT_ERROR_CONTAINS(parse_policy("dbtrimkv:threshold=2"), "threshold must be in (0, 1)");
}

}  // namespace
}  // namespace retain
