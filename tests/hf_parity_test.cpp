// The decoder against HF transformers on tiny random models of every family (fixtures made by
// tests/fixtures/make_hf_models.py): prefill logits, cached decode, greedy generation, loss,
// sharded loading and padded batches.
#include <c10/core/InferenceMode.h>

#include "core/json.h"
#include "core/safetensors.h"
#include "eval/perplexity.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "test_util.h"

namespace retain {
namespace {

// fp32 logits may differ from transformers by accumulated rounding only.
constexpr double kLogitTolerance = 1e-4;
constexpr double kNllRelativeTolerance = 1e-5;

fs::path hf_dir() { return testing::fixture_dir("hf"); }

class HfParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    guard_ = std::make_unique<c10::InferenceMode>();
    model_ = std::make_unique<Decoder>(Decoder::load(hf_dir() / GetParam(), {}));
    ref_ = SafetensorsFile::open(hf_dir() / GetParam() / "reference.safetensors");
  }
  at::Tensor ref(const std::string& name) const { return ref_->tensor(name).clone(); }
  at::Tensor positions(int64_t t) const { return at::arange(t, at::kLong).view({1, t}); }

  std::unique_ptr<c10::InferenceMode> guard_;
  std::unique_ptr<Decoder> model_;
  std::shared_ptr<SafetensorsFile> ref_;
};

TEST_P(HfParity, PrefillLogits) {
  auto ids = ref("input_ids");
  auto logits = model_->forward(ids, positions(ids.size(1)), nullptr);
  double diff = (logits - ref("logits")).abs().max().item<double>();
  EXPECT_LE(diff, kLogitTolerance) << GetParam();
}

TEST_P(HfParity, StepByStepDecodeEqualsPrefill) {
  if (model_->config().rope.type == RopeType::kDynamic)
    GTEST_SKIP() << "dynamic NTK rescales RoPE with the sequence length, so cached keys are "
                    "rotated differently than in one prefill (transformers behaves the same)";
  auto ids = ref("input_ids");
  const int64_t t = ids.size(1), split = 11;  // a prefill chunk, then one token at a time
  auto full = model_->forward(ids, positions(t), nullptr);
  FullKvCache cache(model_->config().num_layers);
  auto first = model_->forward(ids.narrow(1, 0, split), positions(split), &cache);
  double diff = (first - full.narrow(1, 0, split)).abs().max().item<double>();
  for (int64_t i = split; i < t; ++i) {
    auto step = model_->forward(ids.narrow(1, i, 1), at::full({1, 1}, i, at::kLong), &cache);
    diff = std::max(diff, (step - full.narrow(1, i, 1)).abs().max().item<double>());
  }
  EXPECT_LE(diff, kLogitTolerance) << GetParam();
  EXPECT_EQ(cache.length(0), t);
}

TEST_P(HfParity, GreedyGenerationIsIdentical) {
  auto prompt_tensor = ref("greedy_prompt").view({-1});
  std::vector<int64_t> prompt(prompt_tensor.data_ptr<int64_t>(),
                              prompt_tensor.data_ptr<int64_t>() + prompt_tensor.numel());
  auto expected = ref("greedy_ids");
  SamplingOptions options;
  options.max_new_tokens = expected.numel();
  FullKvCache cache(model_->config().num_layers);
  auto result = generate(*model_, prompt, cache, options);
  ASSERT_EQ(static_cast<int64_t>(result.tokens.size()), expected.numel());
  EXPECT_TRUE(at::equal(at::tensor(result.tokens, at::kLong), expected))
      << GetParam() << ": got " << at::tensor(result.tokens) << " expected " << expected;
}

TEST_P(HfParity, LossEqualsTransformers) {
  auto ids = ref("input_ids").view({-1});
  std::vector<int64_t> v(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  PerplexityOptions options;
  options.logit_block = 7;  // several LM-head blocks, one of them partial
  auto r = compute_perplexity(*model_, v, options);
  double expected = ref("nll").item<double>();
  EXPECT_LE(std::abs(r.nll - expected) / expected, kNllRelativeTolerance)
      << GetParam() << ": " << r.nll << " vs " << expected;
  EXPECT_EQ(r.tokens, ids.numel() - 1);
}

TEST_P(HfParity, ShardedCheckpointGivesIdenticalLogits) {
  Decoder sharded = Decoder::load(hf_dir() / (GetParam() + "-sharded"), {});
  auto ids = ref("input_ids");
  EXPECT_TRUE(at::equal(sharded.forward(ids, positions(ids.size(1)), nullptr),
                        model_->forward(ids, positions(ids.size(1)), nullptr)));
}

TEST_P(HfParity, PaddedBatchMatchesSingleSequences) {
  if (model_->config().rope.type == RopeType::kDynamic)
    GTEST_SKIP() << "dynamic NTK picks frequencies from the batch's longest position, so a "
                    "sequence's logits depend on its batch (transformers behaves the same)";
  auto ids = ref("input_ids");
  const int64_t t = ids.size(1), short_len = 20;
  // Row 0: the whole sequence; row 1: its first 20 tokens, left-padded.
  auto batch = at::zeros({2, t}, at::kLong);
  batch[0] = ids[0];
  batch[1].narrow(0, t - short_len, short_len).copy_(ids[0].narrow(0, 0, short_len));
  auto mask = at::ones({2, t}, at::kLong);
  mask[1].narrow(0, 0, t - short_len).zero_();
  auto logits = model_->forward(batch, positions_from_attention_mask(mask), nullptr);
  auto alone = model_->forward(ids.narrow(1, 0, short_len), positions(short_len), nullptr);
  EXPECT_LE((logits[0] - ref("logits")[0]).abs().max().item<double>(), kLogitTolerance);
  EXPECT_LE((logits[1].narrow(0, t - short_len, short_len) - alone[0]).abs().max().item<double>(),
            1e-5);
  EXPECT_FALSE(logits.isnan().any().item<bool>());  // padding rows stay finite
}

INSTANTIATE_TEST_SUITE_P(Families, HfParity, ::testing::ValuesIn(testing::hf_fixture_cases()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace retain
