#include "kernels/cache_attention_triton.h"

#include <ATen/record_function.h>

#include <atomic>
#include <cstdlib>

#include "core/error.h"

namespace retain {

namespace {

// What the kernel assumes of the tensors' layouts, beyond the cubin's dtype and head dim.
std::string layout_problem(const CacheAttentionTensors& t) {
  const at::Tensor &q = t.q, &k = t.keys;
  if (q.dim() != 4 || k.dim() != 4 || t.values.sizes() != k.sizes() || q.size(0) != k.size(0) ||
      q.size(3) != k.size(3) || k.size(1) == 0 || q.size(1) % k.size(1) != 0 ||
      t.key_positions.dim() != 3 || t.key_positions.size(0) != k.size(0) ||
      (t.key_positions.size(1) != 1 && t.key_positions.size(1) != k.size(1)) ||
      t.key_positions.size(2) != k.size(2) || t.q_positions.dim() != 2 ||
      t.q_positions.size(0) != q.size(0) || t.q_positions.size(1) != q.size(2))
    return str_cat("shapes do not match: q ", q.sizes(), ", keys ", k.sizes(), ", values ",
                   t.values.sizes(), ", key positions ", t.key_positions.sizes(),
                   ", query positions ", t.q_positions.sizes());
  if (k.scalar_type() != q.scalar_type() || t.values.scalar_type() != q.scalar_type())
    return "queries, keys and values differ in dtype";
  for (const at::Tensor* x : {&q, &k, &t.values})
    if (x->stride(3) != 1 || !triton_aligned(*x))
      return "queries, keys or values lack unit stride along D or a 16-byte aligned start";
  if (q.size(2) * q.size(0) * q.size(1) == 0) return "no query";
  return "";
}

const TritonCubin* cubin_for(const at::Tensor& q, int arch) {
  return find_triton_cubin("cache_attention", arch, triton_type(q.scalar_type()),
                           static_cast<int>(q.size(3)));
}

std::atomic<PrefillAttention>& choice() {
  static std::atomic<PrefillAttention> value{[] {
    const char* env = std::getenv("RETAIN_PREFILL_ATTENTION");
    return env == nullptr ? PrefillAttention::aten
                          : parse_prefill_attention(env, "RETAIN_PREFILL_ATTENTION");
  }()};
  return value;
}

}  // namespace

PrefillAttention parse_prefill_attention(const std::string& name, const std::string& where) {
  if (name == "aten") return PrefillAttention::aten;
  RETAIN_CHECK(name == "triton", where, ": '", name,
               "' is not a prefill attention; expected aten or triton");
  return PrefillAttention::triton;
}

PrefillAttention prefill_attention_choice() { return choice().load(); }
void set_prefill_attention(PrefillAttention value) { choice().store(value); }

std::string cache_attention_triton_unsupported(const CacheAttentionTensors& t) {
  for (const at::Tensor* x : {&t.q, &t.keys, &t.values, &t.key_positions, &t.q_positions})
    if (!x->is_cuda() || x->get_device() != t.q.get_device())
      return "the tensors are not on one GPU";
  if (triton_cubins().empty()) return "this build has no Triton cubins";
  if (std::string problem = layout_problem(t); !problem.empty()) return problem;
  const int arch = cuda_device_arch(t.q.get_device());
  if (cubin_for(t.q, arch) == nullptr)
    return str_cat("no cache_attention cubin for sm_", arch, ", ", t.q.scalar_type(), ", head dim ",
                   t.q.size(3),
                   " (built: bf16/fp16, head dims 64/128, kernels/triton/configs.json's archs)");
  return "";
}

TritonPlan plan_cache_attention(const CacheAttentionTensors& t, double scale, int arch) {
  const std::string problem = layout_problem(t);
  RETAIN_CHECK(problem.empty(), "cache_attention: ", problem);
  const TritonCubin* cubin = cubin_for(t.q, arch);
  RETAIN_CHECK(cubin != nullptr, "no Triton cubin of cache_attention for sm_", arch, ", ",
               t.q.scalar_type(), ", head dim ", t.q.size(3));
  const at::Tensor &q = t.q, &k = t.keys, &v = t.values;
  const int64_t b = q.size(0), h = q.size(1), n = q.size(2), hk = k.size(1), s = k.size(2);
  const at::Tensor key_pos = triton_readable(t.key_positions.to(at::kLong));
  const at::Tensor q_pos = triton_readable(t.q_positions.to(at::kLong));
  // Every head reads all S entries (empty slots carry position -1): one length for all, read
  // through zero strides.
  const at::Tensor lengths = at::full({1, 1}, s, q.options().dtype(at::kLong));
  at::Tensor out = at::empty_like(q, at::MemoryFormat::Contiguous);
  TritonPlan plan;
  plan.outputs.push_back(out);
  auto& args = plan.add(*cubin, (n + cubin->block_m - 1) / cubin->block_m, b * h);
  args.view(q, "Q").view(k, "K").view(v, "V").view(key_pos, "KPOS").tensor(lengths, "LENGTH");
  args.view(q_pos, "QPOS").tensor(out, "OUT");
  args.i32(n, "T").i32(h, "H").i32(h / hk, "G").f32(scale, "scale");
  args.i64(q.stride(0), "stride_qb").i64(q.stride(1), "stride_qh").i64(q.stride(2), "stride_qt");
  args.i64(k.stride(0), "stride_kb").i64(k.stride(1), "stride_kh").i64(k.stride(2), "stride_kt");
  args.i64(v.stride(0), "stride_vb").i64(v.stride(1), "stride_vh").i64(v.stride(2), "stride_vt");
  args.i64(key_pos.stride(0), "stride_pb");
  args.i64(key_pos.size(1) == hk && hk > 1 ? key_pos.stride(1) : 0, "stride_ph");
  args.i64(key_pos.stride(2), "stride_pt");
  args.i64(0, "stride_lb").i64(0, "stride_lh");
  args.i64(q_pos.stride(0), "stride_xb").i64(q_pos.stride(1), "stride_xt");
  args.i64(out.stride(0), "stride_ob")
      .i64(out.stride(1), "stride_oh")
      .i64(out.stride(2), "stride_ot");
  return plan;
}

at::Tensor cache_attention_triton(const CacheAttentionTensors& t, double scale) {
  // One launch that ATen's operator count (bench decode's proxy for launches) would not see.
  RECORD_FUNCTION("retain::cache_attention", std::vector<c10::IValue>{});
  return launch_triton_plan(plan_cache_attention(t, scale, cuda_device_arch(t.q.get_device())),
                            t.q.get_device())
      .at(0);
}

}  // namespace retain
