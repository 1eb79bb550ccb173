#include "kernels/triton_launch.h"

#include <cstring>
#include <limits>
#include <mutex>
#include <set>

#include "core/error.h"
#include "core/log.h"

namespace retain {

const char* triton_type(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16:
      return "bf16";
    case at::kHalf:
      return "fp16";
    case at::kFloat:
      return "fp32";
    case at::kInt:
      return "i32";
    case at::kLong:
      return "i64";
    default:
      return "?";
  }
}

bool triton_arch_runs_on(int cubin_arch, int device_arch) {
  if (cubin_arch >= 90) return cubin_arch == device_arch;
  return cubin_arch / 10 == device_arch / 10 && cubin_arch <= device_arch;
}

const TritonCubin* find_triton_cubin(const std::string& kernel, int device_arch,
                                     const std::string& dtype, int head_dim) {
  for (const auto& c : triton_cubins())
    if (kernel == c.kernel && dtype == c.dtype && head_dim == c.head_dim &&
        triton_arch_runs_on(c.arch, device_arch))
      return &c;
  return nullptr;
}

bool triton_aligned(const at::Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
}

at::Tensor triton_readable(const at::Tensor& t) {
  return t.stride(-1) == 1 && triton_aligned(t) ? t : t.contiguous().clone();
}

TritonArgs& TritonArgs::tensor(const at::Tensor& t, const char* name) {
  RETAIN_CHECK(t.is_contiguous(), "Triton kernels: ", name, " must be contiguous");
  return pointer(t, name);
}

TritonArgs& TritonArgs::view(const at::Tensor& t, const char* name) {
  RETAIN_CHECK(t.dim() >= 1 && t.stride(-1) == 1, "Triton kernels: ", name,
               " must have unit stride along its last dimension, found strides ", t.strides());
  return pointer(t, name);
}

TritonArgs& TritonArgs::pointer(const at::Tensor& t, const char* name) {
  const auto address = reinterpret_cast<uint64_t>(t.data_ptr());
  RETAIN_CHECK(address % 16 == 0, "Triton kernels: ", name,
               " does not start 16-byte aligned (the cubins are compiled assuming it)");
  values_.push_back(address);
  names_.push_back(str_cat(name, ":*", triton_type(t.scalar_type())));
  tensors_.push_back(t);
  return *this;
}

TritonArgs& TritonArgs::i64(int64_t value, const char* name) {
  uint64_t slot = 0;
  std::memcpy(&slot, &value, sizeof(value));
  values_.push_back(slot);
  names_.push_back(str_cat(name, ":i64"));
  return *this;
}

TritonArgs& TritonArgs::i32(int64_t value, const char* name) {
  RETAIN_CHECK(
      value >= std::numeric_limits<int32_t>::min() && value <= std::numeric_limits<int32_t>::max(),
      "Triton kernels: ", name, " = ", value, " does not fit the kernels' int32");
  uint64_t slot = 0;
  const auto v = static_cast<int32_t>(value);
  std::memcpy(&slot, &v, sizeof(v));
  values_.push_back(slot);
  names_.push_back(str_cat(name, ":i32"));
  return *this;
}

TritonArgs& TritonArgs::f32(double value, const char* name) {
  uint64_t slot = 0;
  const auto v = static_cast<float>(value);
  std::memcpy(&slot, &v, sizeof(v));
  values_.push_back(slot);
  names_.push_back(str_cat(name, ":fp32"));
  return *this;
}

std::string TritonArgs::names() const {
  std::string out;
  for (const auto& n : names_) out += (out.empty() ? "" : ",") + n;
  return out;
}

void TritonArgs::check_device(int device) const {
  for (const auto& t : tensors_)
    RETAIN_CHECK(t.is_cuda() && t.get_device() == device,
                 "Triton kernels: a tensor argument is on ", t.device(), ", not cuda:", device);
}

std::vector<void*> TritonArgs::pointers() {
  values_.push_back(0);  // global scratch
  values_.push_back(0);  // profile scratch
  std::vector<void*> out;
  for (auto& v : values_) out.push_back(&v);
  return out;
}

void check_triton_args(const TritonCubin& cubin, const TritonArgs& args) {
  RETAIN_CHECK(args.names() == cubin.params, "Triton kernel ", cubin.kernel,
               ": the launcher passes (", args.names(), ") but the cubin was compiled with (",
               cubin.params, "); its launcher in kernels/ and kernels/triton/ disagree");
}

void log_triton_fallback(const std::string& what, const std::string& why, const char* instead) {
  static std::mutex mutex;
  static std::set<std::string> logged;
  const std::string line =
      str_cat(what, ": Triton kernels asked for, ", why, "; running ", instead);
  std::lock_guard<std::mutex> lock(mutex);
  if (logged.insert(line).second) log_warn(line);
}

std::vector<at::Tensor> launch_triton_plan(TritonPlan plan, int device) {
  for (auto& launch : plan.launches)
    launch_triton_cubin(*launch.cubin, device, launch.grid_x, launch.grid_y, launch.args);
  return plan.outputs;
}

}  // namespace retain
