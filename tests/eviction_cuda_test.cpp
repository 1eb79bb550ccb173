// Generation on a GPU against the same generation on the CPU: the HF fixture models of every
// family in fp32 on CUDA give transformers' logits (<= 1e-4) and greedy tokens; in bf16 the
// logits stay within the stated bound of the fp32 reference. Every eviction policy, run on CUDA
// (decode attention over the variable-length per-head caches, compaction on the device), keeps
// the same entries and produces the same tokens as on the CPU, and its budget holds.
// Tests named *_CUDA skip themselves without a GPU.
#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>

#include "core/safetensors.h"
#include "eval/budgeted_cache.h"
#include "eval/cache_factory.h"
#include "eval/policies/policy_registry.h"
#include "gates/gate_bank.h"
#include "kernels/cache_append_triton.h"
#include "kernels/cache_attention_triton.h"
#include "model/attention.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "model/init_model.h"
#include "test_util.h"

namespace retain {
namespace {

#define RETAIN_SKIP_WITHOUT_CUDA() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device"

// bf16 weights and activations against transformers' fp32 logits: max |diff| / max |ref|. The
// tiny fixtures' logits are O(1), so this is ~ a few bf16 ulps accumulated over 2-4 layers.
constexpr double kBf16RelativeTolerance = 3e-2;

class HfParityCuda : public ::testing::TestWithParam<std::string> {};

TEST_P(HfParityCuda, LogitsAndGreedyTokensMatchTransformers_CUDA) {
  RETAIN_SKIP_WITHOUT_CUDA();
  c10::InferenceMode guard;
  const fs::path dir = testing::fixture_dir("hf") / GetParam();
  auto ref = SafetensorsFile::open(dir / "reference.safetensors");
  auto ids = ref->tensor("input_ids").clone();
  auto want = ref->tensor("logits").clone();
  auto positions = at::arange(ids.size(1), at::kLong).view({1, -1});

  Decoder fp32 = Decoder::load(dir, {at::kFloat, at::kCUDA});
  auto logits = fp32.forward(ids.cuda(), positions.cuda(), nullptr).cpu();
  EXPECT_LE((logits - want).abs().max().item<double>(), 1e-4) << GetParam() << " fp32";

  auto prompt_tensor = ref->tensor("greedy_prompt").view({-1});
  std::vector<int64_t> prompt(prompt_tensor.data_ptr<int64_t>(),
                              prompt_tensor.data_ptr<int64_t>() + prompt_tensor.numel());
  auto expected = ref->tensor("greedy_ids").clone();
  SamplingOptions options;
  options.max_new_tokens = expected.numel();
  FullKvCache cache(fp32.config().num_layers);
  auto result = generate(fp32, prompt, cache, options);
  EXPECT_TRUE(at::equal(at::tensor(result.tokens, at::kLong), expected))
      << GetParam() << ": got " << at::tensor(result.tokens) << " expected " << expected;

  Decoder bf16 = Decoder::load(dir, {at::kBFloat16, at::kCUDA});
  auto low = bf16.forward(ids.cuda(), positions.cuda(), nullptr).to(at::kCPU, at::kFloat);
  const double rel = (low - want).abs().max().item<double>() / want.abs().max().item<double>();
  EXPECT_LE(rel, kBf16RelativeTolerance) << GetParam() << " bf16";
  std::cout << "[ bf16 ] " << GetParam()
            << ": max |logit - transformers fp32| / max |logit| = " << rel << "\n";
}

INSTANTIATE_TEST_SUITE_P(Families, HfParityCuda, ::testing::ValuesIn(testing::hf_fixture_cases()),
                         [](const auto& info) { return info.param; });

// Random gates made on the CPU and copied to the GPU, so both devices score with equal weights.
std::unique_ptr<GateBank> make_gates(const ModelConfig& c, at::Device device,
                                     const GateBank* copy_from) {
  GateConfig g;
  g.width = 16;
  g.bias_init = 2.0;  // betas spread over (0.5, 1): scores that rank tokens clearly apart
  g.init_std = 0.5;
  auto bank = std::make_unique<GateBank>(g, c, device, 11);
  if (copy_from) bank->load(copy_from->named_parameters(), "the CPU gates");
  return bank;
}

// The fused attention (CUDA's default path) against the eager one on the same GPU: GQA, keys with
// per-head positions and empty slots, a padding query that sees nothing, a sliding window.
TEST(AttentionCuda, FusedEqualsEager_CUDA) {
  RETAIN_SKIP_WITHOUT_CUDA();
  c10::InferenceMode guard;
  at::manual_seed(5);
  for (auto type : {at::kFloat, at::kBFloat16}) {
    for (int64_t window : {0, 5}) {
      auto opts = at::TensorOptions(at::kCUDA).dtype(type);
      const int64_t b = 2, h = 8, hk = 2, t = 6, s = 19, d = 64;
      auto q = at::randn({b, h, t, d}, opts), k = at::randn({b, hk, s, d}, opts);
      auto v = at::randn({b, hk, s, d}, opts);
      auto q_pos =
          at::arange(13, 13 + t, at::TensorOptions(at::kCUDA).dtype(at::kLong)).repeat({b, 1});
      q_pos[1][0] = -1;  // a padding query
      auto k_pos =
          at::randperm(s, at::TensorOptions(at::kCUDA).dtype(at::kLong)).repeat({b, hk, 1});
      k_pos.narrow(2, 15, 4).fill_(-1);  // empty slots
      auto fused = attention_fused(q, k, v, q_pos, k_pos, 0.125, window).to(at::kFloat);
      auto eager = attention_eager(q, k, v, q_pos, k_pos, 0.125, window).to(at::kFloat);
      EXPECT_FALSE(fused.isnan().any().item<bool>());
      // Row 1's padding query is unused downstream: compare the rest.
      auto diff = (fused - eager).abs();
      diff[1].select(1, 0).zero_();
      EXPECT_LE(diff.max().item<double>(), type == at::kFloat ? 1e-5 : 3e-2)
          << type << " window " << window;
    }
  }
}

class PolicyCuda : public ::testing::TestWithParam<std::string> {};

// One policy on both devices: a 90-token prompt of distinct tokens prefilled in chunks of 16 at a
// budget of 12 per head (5 evictions), then `new_tokens` greedy tokens. Returns both caches.
struct BothDevices {
  int64_t layers = 0, kv_heads = 0;
  std::unique_ptr<BudgetedKvCache> cpu, gpu;
  std::vector<int64_t> cpu_tokens, gpu_tokens;
};

BothDevices run_on_both(const std::string& spec, int64_t new_tokens, at::ScalarType gpu_dtype) {
  const fs::path dir = testing::fixture_dir("hf") / "qwen3_qknorm";
  Decoder cpu = Decoder::load(dir, {});
  Decoder gpu = Decoder::load(dir, {gpu_dtype, at::kCUDA});
  auto cpu_gates = make_gates(cpu.config(), at::kCPU, nullptr);
  auto gpu_gates = make_gates(gpu.config(), at::kCUDA, cpu_gates.get());
  std::vector<int64_t> prompt;
  for (int i = 0; i < 90; ++i) prompt.push_back(3 + (i * 37) % 500);
  SamplingOptions options;
  options.max_new_tokens = new_tokens;
  options.prefill_chunk = 16;
  PolicySpec policy = parse_policy(spec);
  policy.buffer = 0;  // cut back to the budget after every step
  BothDevices r;
  r.layers = cpu.config().num_layers;
  r.kv_heads = cpu.config().num_kv_heads;
  r.cpu = std::make_unique<BudgetedKvCache>(cpu.config(), policy, 12, 16, cpu_gates.get());
  r.gpu = std::make_unique<BudgetedKvCache>(gpu.config(), policy, 12, 16, gpu_gates.get());
  r.cpu_tokens = generate(cpu, prompt, *r.cpu, options).tokens;
  r.gpu_tokens = generate(gpu, prompt, *r.gpu, options).tokens;
  return r;
}

int64_t live_entries(const BudgetedKvCache& cache, int64_t layers) {
  int64_t total = 0;
  for (int64_t l = 0; l < layers; ++l) total += cache.lengths(l).sum().item<int64_t>();
  return total;
}

// Prefill only (the prompt's tokens are distinct, so no two keys tie exactly): the GPU keeps
// exactly the entries the CPU keeps, in every layer and head.
TEST_P(PolicyCuda, PrefillKeepsTheSameEntriesAsOnTheCpu_CUDA) {
  RETAIN_SKIP_WITHOUT_CUDA();
  c10::InferenceMode guard;
  auto r = run_on_both(GetParam(), 1, at::kFloat);
  EXPECT_EQ(r.gpu_tokens, r.cpu_tokens) << GetParam();
  const int64_t layers = r.layers, heads = r.kv_heads;
  for (int64_t l = 0; l < layers; ++l) {
    EXPECT_TRUE(at::equal(r.gpu->lengths(l).cpu(), r.cpu->lengths(l))) << GetParam() << " " << l;
    for (int64_t h = 0; h < heads; ++h)
      EXPECT_EQ(r.gpu->live_positions(l, 0, h), r.cpu->live_positions(l, 0, h))
          << GetParam() << " layer " << l << " head " << h;
  }
  EXPECT_LE(live_entries(*r.gpu, layers), layers * heads * 12) << GetParam();
}

// Decoding 16 tokens under eviction: the same greedy tokens on both devices, and the budget holds
// on the GPU in fp32 and bf16. (Entries are not compared here: a repeated generated token has
// keys of equal norm, which knorm then ranks by rounding.)
TEST_P(PolicyCuda, DecodeGivesTheSameTokensAsOnTheCpu_CUDA) {
  RETAIN_SKIP_WITHOUT_CUDA();
  c10::InferenceMode guard;
  auto r = run_on_both(GetParam(), 16, at::kFloat);
  EXPECT_EQ(r.gpu_tokens, r.cpu_tokens) << GetParam();
  EXPECT_LE(live_entries(*r.gpu, r.layers), r.layers * r.kv_heads * 12) << GetParam();
  auto low = run_on_both(GetParam(), 16, at::kBFloat16);
  EXPECT_EQ(low.gpu_tokens.size(), 16u) << GetParam();
  EXPECT_LE(live_entries(*low.gpu, low.layers), low.layers * low.kv_heads * 12)
      << GetParam() << " bf16";
}

// Decode steps replayed as a CUDA graph against the same steps launched eagerly on the same GPU:
// identical tokens and identical kept entries, a batch whose rows stop at different steps, and
// eviction both after every step (buffer 0) and every few steps (buffer 3).
TEST_P(PolicyCuda, GraphDecodeEqualsEagerDecode_CUDA) {
  RETAIN_SKIP_WITHOUT_CUDA();
  c10::InferenceMode guard;
  const fs::path dir = testing::fixture_dir("hf") / "qwen3_qknorm";
  Decoder gpu = Decoder::load(dir, {at::kFloat, at::kCUDA});
  auto gates = make_gates(gpu.config(), at::kCUDA, nullptr);
  std::vector<std::vector<int64_t>> prompts(3);
  for (int i = 0; i < 70; ++i) prompts[0].push_back(3 + (i * 37) % 500);
  for (int i = 0; i < 41; ++i) prompts[1].push_back(7 + (i * 53) % 400);
  for (int i = 0; i < 55; ++i) prompts[2].push_back(11 + (i * 29) % 450);
  for (int64_t buffer : {0, 3}) {
    PolicySpec policy = parse_policy(GetParam());
    policy.buffer = buffer;
    SamplingOptions options;
    options.max_new_tokens = 20;
    options.prefill_chunk = 16;
    auto run = [&](DecodeMode mode, std::unique_ptr<BudgetedKvCache>& cache) {
      options.decode = mode;
      cache = std::make_unique<BudgetedKvCache>(gpu.config(), policy, 12, 16, gates.get());
      return generate_batch(gpu, prompts, *cache, options);
    };
    std::unique_ptr<BudgetedKvCache> eager_cache, graph_cache, fused_cache;
    auto first = run(DecodeMode::kEager, eager_cache);
    options.stop_ids = {first[1].tokens.at(6)};  // row 1 stops early
    auto eager = run(DecodeMode::kEager, eager_cache);
    auto graph = run(DecodeMode::kAuto, graph_cache);
    // The fused append (one kernel for the four scatters and the lengths) is a copy: the same
    // tokens and entries, eager and in the graph (kernels/cache_append_triton.h).
    std::vector<GenerationResult> fused;
    const bool fused_built =
        find_triton_cubin("cache_append", cuda_device_arch(0), "fp32", 64) != nullptr;
    if (fused_built) {
      set_cache_append(CacheAppend::fused);
      fused = run(DecodeMode::kAuto, fused_cache);
      set_cache_append(CacheAppend::aten);
    }
    const std::string what = GetParam() + " buffer " + std::to_string(buffer);
    EXPECT_EQ(graph[0].decode_mode, GetParam() == "random" ? "eager" : "cuda-graph") << what;
    for (size_t r = 0; r < prompts.size(); ++r) {
      EXPECT_EQ(graph[r].tokens, eager[r].tokens) << what << " row " << r;
      if (fused_built) {
        EXPECT_EQ(fused[r].tokens, eager[r].tokens) << what << " fused, row " << r;
      }
    }
    for (int64_t l = 0; l < gpu.config().num_layers; ++l)
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t h = 0; h < gpu.config().num_kv_heads; ++h) {
          EXPECT_EQ(graph_cache->live_positions(l, r, h), eager_cache->live_positions(l, r, h))
              << what << " layer " << l << " row " << r << " head " << h;
          if (fused_built) {
            EXPECT_EQ(fused_cache->live_positions(l, r, h), eager_cache->live_positions(l, r, h))
                << what << " fused, layer " << l << " row " << r << " head " << h;
          }
        }
  }
}

// Chunked prefill through the Triton kernel over the cache (kernels/cache_attention_triton.h)
// against SDPA with the dense mask, in the model on the same GPU: a bf16 llama with head dim 64, a
// 200-token prompt in chunks of 48, the full cache (positions shared by the heads) and streaming
// (per-head positions; it evicts by position alone, so both runs keep the same entries). The last
// token's logits agree within the bf16 bound.
TEST(PrefillAttentionCuda, ChunkedPrefillThroughTheKernelMatchesSdpa_CUDA) {
  RETAIN_SKIP_WITHOUT_CUDA();
  if (find_triton_cubin("cache_attention", cuda_device_arch(0), "bf16", 64) == nullptr)
    GTEST_SKIP() << "no cache_attention cubin for this GPU";
  c10::InferenceMode guard;
  testing::TempDir dir;
  InitModelOptions init;
  init.arch = "llama";
  init.preset = "tiny";
  init.sets = {"head_dim=64"};
  init.out = (dir / "model").string();
  init_model(init);
  Decoder model = Decoder::load(init.out, {at::kBFloat16, at::kCUDA});
  ASSERT_EQ(model.config().head_dim, 64);
  const int64_t n = 200, chunk = 48;
  std::vector<int64_t> prompt;
  for (int64_t i = 0; i < n; ++i) prompt.push_back(3 + (i * 37) % 200);
  for (const std::string policy : {"full", "streaming:buffer=0"}) {
    SCOPED_TRACE(policy);
    auto last_logits = [&](PrefillAttention choice) {
      set_prefill_attention(choice);
      auto cache = make_kv_cache(model.config(), parse_policy(policy), 64, n, chunk, {});
      at::Tensor hidden;
      for (int64_t begin = 0; begin < n; begin += chunk) {
        const int64_t len = std::min(chunk, n - begin);
        auto ids =
            at::tensor(std::vector<int64_t>(prompt.begin() + begin, prompt.begin() + begin + len),
                       at::kLong)
                .view({1, len});
        auto positions = at::arange(begin, begin + len, at::kLong).view({1, len});
        hidden = model.forward_hidden(ids, positions, ForwardContext{cache.get()});
      }
      set_prefill_attention(PrefillAttention::aten);
      return model.logits(hidden.select(1, hidden.size(1) - 1)).to(at::kFloat).cpu();
    };
    auto sdpa = last_logits(PrefillAttention::aten), kernel = last_logits(PrefillAttention::triton);
    const double error = (kernel - sdpa).abs().max().item<double>();
    const double bound = kBf16RelativeTolerance * std::max(1.0, sdpa.abs().max().item<double>());
    EXPECT_LE(error, bound) << "max |kernel - SDPA| over the logits";
    // The kernel took the model's tensors (the dispatch falls back with a log line otherwise).
    auto q = at::zeros({1, model.config().num_heads, chunk, 64},
                       at::TensorOptions(at::kCUDA).dtype(at::kBFloat16));
    auto k = at::zeros({1, model.config().num_kv_heads, n, 64}, q.options());
    auto kp = at::zeros({1, 1, n}, q.options().dtype(at::kLong));
    auto qp = at::zeros({1, chunk}, kp.options());
    EXPECT_EQ(cache_attention_triton_unsupported({q, k, k, kp, qp}), "");
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, PolicyCuda,
                         ::testing::Values("streaming", "h2o", "snapkv", "sagekv", "tova",
                                           "importance", "knorm", "trimkv", "dbtrimkv", "random",
                                           "expected_attention", "snapkv:alloc=pyramid",
                                           "expected_attention:alloc=adakv"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == ':' || ch == '=' || ch == ',') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace retain
