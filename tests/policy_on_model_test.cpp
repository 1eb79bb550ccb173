// Every policy on a real (tiny) model: a large budget changes nothing, a small one holds after
// every step, and every generating query reads at most the budget (docs/evaluation.md, "The
// bound") whatever the chunk and buffer.
#include <c10/core/InferenceMode.h>

#include <algorithm>

#include "eval/budgeted_cache.h"
#include "eviction_fixtures.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "model/vision/multimodal_prompt.h"
#include "test_util.h"

namespace retain {
namespace {

using namespace eviction_testing;

// The per-head budget of each layer: M, or its pyramid share (eval/budget_allocation.h).
std::vector<int64_t> layer_budgets(const PolicySpec& policy, int64_t budget, int64_t layers) {
  if (policy.allocation.kind == BudgetAllocation::Kind::kPyramid)
    return pyramid_layer_budgets(budget, layers, policy.allocation.pyramid_beta);
  return std::vector<int64_t>(static_cast<size_t>(layers), budget);
}

// What a layer's heads hold against the budget: each head within its layer's share plus `slack`,
// or under alloc=adakv the layer's total within Hk (M + slack).
void expect_layer_within(const PolicySpec& policy, const at::Tensor& lengths, int64_t share,
                         int64_t slack, const std::string& what) {
  if (policy.global()) return;  // dbtrimkv: the total alone is bounded
  if (policy.allocation.kind == BudgetAllocation::Kind::kAdaKV)
    EXPECT_LE(lengths.sum().item<int64_t>(), lengths.size(1) * (share + slack)) << what;
  else
    EXPECT_LE(lengths.max().item<int64_t>(), share + slack) << what;
}

// The learned modules of a policy on `c`: the probe gates, and a random scorer of its kind for
// locret / kvzap (random weights still rank, which is all these tests need).
struct Learned {
  std::unique_ptr<GateBank> gates;
  std::unique_ptr<ScorerBank> scorer;
  LearnedModules modules() const { return {gates.get(), scorer.get()}; }
};
Learned learned_for(const PolicySpec& policy, const ModelConfig& c) {
  Learned l;
  l.gates = probe_gates(c);
  if (policy.needs_scorer()) {
    ScorerConfig config;
    config.kind = parse_scorer_kind(policy.name(), "test");
    config.width = 8;
    config.init_std = 0.5;
    l.scorer = std::make_unique<ScorerBank>(config, c, at::kCPU, 7);
  }
  return l;
}

class PolicyOnModel : public ::testing::TestWithParam<std::string> {};

// On a real model: a budget that never triggers eviction gives exactly the full cache's tokens,
// and a small budget holds after every step.
TEST_P(PolicyOnModel, LargeBudgetEqualsFullAndSmallBudgetHolds) {
  c10::InferenceMode guard;
  fs::path dir = testing::fixture_dir("hf") / "qwen3_qknorm";
  Decoder model = Decoder::load(dir, {});
  std::vector<int64_t> prompt;
  for (int i = 0; i < 60; ++i) prompt.push_back(3 + (i * 37) % 500);
  SamplingOptions options;
  options.max_new_tokens = 12;
  options.prefill_chunk = 16;
  FullKvCache full(model.config().num_layers);
  auto expected = generate(model, prompt, full, options).tokens;

  PolicySpec policy = parse_policy(GetParam());
  const Learned learned = learned_for(policy, model.config());
  // Large enough that pyramid's last layer (M / 20) holds the 72 tokens too.
  BudgetedKvCache large(model.config(), policy, 2000, 16, learned.modules());
  EXPECT_EQ(generate(model, prompt, large, options).tokens, expected) << GetParam();

  policy.buffer = 4;
  BudgetedKvCache small(model.config(), policy, 10, 16, learned.modules());
  auto tokens = generate(model, prompt, small, options).tokens;
  EXPECT_EQ(tokens.size(), 12u);
  int64_t total = 0;
  for (int64_t l = 0; l < model.config().num_layers; ++l)
    total += small.lengths(l).sum().item<int64_t>();
  const int64_t heads = model.config().num_layers * model.config().num_kv_heads;
  EXPECT_LE(total, heads * (10 + 4)) << GetParam();
  const auto shares = layer_budgets(policy, 10, model.config().num_layers);
  for (int64_t l = 0; l < model.config().num_layers; ++l)
    expect_layer_within(policy, small.lengths(l), shares[l], 4, GetParam());
  // One score per token (summed over the layer's heads): every head keeps the same tokens.
  if (policy.name() == "importance" || policy.name() == "tova") {
    EXPECT_EQ(small.live_positions(0, 0, 0), small.live_positions(0, 0, 1));
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, PolicyOnModel,
                         ::testing::Values("streaming", "h2o", "snapkv", "sagekv", "tova",
                                           "expected_attention", "random", "importance", "knorm",
                                           "trimkv", "dbtrimkv", "trimkv:horizon=8",
                                           "snapkv:alloc=pyramid", "knorm:alloc=adakv",
                                           "expected_attention:alloc=adakv",
                                           "trimkv:alloc=pyramid,pyramid_beta=4", "locret", "kvzap",
                                           "locret:window=3,alloc=adakv"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), ':', '_');
                           std::replace(n.begin(), n.end(), '=', '_');
                           std::replace(n.begin(), n.end(), ',', '_');
                           return n;
                         });

// The bound (docs/evaluation.md), for every policy and chunk size: the prompt's last token (whose
// logits give the first new token) reads at most budget + 1 entries per KV head, its own included;
// every decoded token at most budget + buffer + 1; dbtrimkv the same in total over layers and
// heads, pyramid per head of its layer's share, adakv in total over each layer's heads.
TEST_P(PolicyOnModel, EveryGeneratingQueryReadsAtMostTheBudget) {
  c10::InferenceMode guard;
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "qwen3_qknorm", {});
  const ModelConfig& c = model.config();
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
        const Learned learned = learned_for(policy, c);
        BudgetedKvCache cache(c, policy, budget, chunk > 0 ? chunk : 64, learned.modules());
        auto r = generate(model, prompt, cache, options);
        // One new token: only the prompt's last token generated; more: decoded tokens too.
        const int64_t slack = new_tokens == 1 ? 0 : buffer;
        const std::string what = GetParam() + " chunk " + std::to_string(chunk) + " buffer " +
                                 std::to_string(buffer) + " new " + std::to_string(new_tokens);
        ASSERT_GT(r.max_attended_entries, 0) << what;
        EXPECT_LE(r.max_attended_total, heads * (budget + slack + 1)) << what;
        const auto shares = layer_budgets(policy, budget, c.num_layers);
        if (policy.allocation.kind == BudgetAllocation::Kind::kUniform && !policy.global()) {
          EXPECT_LE(r.max_attended_entries, budget + slack + 1) << what;
        }
        if (policy.allocation.kind == BudgetAllocation::Kind::kPyramid) {
          EXPECT_LE(r.max_attended_entries, shares.front() + slack + 1) << what;
        }
        // After generation every layer is back within its budget (plus the buffer).
        for (int64_t l = 0; l < c.num_layers; ++l)
          expect_layer_within(policy, cache.lengths(l), shares[l], buffer + 1, what);
      }
    }
  }
}

// Image tokens compete for the same cache as text tokens: with two images in the prompt of a
// vision-language model (Qwen3-VL, DeepStack included), every generating query reads at most the
// budget, and a budget that never evicts gives exactly the full cache's tokens.
TEST_P(PolicyOnModel, ImagePromptsKeepTheBound) {
  c10::InferenceMode guard;
  const fs::path vl = testing::fixture_dir("hf_vl");
  if (fs::exists(vl / ".skipped") && !fs::exists(vl / ".complete"))
    GTEST_SKIP() << "VL fixtures not built here (tests/fixtures/make_hf_vl_models.py)";
  Decoder model = Decoder::load(vl / "qwen3_vl", {});
  const ModelConfig& c = model.config();
  const int64_t image = c.multimodal->image_token_id;
  // <|im_start|>user\n <image> text <image> text <|im_end|>: ids from the fixture's vocabulary.
  std::vector<int64_t> ids = {401, 84,    82,  267, 198, 403, image, 404, 56,  270, 324, 257,
                              403, image, 404, 392, 69,  84,  75,    402, 198, 401, 312, 198};
  auto prompt = std::make_shared<MultimodalPrompt>(prepare_multimodal_prompt(
      model, ids,
      load_images(vl / "qwen3_vl",
                  {(vl / "images" / "tall.jpg").string(), (vl / "images" / "wide.png").string()})));
  ASSERT_EQ(prompt->image_tokens, 16);
  RowOptions row;
  row.multimodal = prompt;
  PolicySpec policy = parse_policy(GetParam());
  const Learned learned = learned_for(policy, c);
  SamplingOptions options;
  options.max_new_tokens = 6;
  options.prefill_chunk = 9;  // chunks cut through the images
  FullKvCache full(c.num_layers);
  auto expected = generate_batch(model, {prompt->ids}, full, options, {row})[0].tokens;
  BudgetedKvCache large(c, policy, 2000, 9, learned.modules());
  EXPECT_EQ(generate_batch(model, {prompt->ids}, large, options, {row})[0].tokens, expected)
      << GetParam();
  const int64_t budget = 8, heads = c.num_layers * c.num_kv_heads;
  policy.buffer = 0;  // decoded tokens are cut back at once: the bound is budget + 1
  BudgetedKvCache small(c, policy, budget, 9, learned.modules());
  auto r = generate_batch(model, {prompt->ids}, small, options, {row})[0];
  EXPECT_EQ(r.tokens.size(), 6u);
  EXPECT_LE(r.max_attended_total, heads * (budget + 1)) << GetParam();
  const auto shares = layer_budgets(policy, budget, c.num_layers);
  if (policy.allocation.kind == BudgetAllocation::Kind::kUniform && !policy.global()) {
    EXPECT_LE(r.max_attended_entries, budget + 1) << GetParam();
  }
  for (int64_t l = 0; l < c.num_layers; ++l)
    expect_layer_within(policy, small.lengths(l), shares[l], 1, GetParam());
}

}  // namespace
}  // namespace retain
