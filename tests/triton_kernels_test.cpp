// The Triton retention kernels (kernels/triton/) against the ATen references, on the CPU: the
// fixture generator runs them through Triton's interpreter (tests/fixtures/make_triton_cases.py)
// and these tests run the references on the same inputs. fp32 and fp16; tails, packed documents,
// padding, GQA 1/4/8, head dims 64 and 128, |log beta| up to 20 at positions near 128k.
#include <cmath>

#include "core/json.h"
#include "core/safetensors.h"
#include "kernels/cache_cpu.h"
#include "kernels/retention_attention.h"
#include "test_util.h"

namespace retain {
namespace {

using testing::fixture_dir;

// max |got - want| <= tolerance * max(1, max |want|), over the entries where want is finite;
// where want is infinite (the lse of a row that sees nothing), got must be the same infinity.
void expect_close(const at::Tensor& got, const at::Tensor& want, double tolerance,
                  const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  auto g = got.to(at::kDouble), w = want.to(at::kDouble);
  auto finite = at::isfinite(w);
  EXPECT_TRUE(at::equal(at::isfinite(g), finite)) << what << ": infinities differ";
  EXPECT_TRUE(
      at::equal(g.masked_select(finite.logical_not()), w.masked_select(finite.logical_not())))
      << what;
  const double scale = std::max(1.0, w.masked_select(finite).abs().max().item<double>());
  const double error = (g - w).masked_select(finite).abs().max().item<double>();
  EXPECT_LE(error, tolerance * scale) << what << ": max error " << error << " at scale " << scale;
}

// The logsumexp of each query row's visible scores, densely in double: (B, H, T).
at::Tensor dense_lse(const at::Tensor& q, const at::Tensor& k, const at::Tensor& log_beta,
                     const at::Tensor& positions, const at::Tensor& segments, double scale) {
  const int64_t group = q.size(1) / k.size(1), t = q.size(2);
  auto kk = k.to(at::kDouble).repeat_interleave(group, 1);
  auto a = log_beta.to(at::kDouble).repeat_interleave(group, 1).unsqueeze(2);  // (B, H, 1, T)
  auto s = at::matmul(q.to(at::kDouble), kk.transpose(-1, -2)) * scale;
  auto distance = (positions.unsqueeze(2) - positions.unsqueeze(1)).to(at::kDouble).unsqueeze(1);
  s = s + distance * a;
  auto index = at::arange(t, positions.options());
  auto visible = (segments.unsqueeze(2) == segments.unsqueeze(1))
                     .logical_and(segments.unsqueeze(2) >= 0)
                     .logical_and(index.view({1, t, 1}) >= index.view({1, 1, t}));
  return s.masked_fill(visible.unsqueeze(1).logical_not(), -INFINITY).logsumexp(-1);
}

// scripts/gpu-run.sh lets the interpreter fixture skip on a machine where it breaks.
#define RETAIN_SKIP_IF_TRITON_FIXTURE_SKIPPED()                                   \
  do {                                                                            \
    if (const std::string why = testing::fixture_skipped("triton"); !why.empty()) \
      GTEST_SKIP() << why;                                                        \
  } while (false)

struct TritonCase {
  std::string name, dtype;
  double scale = 0;
  std::shared_ptr<SafetensorsFile> file;
  at::Tensor get(const std::string& key) const { return file->tensor(key).clone(); }
};

std::vector<TritonCase> load_cases() {
  const fs::path dir = fixture_dir("triton");
  std::vector<TritonCase> cases;
  for (const auto& c : read_json_file(dir / "cases.json")) {
    TritonCase tc;
    tc.name = c.at("name").get<std::string>();
    tc.dtype = c.at("dtype").get<std::string>();
    tc.scale = c.at("scale").get<double>();
    tc.file = SafetensorsFile::open(dir / (tc.name + ".safetensors"));
    cases.push_back(std::move(tc));
  }
  return cases;
}

// Measured (2026-11-27): fp32 max errors <= 4e-7 of the largest entry, fp16 <= 4e-4 (one fp16
// ulp of the stored outputs). fp32: the kernels and the reference differ in summation order and
// the exp2 form of the
// softmax only. fp16: the kernels round P and dS to fp16 before their products (as FlashAttention
// does); the reference keeps them in fp32.
double tolerance(const TritonCase& c) { return c.dtype == "float32" ? 5e-6 : 2e-3; }

TEST(TritonKernels, InterpreterCasesCoverWhatTheKernelsMustGetRight) {
  RETAIN_SKIP_IF_TRITON_FIXTURE_SKIPPED();
  const auto cases = load_cases();
  ASSERT_GE(cases.size(), 6u);
  bool fp16 = false, padding = false, gqa8 = false, d128 = false, far = false, tail = false;
  for (const auto& c : cases) {
    fp16 |= c.dtype == "float16";
    const auto q = c.get("q"), k = c.get("k");
    padding |= (c.get("segments") < 0).any().item<bool>();
    gqa8 |= q.size(1) / k.size(1) == 8;
    d128 |= q.size(3) == 128;
    far |= c.get("positions").max().item<int64_t>() > 128000 &&
           c.get("log_beta").min().item<float>() < -19;
    tail |= q.size(2) % 16 != 0;
  }
  EXPECT_TRUE(fp16 && padding && gqa8 && d128 && far && tail);
}

TEST(TritonKernels, AttentionForwardAndBackwardMatchTheReference) {
  RETAIN_SKIP_IF_TRITON_FIXTURE_SKIPPED();
  for (const auto& c : load_cases()) {
    SCOPED_TRACE(c.name);
    auto q = c.get("q").requires_grad_(), k = c.get("k").requires_grad_(),
         v = c.get("v").requires_grad_(), log_beta = c.get("log_beta").requires_grad_();
    RetentionAttentionOptions options;
    options.scale = c.scale;
    options.block_q = 32;
    options.block_k = 16;
    auto out = retention_attention_reference(q, k, v, log_beta, c.get("positions"),
                                             c.get("segments"), options);
    out.backward(c.get("d_out"));
    const double tol = tolerance(c);
    expect_close(c.get("out"), out.detach(), tol, "out");
    expect_close(c.get("dq"), q.grad(), tol, "dq");
    expect_close(c.get("dk"), k.grad(), tol, "dk");
    expect_close(c.get("dv"), v.grad(), tol, "dv");
    expect_close(c.get("dlog_beta"), log_beta.grad(), tol, "dlog_beta");
    // lse: -inf exactly on the padding rows, which see nothing (and output zeros).
    expect_close(c.get("lse"),
                 dense_lse(c.get("q"), c.get("k"), c.get("log_beta"), c.get("positions"),
                           c.get("segments"), c.scale),
                 tol, "lse");
    const auto padding = (c.get("segments") < 0).view({q.size(0), 1, q.size(2), 1});
    EXPECT_TRUE(c.get("out").masked_select(padding.expand_as(q)).eq(0).all().item<bool>());
  }
}

TEST(TritonKernels, RetentionSumForwardAndBackwardMatchTheReference) {
  RETAIN_SKIP_IF_TRITON_FIXTURE_SKIPPED();
  for (const auto& c : load_cases()) {
    SCOPED_TRACE(c.name);
    auto log_beta = c.get("log_beta").requires_grad_();
    auto sum = retention_sum_reference(log_beta, c.get("positions"), c.get("segments"), 32);
    sum.backward(c.get("d_sum"));
    expect_close(c.get("sum"), sum.detach(), 2e-5, "sum");
    expect_close(c.get("dsum_log_beta"), log_beta.grad(), 2e-5, "dsum_log_beta");
  }
}

// The fused cache append (kernels/triton/cache_append.py) is a copy: bit for bit what
// write_at_lengths does to each of the four buffers followed by lengths += n, where the new
// entries fit; past the capacity, those slots stay as they were (and the lengths still grow).
TEST(TritonKernels, CacheAppendIsWriteAtLengthsOnEveryBuffer) {
  RETAIN_SKIP_IF_TRITON_FIXTURE_SKIPPED();
  const fs::path dir = fixture_dir("triton");
  const Json cases = read_json_file(dir / "append_cases.json");
  ASSERT_EQ(cases.size(), 4u);
  for (const auto& c : cases) {
    const std::string name = c.at("name").get<std::string>();
    SCOPED_TRACE(name);
    auto file = SafetensorsFile::open(dir / ("append_" + name + ".safetensors"));
    auto get = [&](const char* key) { return file->tensor(key).clone(); };
    auto keys = get("keys"), values = get("values"), positions = get("positions"),
         stat = get("stat"), lengths = get("lengths");
    const auto new_keys = get("new_keys"), new_positions = get("new_positions");
    const int64_t b = keys.size(0), hk = keys.size(1), capacity = keys.size(2),
                  n = new_keys.size(2);
    const auto new_lengths = lengths + n;
    if (new_lengths.max().item<int64_t>() <= capacity) {
      write_at_lengths(keys, lengths, new_keys);
      write_at_lengths(values, lengths, get("new_values"));
      write_at_lengths(positions, lengths, new_positions.unsqueeze(1).expand({b, hk, n}));
      write_at_lengths(stat, lengths, get("new_stat"));
    } else {
      // What fits, token by token; the rest of the slots keep their contents.
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t h = 0; h < hk; ++h)
          for (int64_t t = 0; t < n; ++t) {
            const int64_t slot = lengths[bi][h].item<int64_t>() + t;
            if (slot >= capacity) continue;
            keys[bi][h][slot].copy_(new_keys[bi][h][t]);
            values[bi][h][slot].copy_(get("new_values")[bi][h][t]);
            positions[bi][h][slot].copy_(new_positions[bi][t]);
            stat[bi][h][slot].copy_(get("new_stat")[bi][h][t]);
          }
      EXPECT_EQ(name, "past_capacity");
    }
    EXPECT_TRUE(at::equal(get("keys_after"), keys));
    EXPECT_TRUE(at::equal(get("values_after"), values));
    EXPECT_TRUE(at::equal(get("positions_after"), positions));
    EXPECT_TRUE(at::equal(get("stat_after"), stat));
    EXPECT_TRUE(at::equal(get("lengths_after"), new_lengths));
    // The case changed something (a kernel that wrote nothing would fail above; this checks the
    // case is not vacuous).
    EXPECT_FALSE(at::equal(get("keys_after"), get("keys")));
  }
}

// Chunked prefill's attention over a cache (kernels/triton/cache_attention.py) against softmax
// attention over the same entries in double: each query reads the entries of its KV head up to
// the head's length whose positions lie in [0, its position]. A query that sees nothing
// (padding) gets zeros.
TEST(TritonKernels, CacheAttentionIsSoftmaxOverEachHeadsVisibleEntries) {
  RETAIN_SKIP_IF_TRITON_FIXTURE_SKIPPED();
  const fs::path dir = fixture_dir("triton");
  const Json cases = read_json_file(dir / "attention_cases.json");
  ASSERT_EQ(cases.size(), 4u);
  for (const auto& c : cases) {
    const std::string name = c.at("name").get<std::string>();
    SCOPED_TRACE(name);
    auto file = SafetensorsFile::open(dir / ("attention_" + name + ".safetensors"));
    auto get = [&](const char* key) { return file->tensor(key).clone(); };
    const auto q = get("q").to(at::kDouble), keys = get("keys").to(at::kDouble),
               values = get("values").to(at::kDouble);
    const auto key_pos = get("reference_key_positions"), q_pos = get("q_positions");
    const int64_t b = q.size(0), h = q.size(1), t = q.size(2), hk = keys.size(1);
    const int64_t group = h / hk;
    auto k_pos = key_pos.repeat_interleave(group, 1).unsqueeze(2);  // (B, H, 1, S)
    auto visible = (k_pos >= 0).logical_and(k_pos <= q_pos.view({b, 1, t, 1}));
    auto scores = at::matmul(q, keys.repeat_interleave(group, 1).transpose(-1, -2)) *
                  c.at("scale").get<double>();
    auto weights = at::softmax(scores.masked_fill(visible.logical_not(), -INFINITY), -1);
    auto want = at::matmul(weights.nan_to_num(0), values.repeat_interleave(group, 1));
    const bool fp16 = c.at("dtype").get<std::string>() == "float16";
    expect_close(get("out"), want, fp16 ? 4e-3 : 2e-6, "out");
    // The case has queries that see nothing (when padded) and heads that read a part only.
    auto blind = visible.any(-1).logical_not();  // (B, H, T)
    EXPECT_TRUE(at::equal(get("out").masked_select(blind.unsqueeze(-1)).abs().sum(),
                          at::zeros({}, get("out").options())))
        << "a query that sees nothing must get zeros";
    EXPECT_GT(visible.sum().item<int64_t>(), 0);
  }
}

}  // namespace
}  // namespace retain
