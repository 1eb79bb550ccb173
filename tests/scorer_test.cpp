// The learned scorers' foundation (gates/scorer_bank.h, gates/future_attention.h): the blockwise
// future attention equals its definition written out in loops, the losses their formulas on
// hand-made numbers, the bank's shapes, names and loading, and a scorer fitted to a real tiny
// model's targets lowers its loss.
#include <ATen/core/grad_mode.h>
#include <torch/optim/adam.h>

#include <cmath>

#include "gates/future_attention.h"
#include "gates/gated_attention.h"
#include "gates/scorer_bank.h"
#include "model/decoder.h"
#include "test_util.h"

namespace retain {
namespace {

// Row 0: documents of 5 and 8 tokens; row 1: one of 10 tokens, then 3 padding.
at::Tensor two_rows_segments() {
  auto seg = at::zeros({2, 13}, at::kLong);
  for (int64_t i = 0; i < 13; ++i) {
    seg[0][i] = i < 5 ? 0 : 1;
    seg[1][i] = i < 10 ? 0 : -1;
  }
  return seg;
}

// The definition in loops, in double.
std::vector<double> future_by_loops(const at::Tensor& q, const at::Tensor& k, const at::Tensor& seg,
                                    int64_t b, int64_t kv_head) {
  const int64_t h = q.size(1), t = q.size(2), d = q.size(3), group = h / k.size(1);
  auto qd = q.to(at::kDouble).contiguous(), kd = k.to(at::kDouble).contiguous();
  auto qa = qd.accessor<double, 4>(), ka = kd.accessor<double, 4>();
  auto sa = seg.accessor<int64_t, 2>();
  std::vector<double> out(static_cast<size_t>(t), 0.0);
  for (int64_t g = 0; g < group; ++g) {
    const int64_t head = kv_head * group + g;
    std::vector<double> per_key(static_cast<size_t>(t), 0.0);
    for (int64_t i = 0; i < t; ++i) {
      if (sa[b][i] < 0) continue;
      std::vector<double> e(static_cast<size_t>(t), 0.0);
      double z = 0;
      for (int64_t j = 0; j <= i; ++j) {
        if (sa[b][j] != sa[b][i]) continue;
        double dot = 0;
        for (int64_t x = 0; x < d; ++x) dot += qa[b][head][i][x] * ka[b][kv_head][j][x];
        e[j] = std::exp(dot / std::sqrt(static_cast<double>(d)));
        z += e[j];
      }
      for (int64_t j = 0; j <= i; ++j) per_key[j] = std::max(per_key[j], e[j] / z);
    }
    for (int64_t j = 0; j < t; ++j) out[j] = std::max(out[j], per_key[j]);
  }
  return out;
}

TEST(FutureAttention, BlocksEqualTheDefinition) {
  at::manual_seed(5);
  auto q = at::randn({2, 4, 13, 8}), k = at::randn({2, 2, 13, 8});
  auto seg = two_rows_segments();
  for (int64_t block : {1, 4, 128}) {
    auto got = future_attention(q, k, seg, block);
    ASSERT_EQ(got.sizes(), at::IntArrayRef({2, 2, 13}));
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t kv = 0; kv < 2; ++kv) {
        const auto want = future_by_loops(q, k, seg, b, kv);
        for (int64_t j = 0; j < 13; ++j)
          EXPECT_NEAR(got[b][kv][j].item<double>(), want[j], 1e-5)
              << "block " << block << " row " << b << " key " << j;
      }
  }
  // A document's first token is all its first query sees: importance 1. Padding gets 0.
  auto importance = future_attention(q, k, seg);
  EXPECT_NEAR(importance[0][0][0].item<double>(), 1.0, 1e-6);
  EXPECT_NEAR(importance[0][1][5].item<double>(), 1.0, 1e-6);
  EXPECT_EQ(importance[1][0][11].item<double>(), 0.0);
  EXPECT_ERROR_CONTAINS(future_attention(q, at::randn({2, 3, 13, 8}), seg), "with Hk dividing H");
}

TEST(ScorerLoss, FormulasOnHandMadeNumbers) {
  // One row of 3 tokens (the last padding), 2 heads: differences 0.5, -2 | 3, 0.1 (and padding).
  auto pred = at::tensor({0.5f, -2.0f, 9.0f, 3.0f, 0.1f, 9.0f}).view({1, 2, 3});
  auto target = at::zeros({1, 2, 3});
  auto seg = at::tensor({0L, 0L, -1L}).view({1, 3});
  auto smooth = scorer_loss_sums(ScorerKind::kLocret, pred, target, seg);
  // SmoothL1 (beta 1): 0.125 + 1.5 + 2.5 + 0.005.
  EXPECT_NEAR(smooth.sum.item<double>(), 0.125 + 1.5 + 2.5 + 0.005, 1e-6);
  EXPECT_EQ(smooth.count, 4);
  auto squared = scorer_loss_sums(ScorerKind::kKvzap, pred, target, seg);
  EXPECT_NEAR(squared.sum.item<double>(), 0.25 + 4 + 9 + 0.01, 1e-5);
  EXPECT_EQ(squared.count, 4);
  // locret's target is the causal importance, kvzap's its log.
  at::manual_seed(1);
  auto q = at::randn({2, 4, 13, 8}), k = at::randn({2, 2, 13, 8});
  auto segs = two_rows_segments();
  auto importance = future_attention(q, k, segs);
  EXPECT_TRUE(at::equal(scorer_target(ScorerKind::kLocret, q, k, segs), importance));
  auto logs = scorer_target(ScorerKind::kKvzap, q, k, segs);
  EXPECT_LT((logs.narrow(2, 0, 10) - importance.narrow(2, 0, 10).log()).abs().max().item<double>(),
            1e-6);
}

TEST(ScorerBank, ShapesNamesAndLoading) {
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "qwen3_qknorm", {});
  const ModelConfig& c = model.config();
  ScorerConfig locret;
  locret.width = 16;
  ScorerBank bank(locret, c, at::kCPU, 3);
  EXPECT_EQ(bank.input_size(), (c.num_heads + 2 * c.num_kv_heads) * c.head_dim);
  EXPECT_EQ(bank.named_parameters().size(), static_cast<size_t>(4 * c.num_layers));
  EXPECT_EQ(bank.named_parameters()[0].first, "layers.0.scorer.linear1.weight");
  auto hidden = at::randn({2, 5, c.hidden_size});
  auto q = at::randn({2, c.num_heads, 5, c.head_dim}),
       k = at::randn({2, c.num_kv_heads, 5, c.head_dim});
  auto pos = at::arange(5).repeat({2, 1});
  EXPECT_EQ(bank.score({0, hidden, q, k, k, pos, q}).sizes(),
            at::IntArrayRef({2, c.num_kv_heads, 5}));
  ScorerConfig kvzap;
  kvzap.kind = ScorerKind::kKvzap;
  kvzap.width = 16;
  ScorerBank zap(kvzap, c, at::kCPU, 3);
  EXPECT_EQ(zap.input_size(), c.hidden_size);
  EXPECT_EQ(zap.score({1, hidden, q, k, k, pos, q}).sizes(),
            at::IntArrayRef({2, c.num_kv_heads, 5}));
  // Loading copies every tensor; a wrong shape or a missing one is named.
  ScorerBank other(locret, c, at::kCPU, 4);
  other.load(bank.named_parameters(), "a.safetensors");
  EXPECT_TRUE(at::equal(other.parameters()[0], bank.parameters()[0]));
  EXPECT_ERROR_CONTAINS(zap.load(bank.named_parameters(), "a.safetensors"),
                        "a.safetensors: scorer tensor 'layers.0.scorer.linear1.weight' has shape");
  auto partial = bank.named_parameters();
  partial.pop_back();
  EXPECT_ERROR_CONTAINS(other.load(partial, "b.safetensors"),
                        "b.safetensors: missing scorer tensor");
  EXPECT_ERROR_CONTAINS(ScorerConfig::from_json({{"kind", "h2o"}, {"width", 8}}, "s.json"),
                        "scorer kind 'h2o' is not supported");
}

// Records what every layer computed while the model runs plain attention.
class Recorder : public LayerHook {
 public:
  explicit Recorder(at::Tensor segments) : plain_(nullptr, segments) {}
  at::Tensor attend(const LayerTensors& t) override {
    layers.push_back(
        {t.hidden.clone(), t.q.clone(), t.k.clone(), t.v.clone(), t.positions.clone()});
    return plain_.attend(t);
  }
  struct Layer {
    at::Tensor hidden, q, k, v, positions;
  };
  std::vector<Layer> layers;

 private:
  GatedAttentionHook plain_;
};

// A short fit on a real (tiny) model's targets: both scorers' losses fall well below where they
// start, so the targets carry what the inputs can predict.
TEST(ScorerBank, FittingLowersTheLoss) {
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "qwen3_qknorm", {});
  const ModelConfig& c = model.config();
  at::manual_seed(2);
  auto ids = at::randint(3, c.vocab_size, {2, 48}, at::kLong);
  auto positions = at::arange(48).repeat({2, 1});
  auto segments = at::zeros({2, 48}, at::kLong);
  Recorder recorder(segments);
  {
    at::NoGradGuard no_grad;
    model.forward_hidden(ids, positions, ForwardContext{nullptr, &recorder});
  }
  for (const std::string kind : {"locret", "kvzap"}) {
    ScorerConfig config;
    config.kind = parse_scorer_kind(kind, "test");
    config.width = 32;
    ScorerBank bank(config, c, at::kCPU, 1);
    std::vector<at::Tensor> targets;
    for (const auto& l : recorder.layers)
      targets.push_back(scorer_target(config.kind, l.q, l.k, segments));
    torch::optim::Adam adam(bank.parameters(), torch::optim::AdamOptions(3e-3));
    auto loss_now = [&] {
      at::Tensor sum = at::zeros({});
      int64_t count = 0;
      for (size_t li = 0; li < recorder.layers.size(); ++li) {
        const auto& l = recorder.layers[li];
        auto pred =
            bank.score({static_cast<int64_t>(li), l.hidden, l.q, l.k, l.v, l.positions, l.q});
        auto s = scorer_loss_sums(config.kind, pred, targets[li], segments);
        sum = sum + s.sum;
        count += s.count;
      }
      return sum / static_cast<double>(count);
    };
    const double first = loss_now().item<double>();
    double last = first;
    for (int step = 0; step < 150; ++step) {
      adam.zero_grad();
      auto loss = loss_now();
      loss.backward();
      adam.step();
      last = loss.item<double>();
    }
    EXPECT_LT(last, 0.5 * first) << kind << ": " << first << " -> " << last;
  }
}

}  // namespace
}  // namespace retain
