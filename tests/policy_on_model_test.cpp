// Every policy on a real (tiny) model: a large budget changes nothing, a small one holds after
// every step, and every generating query reads at most the budget (docs/evaluation.md, "The
// bound") whatever the chunk and buffer.
#include <c10/core/InferenceMode.h>

#include <algorithm>

#include "eval/budgeted_cache.h"
#include "eviction_fixtures.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "test_util.h"

namespace retain {
namespace {

using namespace eviction_testing;

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

}  // namespace
}  // namespace retain
