// The CUDA kernels against their ATen references: retention attention (output and the gradients
// of q, k, v and log beta), retention sum (forward and backward), decode attention over
// variable-length per-head caches and cache compaction, in fp32, bf16 and fp16, on shapes that
// do not divide the tiles, GQA ratios 1/4/8 (decode also 7 and 16), several documents per row and
// padding. Tests named *_CUDA skip themselves without a GPU (or in a build without CUDA sources).
// The CPU tests at the end check that the dispatchers choose the references on CPU tensors.
//
// Error measure: max |kernel - reference| / max(1, max |reference|), where the reference runs in
// fp32 on the same (already rounded) inputs. The bounds below cover the rounding of the kernels'
// low-precision outputs and of P and dS, which the tensor cores take in the input dtype.
#include <torch/csrc/autograd/autograd.h>
#include <torch/cuda.h>

#include <cmath>
#include <tuple>

#include "compact_cache_check.h"
#include "cuda_skip.h"
#include "kernels/cache_append_triton.h"
#include "kernels/cache_attention_triton.h"
#include "kernels/cache_cpu.h"
#include "kernels/decode_attention.h"
#include "kernels/device_info.h"
#include "kernels/retention_attention.h"
#include "kernels/retention_triton.h"
#include "test_util.h"

namespace retain {
namespace {

double rel_error(const at::Tensor& got, const at::Tensor& want) {
  auto g = got.to(at::kCPU, at::kDouble), w = want.to(at::kCPU, at::kDouble);
  EXPECT_FALSE(g.isnan().any().item<bool>()) << "NaN in the kernel's result";
  const double scale = std::max(1.0, w.abs().max().item<double>());
  return (g - w).abs().max().item<double>() / scale;
}

// Output and gradient bounds per input dtype.
double attention_tolerance(at::ScalarType t) {
  return t == at::kFloat ? 2e-4 : (t == at::kHalf ? 1e-2 : 4e-2);
}

struct Packed {
  at::Tensor positions, segments;  // (B, T) int64
};

// Rows of `t` tokens: row 0 holds documents of the given lengths (then padding), row 1 one long
// document followed by `pad` padding tokens.
Packed make_packed(int64_t t, const std::vector<int64_t>& docs, int64_t pad) {
  auto positions = at::zeros({2, t}, at::kLong), segments = at::full({2, t}, -1, at::kLong);
  int64_t at_token = 0, id = 0;
  for (int64_t n : docs) {
    for (int64_t i = 0; i < n && at_token < t; ++i, ++at_token) {
      positions[0][at_token] = i;
      segments[0][at_token] = id;
    }
    ++id;
  }
  for (int64_t i = 0; i < t - pad; ++i) {
    positions[1][i] = i;
    segments[1][i] = 0;
  }
  return {positions, segments};
}

struct AttentionCase {
  at::Tensor q, k, v, log_beta, positions, segments, d_out;
};

AttentionCase make_attention_case(int64_t g, int64_t d, int64_t t, at::ScalarType dtype,
                                  const Packed& packed, uint64_t seed) {
  const int64_t kv = 2;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto f = at::TensorOptions().dtype(at::kFloat);
  auto cuda = at::TensorOptions().device(at::kCUDA);
  AttentionCase c;
  c.q = at::randn({2, kv * g, t, d}, gen, f).to(cuda.dtype(dtype));
  c.k = at::randn({2, kv, t, d}, gen, f).to(cuda.dtype(dtype));
  c.v = at::randn({2, kv, t, d}, gen, f).to(cuda.dtype(dtype));
  c.d_out = at::randn({2, kv * g, t, d}, gen, f).to(cuda.dtype(dtype));
  // log beta in [-0.3, 0): decays that matter over tens of tokens, and some near 0.
  c.log_beta = (-0.3 * at::rand({2, kv, t}, gen, f)).to(cuda);
  c.positions = packed.positions.to(cuda);
  c.segments = packed.segments.to(cuda);
  return c;
}

// Runs a scope with one retention kernel implementation, then restores the process's choice.
struct KernelsScope {
  RetentionKernels saved = retention_kernels();
  explicit KernelsScope(RetentionKernels kernels) { set_retention_kernels(kernels); }
  ~KernelsScope() { set_retention_kernels(saved); }
};

// Both implementations run every kernel test (the WMMA kernels stay until the Triton ones are
// measured on a GPU); the Triton cubins cover bf16 and fp16, fp32 takes the WMMA kernels.
const RetentionKernels kImplementations[] = {RetentionKernels::wmma, RetentionKernels::triton};

// Output and the four gradients: the kernel (through retention_attention) vs the reference on
// fp32 copies of the same inputs.
void expect_attention_matches(const AttentionCase& c, const std::string& what) {
  const auto dtype = c.q.scalar_type();
  const RetentionKernels expected =
      retention_kernels() == RetentionKernels::triton && dtype != at::kFloat
          ? RetentionKernels::triton
          : RetentionKernels::wmma;
  ASSERT_EQ(retention_attention_path(c.q, c.k, c.v, c.log_beta), expected)
      << what << ": " << retention_attention_triton_unsupported(c.q, c.k, c.v, c.log_beta);
  auto run = [&](bool kernel) {
    auto cast = [&](const at::Tensor& x) {
      return (kernel ? x.clone() : x.to(at::kFloat)).requires_grad_();
    };
    auto q = cast(c.q), k = cast(c.k), v = cast(c.v), lb = c.log_beta.clone().requires_grad_();
    auto out = kernel ? retention_attention(q, k, v, lb, c.positions, c.segments)
                      : retention_attention_reference(q, k, v, lb, c.positions, c.segments);
    auto grads = torch::autograd::grad({out}, {q, k, v, lb}, {c.d_out.to(out.scalar_type())});
    grads.insert(grads.begin(), out.detach());
    return grads;
  };
  auto got = run(true), want = run(false);
  const char* names[] = {"out", "dq", "dk", "dv", "dlog_beta"};
  EXPECT_EQ(got[0].scalar_type(), dtype);
  for (size_t n = 0; n < got.size(); ++n)
    EXPECT_LE(rel_error(got[n], want[n]), attention_tolerance(dtype))
        << what << " " << names[n] << " " << c10::toString(dtype);
  // Padding rows: zero output, and no gradient flows into padding keys.
  auto pad_out = got[0][1].narrow(1, c.q.size(2) - 5, 5);
  EXPECT_EQ(pad_out.abs().max().item<double>(), 0.0) << what;
}

// (implementation, GQA ratio)
class RetentionAttentionKernel
    : public ::testing::TestWithParam<std::tuple<RetentionKernels, int64_t>> {};

TEST_P(RetentionAttentionKernel, ForwardAndGradientsMatchReference_CUDA) {
  RETAIN_SKIP_WITHOUT_CUDA();
  const auto [kernels, g] = GetParam();
  KernelsScope scope(kernels);
  const int64_t t = 203;  // not a multiple of 32 or 64
  auto packed = make_packed(t, {37, 90, 70}, 29);
  for (int64_t d : {64, 128})
    for (auto dtype : {at::kFloat, at::kBFloat16, at::kHalf})
      expect_attention_matches(make_attention_case(g, d, t, dtype, packed, 100 + d),
                               "G=" + std::to_string(g) + " D=" + std::to_string(d));
}

INSTANTIATE_TEST_SUITE_P(Gqa, RetentionAttentionKernel,
                         ::testing::Combine(::testing::ValuesIn(kImplementations),
                                            ::testing::Values(1, 4, 8)),
                         [](const auto& info) {
                           return std::string(retention_kernels_name(std::get<0>(info.param))) +
                                  "_G" + std::to_string(std::get<1>(info.param));
                         });

// Many tiles, one document per row, so no tile is skipped for its segments; and a row whose
// documents are short, so most tiles are.
TEST(RetentionAttentionKernelLong, ManyTilesMatchReference_CUDA) {
  RETAIN_SKIP_WITHOUT_CUDA();
  for (RetentionKernels kernels : kImplementations) {
    KernelsScope scope(kernels);
    const std::string name = retention_kernels_name(kernels);
    const int64_t t = 1100;
    auto long_doc = make_packed(t, {t}, 5);
    expect_attention_matches(make_attention_case(4, 128, t, at::kBFloat16, long_doc, 7),
                             name + " T=1100 one document");
    std::vector<int64_t> short_docs(20, 55);
    auto many = make_packed(t, short_docs, 5);
    expect_attention_matches(make_attention_case(2, 64, t, at::kHalf, many, 8),
                             name + " T=1100 twenty documents");
  }
}

TEST(RetentionSumKernel, ForwardAndGradientMatchReference_CUDA) {
  RETAIN_SKIP_WITHOUT_CUDA();
  for (RetentionKernels kernels : kImplementations)
    for (int64_t t : {77, 300}) {
      KernelsScope scope(kernels);
      auto packed = make_packed(t, {40, 100, 90}, 13);
      auto gen = at::make_generator<at::CPUGeneratorImpl>(t);
      auto cuda = at::TensorOptions().device(at::kCUDA);
      auto lb = (-0.3 * at::rand({2, 3, t}, gen, at::kFloat)).to(cuda);
      auto weights = at::randn({2, 3, t}, gen, at::kFloat).to(cuda);
      auto pos = packed.positions.to(cuda), seg = packed.segments.to(cuda);
      ASSERT_EQ(retention_sum_path(lb), kernels);
      auto a = lb.clone().requires_grad_(), b = lb.clone().requires_grad_();
      auto got = retention_sum(a, pos, seg), want = retention_sum_reference(b, pos, seg, 64);
      // fp32 sums of up to T terms in a different order.
      EXPECT_LE(rel_error(got, want), 1e-5) << "T=" << t;
      auto ga = torch::autograd::grad({got}, {a}, {weights})[0];
      auto gb = torch::autograd::grad({want}, {b}, {weights})[0];
      EXPECT_LE(rel_error(ga, gb), 1e-5) << "T=" << t;
    }
}

struct DecodeCase {
  at::Tensor q, keys, values, positions, lengths, q_positions;
};

// Caches of capacity 1100 viewed through their first `slots` slots (strided like the budgeted
// cache's), lengths in [0, slots] with one empty head and one head whose entries all lie after
// the query's position.
DecodeCase make_decode_case(int64_t g, int64_t d, int64_t slots, at::ScalarType dtype,
                            uint64_t seed) {
  const int64_t b = 3, hk = 2, capacity = 1100;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto f = at::TensorOptions().dtype(at::kFloat);
  auto cuda = at::TensorOptions().device(at::kCUDA);
  DecodeCase c;
  c.q = at::randn({b, hk * g, 1, d}, gen, f).to(cuda.dtype(dtype));
  auto keys = at::randn({b, hk, capacity, d}, gen, f).to(cuda.dtype(dtype));
  auto values = at::randn({b, hk, capacity, d}, gen, f).to(cuda.dtype(dtype));
  auto lengths = at::randint(1, slots + 1, {b, hk}, gen, at::kLong);
  lengths[0][1] = 0;
  lengths[1][0] = slots;
  auto slot = at::arange(capacity, at::kLong).view({1, 1, capacity});
  // Positions: increasing with gaps (evicted tokens), -1 past the length.
  auto positions = at::where(slot < lengths.unsqueeze(-1), 3 * slot + 1, at::full_like(slot, -1));
  c.q_positions = at::full({b, 1}, 3 * slots + 5, at::kLong);
  positions[2][0].fill_(10 * slots);  // every entry of (2, 0) is after the query: masked
  c.keys = keys.narrow(2, 0, slots);
  c.values = values.narrow(2, 0, slots);
  c.positions = positions.to(cuda).narrow(2, 0, slots);
  c.lengths = lengths.to(cuda);
  c.q_positions = c.q_positions.to(cuda);
  return c;
}

TEST(DecodeAttentionKernel, MatchesReference_CUDA) {
  RETAIN_SKIP_WITHOUT_CUDA();
  for (int64_t g : {1, 4, 7, 8, 16})
    for (int64_t d : {64, 128})
      for (auto dtype : {at::kFloat, at::kBFloat16, at::kHalf})
        for (int64_t slots : {1, 200, 1037}) {
          auto c = make_decode_case(g, d, slots, dtype, g * 1000 + d + slots);
          const double scale = 1.0 / std::sqrt(static_cast<double>(d));
          ASSERT_TRUE(decode_attention_uses_kernel(c.q, c.keys, c.values, c.positions));
          auto got =
              decode_attention(c.q, c.keys, c.values, c.positions, c.lengths, c.q_positions, scale);
          auto want = decode_attention_reference(c.q.to(at::kFloat), c.keys.to(at::kFloat),
                                                 c.values.to(at::kFloat), c.positions, c.lengths,
                                                 c.q_positions, scale);
          EXPECT_EQ(got.scalar_type(), dtype);
          // fp32: summation order only; bf16/fp16: the output's own rounding.
          const double tol = dtype == at::kFloat ? 1e-5 : (dtype == at::kHalf ? 2e-3 : 1e-2);
          EXPECT_LE(rel_error(got, want), tol)
              << "G=" << g << " D=" << d << " S=" << slots << " " << c10::toString(dtype);
          // The empty head (0, 1) and the fully masked head (2, 0) give zeros.
          EXPECT_EQ(got[0].narrow(0, g, g).abs().max().item<double>(), 0.0);
          EXPECT_EQ(got[2].narrow(0, 0, g).abs().max().item<double>(), 0.0);
        }
}

TEST(CompactCacheKernel, MatchesReferenceExactly_CUDA) {
  RETAIN_SKIP_WITHOUT_CUDA();
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kHalf})
    for (int64_t slots : {1, 100, 777}) {
      auto c = testing::random_cache(2, 3, 800, 64, slots, dtype, at::kCUDA);
      auto view = [&](const at::Tensor& t) { return t.narrow(2, 0, slots); };
      ASSERT_TRUE(
          compact_cache_uses_kernel(view(c.keys), view(c.values), view(c.positions), view(c.stat)));
      testing::expect_compaction_equals_reference(c, str_cat(slots, " ", c10::toString(dtype)));
    }
}

// The fused cache append against ATen's scatters on the same GPU tensors: bit for bit, for every
// dtype and head dim built, a decode step, a few tokens and the most the kernel takes, new keys
// and values split from (B, n, Hk, D) as a layer hands them over.
TEST(CacheAppendKernel, EqualsTheScattersBitForBit_CUDA) {
  RETAIN_SKIP_WITHOUT_CUDA();
  const int arch = cuda_device_arch(0);
  if (find_triton_cubin("cache_append", arch, "bf16", 64) == nullptr)
    GTEST_SKIP() << "no cache_append cubin for sm_" << arch;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kHalf})
    for (int64_t d : {64, 128})
      for (int64_t n : {int64_t{1}, int64_t{5}, kFusedAppendMaxTokens}) {
        SCOPED_TRACE(str_cat(c10::toString(dtype), " D", d, " n ", n));
        const int64_t b = 3, hk = 4, c = 200;
        auto on_gpu = [](const at::Tensor& t) { return t.to(at::kCUDA); };
        auto keys = on_gpu(at::randn({b, hk, c, d}, gen).to(dtype));
        auto values = on_gpu(at::randn({b, hk, c, d}, gen).to(dtype));
        auto positions = on_gpu(at::randint(0, 9000, {b, hk, c}, gen, at::kLong));
        auto stat = on_gpu(at::randn({b, hk, c}, gen));
        auto lengths = on_gpu(at::randint(0, c - n + 1, {b, hk}, gen, at::kLong));
        auto new_keys = on_gpu(at::randn({b, n, hk, d}, gen).to(dtype)).transpose(1, 2);
        auto new_values = on_gpu(at::randn({b, n, hk, d}, gen).to(dtype)).transpose(1, 2);
        auto new_positions = on_gpu(at::randint(0, 9000, {b, n}, gen, at::kLong));
        auto new_stat = on_gpu(at::randn({b, hk, n}, gen));
        auto k2 = keys.clone(), v2 = values.clone(), p2 = positions.clone(), s2 = stat.clone(),
             l2 = lengths.clone();
        write_at_lengths(k2, l2, new_keys);
        write_at_lengths(v2, l2, new_values);
        write_at_lengths(p2, l2, new_positions.unsqueeze(1).expand({b, hk, n}));
        write_at_lengths(s2, l2, new_stat);
        l2 += n;
        const CacheAppendTensors t{keys,     values,     positions,     stat,    lengths,
                                   new_keys, new_values, new_positions, new_stat};
        ASSERT_EQ(cache_append_triton_unsupported(t), "");
        cache_append_triton(t);
        EXPECT_TRUE(at::equal(keys, k2));
        EXPECT_TRUE(at::equal(values, v2));
        EXPECT_TRUE(at::equal(positions, p2));
        EXPECT_TRUE(at::equal(stat, s2));
        EXPECT_TRUE(at::equal(lengths, l2));
      }
}

// Chunked prefill's attention over a cache against softmax over each head's visible entries in
// fp32 on the same GPU: a 300-token chunk over 650 entries of a wider buffer, per-head and shared
// entry positions (empty slots, entries in the chunk's future), GQA 4, bf16 and fp16, head dims
// 64 and 128, queries split from (B, T, H, D), a padded row that sees nothing (zeros).
TEST(CacheAttentionKernel, EqualsSoftmaxOverTheVisibleEntries_CUDA) {
  RETAIN_SKIP_WITHOUT_CUDA();
  const int arch = cuda_device_arch(0);
  if (find_triton_cubin("cache_attention", arch, "bf16", 64) == nullptr)
    GTEST_SKIP() << "no cache_attention cubin for sm_" << arch;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const int64_t b = 2, h = 8, hk = 2, t = 300, s = 650;
  for (auto dtype : {at::kBFloat16, at::kHalf})
    for (int64_t d : {64, 128})
      for (bool per_head : {true, false}) {
        SCOPED_TRACE(str_cat(c10::toString(dtype), " D", d, per_head ? " per-head" : " shared"));
        auto on_gpu = [](const at::Tensor& x) { return x.to(at::kCUDA); };
        auto q = on_gpu(at::randn({b, t, h, d}, gen).to(dtype)).transpose(1, 2);
        auto keys = on_gpu(at::randn({b, hk, s + 50, d}, gen).to(dtype)).narrow(2, 0, s);
        auto values = on_gpu(at::randn({b, hk, s + 50, d}, gen).to(dtype)).narrow(2, 0, s);
        auto key_pos = on_gpu(at::randint(-1, 1000, {b, per_head ? hk : 1, s + 50}, gen, at::kLong))
                           .narrow(2, 0, s);
        auto q_pos = on_gpu(at::arange(700, 700 + t, at::kLong).repeat({b, 1}));
        q_pos[1].narrow(0, 0, 7).fill_(-1);  // left padding
        const double scale = 1.0 / std::sqrt(static_cast<double>(d));
        const CacheAttentionTensors tensors{q, keys, values, key_pos, q_pos};
        ASSERT_EQ(cache_attention_triton_unsupported(tensors), "");
        auto out = cache_attention_triton(tensors, scale).to(at::kFloat);
        const int64_t g = h / hk;
        auto k_pos = key_pos.repeat_interleave(per_head ? g : 1, 1).unsqueeze(2);
        auto visible = (k_pos >= 0).logical_and(k_pos <= q_pos.view({b, 1, t, 1}));
        auto scores = at::matmul(q.to(at::kFloat),
                                 keys.to(at::kFloat).repeat_interleave(g, 1).transpose(-1, -2)) *
                      scale;
        auto weights = at::softmax(scores.masked_fill(visible.logical_not(), -INFINITY), -1);
        auto want =
            at::matmul(weights.nan_to_num(0), values.to(at::kFloat).repeat_interleave(g, 1));
        const double error = (out - want).abs().max().item<double>();
        const double bound = 2e-2 * std::max(1.0, want.abs().max().item<double>());
        EXPECT_LE(error, bound) << "max |kernel - fp32 softmax| " << error;
        auto blind = visible.any(-1).logical_not().unsqueeze(-1);  // (B, H, T, 1)
        EXPECT_EQ(out.masked_select(blind).abs().sum().item<double>(), 0.0);
        EXPECT_GT(blind.sum().item<int64_t>(), 0);
      }
}

// ---- CPU: the dispatchers keep the references ------------------------------------------------

TEST(KernelDispatch, ImplementationNamesRoundTrip) {
  for (auto k : {RetentionKernels::wmma, RetentionKernels::triton, RetentionKernels::reference})
    EXPECT_EQ(parse_retention_kernels(retention_kernels_name(k), "test"), k);
  EXPECT_ERROR_CONTAINS(parse_retention_kernels("flash", "bench train --attention"),
                        "bench train --attention: 'flash' is not a retention kernel; expected "
                        "wmma, triton or reference");
}

TEST(KernelDispatch, CacheAppendNamesParseAndOthersAreRefused) {
  EXPECT_EQ(parse_cache_append("aten", "test"), CacheAppend::aten);
  EXPECT_EQ(parse_cache_append("fused", "test"), CacheAppend::fused);
  EXPECT_ERROR_CONTAINS(
      parse_cache_append("triton", "RETAIN_CACHE_APPEND"),
      "RETAIN_CACHE_APPEND: 'triton' is not a cache append; expected aten or fused");
  // CPU tensors never take the kernel, whatever is chosen.
  auto k = at::zeros({1, 1, 4, 64}), p = at::zeros({1, 1, 4}, at::kLong), s = at::zeros({1, 1, 4});
  auto len = at::zeros({1, 1}, at::kLong), nk = at::zeros({1, 1, 1, 64});
  auto np = at::zeros({1, 1}, at::kLong), ns = at::zeros({1, 1, 1});
  EXPECT_EQ(cache_append_triton_unsupported({k, k, p, s, len, nk, nk, np, ns}),
            "the tensors are not on one GPU");
}

TEST(KernelDispatch, PrefillAttentionNamesParseAndOthersAreRefused) {
  EXPECT_EQ(parse_prefill_attention("aten", "test"), PrefillAttention::aten);
  EXPECT_EQ(parse_prefill_attention("triton", "test"), PrefillAttention::triton);
  EXPECT_ERROR_CONTAINS(
      parse_prefill_attention("flash", "RETAIN_PREFILL_ATTENTION"),
      "RETAIN_PREFILL_ATTENTION: 'flash' is not a prefill attention; expected aten or triton");
  // CPU tensors never take the kernel, whatever is chosen.
  auto q = at::zeros({1, 2, 3, 64}), k = at::zeros({1, 1, 4, 64});
  auto kp = at::zeros({1, 1, 4}, at::kLong), qp = at::zeros({1, 3}, at::kLong);
  EXPECT_EQ(cache_attention_triton_unsupported({q, k, k, kp, qp}),
            "the tensors are not on one GPU");
}

TEST(KernelDispatch, CpuTensorsUseTheReferences) {
  auto packed = make_packed(21, {8, 13}, 4);
  auto q = at::randn({2, 4, 21, 64}), k = at::randn({2, 2, 21, 64}), v = at::randn({2, 2, 21, 64});
  auto lb = -0.2 * at::rand({2, 2, 21});
  for (RetentionKernels kernels : kImplementations) {
    KernelsScope scope(kernels);  // whatever is asked for, CPU tensors take the references
    EXPECT_EQ(retention_attention_path(q, k, v, lb), RetentionKernels::reference);
    EXPECT_EQ(retention_sum_path(lb), RetentionKernels::reference);
  }
  EXPECT_FALSE(retention_attention_uses_kernel(q, k, lb));
  EXPECT_FALSE(retention_sum_uses_kernel(lb));
  EXPECT_TRUE(
      at::equal(retention_attention(q, k, v, lb, packed.positions, packed.segments),
                retention_attention_reference(q, k, v, lb, packed.positions, packed.segments)));
  EXPECT_TRUE(at::equal(retention_sum(lb, packed.positions, packed.segments),
                        retention_sum_reference(lb, packed.positions, packed.segments)));
  auto positions = at::arange(21, at::kLong).expand({2, 2, 21}).contiguous();
  EXPECT_FALSE(decode_attention_uses_kernel(q.narrow(2, 0, 1), k, v, positions));
  EXPECT_FALSE(compact_cache_uses_kernel(k, v, positions, lb));
}

// The decode reference against a loop over heads and entries, in double.
TEST(KernelDispatch, DecodeReferenceMatchesNaive) {
  const int64_t b = 2, hk = 2, g = 3, s = 9, d = 8;
  auto q = at::randn({b, hk * g, 1, d}, at::kDouble);
  auto keys = at::randn({b, hk, s, d}, at::kDouble), values = at::randn({b, hk, s, d}, at::kDouble);
  auto lengths = at::tensor({9, 4, 0, 7}, at::kLong).view({b, hk});
  auto positions = at::arange(s, at::kLong).mul(2).expand({b, hk, s}).contiguous();
  positions[1][1][3] = -1;
  auto q_pos = at::tensor({20, 9}, at::kLong).view({b, 1});
  auto got = decode_attention(q, keys, values, positions, lengths, q_pos, 0.5);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < hk * g; ++h) {
      const int64_t kv = h / g;
      std::vector<double> w;
      std::vector<int64_t> idx;
      for (int64_t j = 0; j < lengths[bi][kv].item<int64_t>(); ++j) {
        const int64_t p = positions[bi][kv][j].item<int64_t>();
        if (p < 0 || p > q_pos[bi][0].item<int64_t>()) continue;
        idx.push_back(j);
        w.push_back(0.5 * (q[bi][h][0] * keys[bi][kv][j]).sum().item<double>());
      }
      auto want = at::zeros({d}, at::kDouble);
      if (!w.empty()) {
        auto p = at::softmax(at::tensor(w, at::kDouble), 0);
        for (size_t n = 0; n < idx.size(); ++n) want += p[n] * values[bi][kv][idx[n]];
      }
      EXPECT_LE((got[bi][h][0] - want).abs().max().item<double>(), 1e-12) << bi << " " << h;
    }
}

// The compaction reference against the expected layout: kept entries first in order, the dropped
// ones after them with position -1.
TEST(KernelDispatch, CompactReferenceKeepsOrder) {
  auto keys = at::arange(6, at::kFloat).view({1, 1, 6, 1}).expand({1, 1, 6, 4}).contiguous();
  auto values = keys.clone() * 10;
  auto positions = at::arange(6, at::kLong).view({1, 1, 6}).contiguous();
  auto stat = at::arange(6, at::kFloat).view({1, 1, 6}) + 100;
  auto keep = at::tensor({0, 1, 1, 0, 1, 0}, at::kLong).view({1, 1, 6}).to(at::kBool);
  auto length = compact_cache(keys, values, positions, stat, keep);
  EXPECT_EQ(length.item<int64_t>(), 3);
  EXPECT_TRUE(at::equal(positions.view({6}), at::tensor({1, 2, 4, -1, -1, -1}, at::kLong)));
  EXPECT_TRUE(at::equal(keys.select(3, 0).view({6}), at::tensor({1, 2, 4, 0, 3, 5}, at::kFloat)));
  EXPECT_TRUE(at::equal(stat.view({6}), at::tensor({101, 102, 104, 100, 103, 105}, at::kFloat)));
}

}  // namespace
}  // namespace retain
