#include "kernels/cache_append_triton.h"

#include <ATen/record_function.h>

#include <atomic>
#include <cstdlib>

#include "core/error.h"

namespace retain {

namespace {

// What the kernel assumes of the tensors' layouts, beyond the cubin's dtype and head dim.
std::string layout_problem(const CacheAppendTensors& t) {
  const at::Tensor& k = t.keys;
  if (k.dim() != 4 || t.values.sizes() != k.sizes() || t.new_keys.dim() != 4 ||
      t.new_values.sizes() != t.new_keys.sizes() ||
      t.new_keys.sizes().slice(0, 2) != k.sizes().slice(0, 2) || t.new_keys.size(3) != k.size(3) ||
      t.positions.sizes() != k.sizes().slice(0, 3) || t.stat.sizes() != k.sizes().slice(0, 3) ||
      t.lengths.sizes() != k.sizes().slice(0, 2) || t.new_positions.dim() != 2 ||
      t.new_positions.size(0) != k.size(0) || t.new_positions.size(1) != t.new_keys.size(2) ||
      t.new_stat.sizes() != t.new_keys.sizes().slice(0, 3))
    return str_cat("shapes do not match: cache ", k.sizes(), ", new keys ", t.new_keys.sizes(),
                   ", new positions ", t.new_positions.sizes(), ", new statistic ",
                   t.new_stat.sizes());
  for (const at::Tensor* x : {&t.values, &t.new_keys, &t.new_values})
    if (x->scalar_type() != k.scalar_type()) return "keys and values differ in dtype";
  if (t.positions.scalar_type() != at::kLong || t.lengths.scalar_type() != at::kLong ||
      t.stat.scalar_type() != at::kFloat)
    return "the cache's positions and lengths are not int64 or its statistic not fp32";
  for (const at::Tensor* x : {&k, &t.values, &t.positions, &t.stat, &t.lengths})
    if (!x->is_contiguous() || !triton_aligned(*x))
      return "a cache buffer is not contiguous and 16-byte aligned";
  for (const at::Tensor* x : {&t.new_keys, &t.new_values})
    if (x->stride(3) != 1 || !triton_aligned(*x))
      return "new keys or values lack unit stride along D or a 16-byte aligned start";
  if (t.new_keys.size(2) > kFusedAppendMaxTokens)
    return str_cat(t.new_keys.size(2), " new tokens (the fused append takes up to ",
                   kFusedAppendMaxTokens, ")");
  return "";
}

const TritonCubin* cubin_for(const at::Tensor& keys, int arch) {
  return find_triton_cubin("cache_append", arch, triton_type(keys.scalar_type()),
                           static_cast<int>(keys.size(3)));
}

}  // namespace

CacheAppend parse_cache_append(const std::string& name, const std::string& where) {
  if (name == "aten") return CacheAppend::aten;
  RETAIN_CHECK(name == "fused", where, ": '", name,
               "' is not a cache append; expected aten or fused");
  return CacheAppend::fused;
}

namespace {

std::atomic<CacheAppend>& choice() {
  static std::atomic<CacheAppend> value{[] {
    const char* env = std::getenv("RETAIN_CACHE_APPEND");
    return env == nullptr ? CacheAppend::aten : parse_cache_append(env, "RETAIN_CACHE_APPEND");
  }()};
  return value;
}

}  // namespace

CacheAppend cache_append_choice() { return choice().load(); }
void set_cache_append(CacheAppend value) { choice().store(value); }

std::string cache_append_triton_unsupported(const CacheAppendTensors& t) {
  for (const at::Tensor* x : {&t.keys, &t.values, &t.positions, &t.stat, &t.lengths, &t.new_keys,
                              &t.new_values, &t.new_positions, &t.new_stat})
    if (!x->is_cuda() || x->get_device() != t.keys.get_device())
      return "the tensors are not on one GPU";
  if (triton_cubins().empty()) return "this build has no Triton cubins";
  if (std::string problem = layout_problem(t); !problem.empty()) return problem;
  const int arch = cuda_device_arch(t.keys.get_device());
  if (cubin_for(t.keys, arch) == nullptr)
    return str_cat(
        "no cache_append cubin for sm_", arch, ", ", t.keys.scalar_type(), ", head dim ",
        t.keys.size(3),
        " (built: bf16/fp16/fp32, head dims 64/128, kernels/triton/configs.json's archs)");
  return "";
}

TritonPlan plan_cache_append(const CacheAppendTensors& t, int arch) {
  const std::string problem = layout_problem(t);
  RETAIN_CHECK(problem.empty(), "cache_append: ", problem);
  const TritonCubin* cubin = cubin_for(t.keys, arch);
  RETAIN_CHECK(cubin != nullptr, "no Triton cubin of cache_append for sm_", arch, ", ",
               t.keys.scalar_type(), ", head dim ", t.keys.size(3));
  // No-ops for the int64 positions and fp32 statistic a decode step makes.
  const at::Tensor pos = triton_readable(t.new_positions.to(at::kLong));
  const at::Tensor stat = triton_readable(t.new_stat.to(at::kFloat));
  const int64_t b = t.keys.size(0), hk = t.keys.size(1);
  TritonPlan plan;
  auto& args = plan.add(*cubin, b * hk, 1);
  args.tensor(t.keys, "CACHE_K").tensor(t.values, "CACHE_V").tensor(t.positions, "CACHE_POS");
  args.tensor(t.stat, "CACHE_STAT").tensor(t.lengths, "LENGTH");
  args.view(t.new_keys, "NEW_K").view(t.new_values, "NEW_V").view(pos, "NEW_POS");
  args.view(stat, "NEW_STAT");
  args.i32(t.new_keys.size(2), "n").i32(hk, "HK").i32(t.keys.size(2), "C");
  args.i64(t.new_keys.stride(0), "stride_kb").i64(t.new_keys.stride(1), "stride_kh");
  args.i64(t.new_keys.stride(2), "stride_kt");
  args.i64(t.new_values.stride(0), "stride_vb").i64(t.new_values.stride(1), "stride_vh");
  args.i64(t.new_values.stride(2), "stride_vt");
  args.i64(pos.stride(0), "stride_pb").i64(pos.stride(1), "stride_pt");
  args.i64(stat.stride(0), "stride_sb").i64(stat.stride(1), "stride_sh");
  args.i64(stat.stride(2), "stride_st");
  return plan;
}

void cache_append_triton(const CacheAppendTensors& t) {
  // One launch that ATen's operator count (bench decode's proxy for launches) would not see.
  RECORD_FUNCTION("retain::cache_append", std::vector<c10::IValue>{});
  launch_triton_plan(plan_cache_append(t, cuda_device_arch(t.keys.get_device())),
                     t.keys.get_device());
}

}  // namespace retain
