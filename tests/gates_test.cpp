// Retention gates, gated attention through the model's hook, and the losses.
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/autograd.h>

#include "gates/gate_bank.h"
#include "gates/gated_attention.h"
#include "gates/losses.h"
#include "kernels/retention_attention.h"
#include "model/decoder.h"
#include "test_util.h"

namespace retain {
namespace {

fs::path qwen3_dir() { return testing::fixture_dir("hf") / "qwen3_qknorm"; }

struct Packed {
  at::Tensor ids, positions, segments, mask;
};

// Two rows of 24 tokens: row 0 packs documents of 10 and 14 tokens, row 1 is one document of 20
// tokens followed by 4 padding tokens.
Packed packed_batch(int64_t vocab) {
  Packed p;
  p.ids = at::randint(3, vocab, {2, 24}, at::kLong);
  auto seg = at::zeros({2, 24}, at::kLong);
  auto pos = at::zeros({2, 24}, at::kLong);
  for (int64_t i = 0; i < 24; ++i) {
    seg[0][i] = i < 10 ? 0 : 1;
    pos[0][i] = i < 10 ? i : i - 10;
    seg[1][i] = i < 20 ? 0 : -1;
    pos[1][i] = i < 20 ? i : 0;
  }
  p.segments = seg;
  p.positions = pos;
  p.mask = seg >= 0;
  return p;
}

// Without gates the hook runs SDPA (is_causal for whole-document rows, a block-diagonal mask for
// packed documents and padding) where the retention path with log beta 0 ran before: the same
// outputs and the same gradients, GQA or not.
TEST(Gates, PlainAttentionEqualsTheRetentionReferenceWithZeroBias) {
  Packed packed = packed_batch(50);
  auto whole = at::zeros({2, 24}, at::kLong);
  auto arange = at::arange(24, at::kLong).expand({2, 24}).contiguous();
  for (const int64_t group : {1, 4}) {
    for (const bool is_packed : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "group " << group << (is_packed ? " packed" : " whole"));
      const at::Tensor segments = is_packed ? packed.segments : whole;
      const at::Tensor positions = is_packed ? packed.positions : arange;
      auto q = at::randn({2, 2 * group, 24, 16}, at::kDouble).requires_grad_(true);
      auto k = at::randn({2, 2, 24, 16}, at::kDouble).requires_grad_(true);
      auto v = at::randn({2, 2, 24, 16}, at::kDouble).requires_grad_(true);
      auto hidden = at::zeros({2, 24, 8}, at::kDouble);
      GatedAttentionHook plain(nullptr, segments);
      auto out = plain.attend({0, hidden, q, k, v, positions, q});
      auto reference = retention_attention_reference(q, k, v, at::zeros({2, 2, 24}, at::kFloat),
                                                     positions, segments);
      EXPECT_LT((out - reference).abs().max().item<double>(), 1e-10);  // padding queries: 0
      auto weights = at::randn_like(out);
      auto grads = torch::autograd::grad({(out * weights).sum()}, {q, k, v});
      auto reference_grads = torch::autograd::grad({(reference * weights).sum()}, {q, k, v});
      for (size_t i = 0; i < 3; ++i)
        EXPECT_LT((grads[i] - reference_grads[i]).abs().max().item<double>(), 1e-10) << i;
    }
  }
}

TEST(Gates, BetaOneReproducesTheBaseModel) {
  Decoder model = Decoder::load(qwen3_dir(), {});
  GateConfig config;
  config.bias_init = 30.0;  // beta = sigmoid(30) = 1 - 9e-14
  GateBank gates(config, model.config(), at::kCPU, 1);
  Packed p = packed_batch(model.config().vocab_size);
  at::NoGradGuard no_grad;
  GatedAttentionHook student(&gates, p.segments), plain(nullptr, p.segments);
  auto gated =
      model.logits(model.forward_hidden(p.ids, p.positions, ForwardContext{nullptr, &student}));
  auto base =
      model.logits(model.forward_hidden(p.ids, p.positions, ForwardContext{nullptr, &plain}));
  EXPECT_LE((gated - base).abs().max().item<double>(), 1e-5);
  // Each packed document equals running it alone through the ordinary (cache-free) model.
  auto doc1 = p.ids[0].narrow(0, 10, 14).view({1, 14});
  auto alone = model.forward(doc1, at::arange(14).view({1, 14}), nullptr);
  EXPECT_LE((base[0].narrow(0, 10, 14) - alone[0]).abs().max().item<double>(), 1e-4);
  EXPECT_EQ(student.log_betas().size(), static_cast<size_t>(model.config().num_layers));
}

TEST(Gates, TiedProjectionIsOneParameterWhoseGradientSumsAllLayers) {
  Decoder model = Decoder::load(qwen3_dir(), {});
  GateConfig config;
  config.arch = GateArch::kMlp3;
  config.width = 16;
  GateBank tied(config, model.config(), at::kCPU, 3);
  const int64_t layers = model.config().num_layers;
  int tied_count = 0;
  for (const auto& [name, p] : tied.named_parameters()) tied_count += name.rfind("tied.", 0) == 0;
  EXPECT_EQ(tied_count, 2);
  EXPECT_EQ(tied.named_parameters().size(), static_cast<size_t>(4 * layers + 2));

  auto x = at::randn({1, 5, model.config().hidden_size});
  at::Tensor tied_w;
  for (const auto& [name, p] : tied.named_parameters())
    if (name == "tied.gate.linear3.weight") tied_w = p;
  std::vector<at::Tensor> per_layer;
  for (int64_t l = 0; l < layers; ++l) {
    tied_w.mutable_grad() = at::Tensor();
    tied.log_beta(l, x).sum().backward();
    per_layer.push_back(tied_w.grad().clone());
  }
  tied_w.mutable_grad() = at::Tensor();
  at::Tensor total = tied.log_beta(0, x).sum();
  for (int64_t l = 1; l < layers; ++l) total = total + tied.log_beta(l, x).sum();
  total.backward();
  EXPECT_TRUE(at::allclose(tied_w.grad(), at::stack(per_layer).sum(0), 1e-6, 1e-8));

  config.tie_projection = false;
  config.arch = GateArch::kMlp2;
  GateBank untied(config, model.config(), at::kCPU, 3);
  EXPECT_EQ(untied.named_parameters().size(), static_cast<size_t>(4 * layers));
  EXPECT_EQ(untied.named_parameters()[2].first, "layers.0.gate.linear2.weight");
}

TEST(Gates, InitialBetaIsNearOne) {
  Decoder model = Decoder::load(qwen3_dir(), {});
  GateBank gates(GateConfig{}, model.config(), at::kCPU, 0);
  auto lb = gates.log_beta(1, at::randn({2, 7, model.config().hidden_size}));
  EXPECT_EQ(lb.sizes(), at::IntArrayRef({2, model.config().num_kv_heads, 7}));
  EXPECT_LT(lb.abs().max().item<double>(), 1e-6);  // log sigmoid(18) = -1.5e-8
}

// The capacity loss against the formula written out with loops.
TEST(Losses, CapacityLocalAndGlobalMatchTheFormula) {
  Packed p = packed_batch(100);
  const int64_t layers = 3, heads = 2;
  std::vector<at::Tensor> lbs;
  for (int64_t l = 0; l < layers; ++l) lbs.push_back(-0.3 * at::rand({2, heads, 24}, at::kDouble));
  const double m = 4;
  // S by definition.
  auto S = at::zeros({2, layers, heads, 24}, at::kDouble);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t l = 0; l < layers; ++l)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t t = 0; t < 24; ++t)
          for (int64_t i = 0; i <= t; ++i)
            if (p.segments[b][t].item<int64_t>() >= 0 &&
                p.segments[b][i].item<int64_t>() == p.segments[b][t].item<int64_t>())
              S[b][l][h][t] +=
                  std::exp((p.positions[b][t].item<int64_t>() - p.positions[b][i].item<int64_t>()) *
                           lbs[l][b][h][i].item<double>());
  double local_sum = 0, global_sum = 0;
  int64_t local_n = 0, global_n = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 24; ++t) {
      if (p.segments[b][t].item<int64_t>() < 0) continue;
      double pos = static_cast<double>(p.positions[b][t].item<int64_t>());
      double total = 0;
      for (int64_t l = 0; l < layers; ++l)
        for (int64_t h = 0; h < heads; ++h) {
          double s = S[b][l][h][t].item<double>();
          total += s;
          double c = std::max(0.0, (s - m) / std::max(pos - m, 1.0));
          local_sum += c;
          local_n += c > 0;
        }
      double lh = layers * heads;
      double c = std::max(0.0, (total - m * lh) / std::max((pos - m) * lh, 1.0));
      global_sum += c;
      global_n += c > 0;
    }
  ASSERT_GT(local_n, 0);
  ASSERT_GT(global_n, 0);
  EXPECT_NEAR(capacity_loss(lbs, p.positions, p.segments, m, CapacityMode::kLocal).item<double>(),
              local_sum / local_n, 1e-10);
  EXPECT_NEAR(capacity_loss(lbs, p.positions, p.segments, m, CapacityMode::kGlobal).item<double>(),
              global_sum / global_n, 1e-10);
  // Far below budget: no positive entry, loss 0.
  EXPECT_EQ(capacity_loss(lbs, p.positions, p.segments, 1000, CapacityMode::kLocal).item<double>(),
            0.0);
}

TEST(Losses, KlIsZeroWhenStudentEqualsTeacherAndNtpIsTheModelLoss) {
  Decoder model = Decoder::load(qwen3_dir(), {});
  Packed p = packed_batch(model.config().vocab_size);
  GatedAttentionHook plain(nullptr, p.segments);
  auto hidden = model.forward_hidden(p.ids, p.positions, ForwardContext{nullptr, &plain});
  BaseLossTerms terms = BaseLossTerms::parse({"fwkl", "rvkl", "ntp"}, "test");
  auto sums = base_loss_sums(model, hidden, hidden, p.ids, p.segments, p.mask, terms, 7);
  EXPECT_NEAR(sums.fwkl.item<double>(), 0.0, 1e-6);
  EXPECT_NEAR(sums.rvkl.item<double>(), 0.0, 1e-6);
  EXPECT_EQ(sums.tokens, 44 - 3);  // 24 + 20 real tokens, no target after a document's last
  // ntp equals the cross-entropy of each document computed directly.
  auto logp = at::log_softmax(model.logits(hidden), -1);
  double expected = 0;
  for (auto [row, begin, len] : {std::tuple{0, 0, 10}, {0, 10, 14}, {1, 0, 20}})
    for (int64_t i = begin; i < begin + len - 1; ++i)
      expected -= logp[row][i][p.ids[row][i + 1].item<int64_t>()].item<double>();
  EXPECT_NEAR(sums.ntp.item<double>(), expected, 1e-3);
}

// Every base term scores the predictions OF labelled tokens: with labels on tokens 3-5 of a
// document (an answer), the positions 2-4 that predict them, not 3-5 (which predict the tokens
// after them), and never a prediction across a document's end or of padding.
TEST(Losses, TargetsAreThePredictionsOfLabelledTokens) {
  Packed p = packed_batch(64);
  auto answer = at::zeros({2, 24}, at::kBool);
  answer[0].narrow(0, 3, 3).fill_(true);   // document 0 of row 0
  answer[0].narrow(0, 10, 2).fill_(true);  // the first two tokens of document 1: 10 has no target
  answer[1].narrow(0, 19, 5).fill_(true);  // row 1's last token and its padding
  auto expected = at::zeros({2, 24}, at::kBool);
  expected[0].narrow(0, 2, 3).fill_(true);
  expected[0][10] = true;
  expected[1][18] = true;
  EXPECT_TRUE(at::equal(loss_targets(p.segments, answer), expected));
  EXPECT_EQ(count_loss_targets(p.segments, answer), 5);

  // The KL terms see the same positions: a student that differs from its teacher only at a
  // position that predicts an unlabelled token adds nothing.
  Decoder model = Decoder::load(qwen3_dir(), {});
  Packed q = packed_batch(model.config().vocab_size);
  GatedAttentionHook plain(nullptr, q.segments);
  auto teacher = model.forward_hidden(q.ids, q.positions, ForwardContext{nullptr, &plain});
  auto student = teacher.clone();
  student[0][5] += 1.0;  // predicts token 6, unlabelled
  BaseLossTerms terms = BaseLossTerms::parse({"fwkl"}, "test");
  auto sums = base_loss_sums(model, student, teacher, q.ids, q.segments, answer, terms, 7);
  EXPECT_NEAR(sums.fwkl.item<double>(), 0.0, 1e-6);
  student[0][4] += 1.0;  // predicts token 5, labelled
  sums = base_loss_sums(model, student, teacher, q.ids, q.segments, answer, terms, 7);
  EXPECT_GT(sums.fwkl.item<double>(), 1e-4);
  EXPECT_EQ(sums.tokens, 5);
}

TEST(Gates, CheckpointedLayersGiveTheSameGradients) {
  Decoder model = Decoder::load(qwen3_dir(), {});
  GateConfig config;
  config.width = 16;
  config.bias_init = 2.0;  // beta well below 1 so the gates matter
  Packed p = packed_batch(model.config().vocab_size);
  std::vector<at::Tensor> grads[2];
  for (int pass = 0; pass < 2; ++pass) {
    GateBank gates(config, model.config(), at::kCPU, 5);
    GatedAttentionHook hook(&gates, p.segments);
    ForwardContext context{nullptr, &hook, /*checkpoint_layers=*/pass == 1};
    auto hidden = model.forward_hidden(p.ids, p.positions, context);
    (model.logits(hidden).pow(2).mean() +
     capacity_loss(hook.log_betas(), p.positions, p.segments, 3, CapacityMode::kGlobal))
        .backward();
    for (const auto& t : gates.parameters()) grads[pass].push_back(t.grad().clone());
  }
  for (size_t i = 0; i < grads[0].size(); ++i)
    EXPECT_TRUE(at::allclose(grads[0][i], grads[1][i], 1e-5, 1e-7)) << i;
}

}  // namespace
}  // namespace retain
