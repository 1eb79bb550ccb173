#include "kernels/fused_ops.h"

#include <ATen/core/grad_mode.h>

#include "core/error.h"
#include "kernels/cuda_launchers.h"
#include "kernels/device_info.h"

namespace retain {

namespace {

bool kernel_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
}

// The kernels have no backward: any input that autograd would differentiate sends the call to
// the composite form.
bool no_grad_wanted(std::initializer_list<const at::Tensor*> inputs) {
  if (!at::GradMode::is_enabled()) return true;
  for (const auto* t : inputs)
    if (t->requires_grad()) return false;
  return true;
}

}  // namespace

bool rms_norm_uses_kernel(const at::Tensor& x, const at::Tensor& weight) {
  return x.is_cuda() && cuda_sources_compiled() && kernel_dtype(x.scalar_type()) &&
         weight.scalar_type() == x.scalar_type() && weight.is_cuda() && x.dim() >= 1 &&
         x.numel() > 0 && weight.dim() == 1 && weight.size(0) == x.size(-1) &&
         no_grad_wanted({&x, &weight});
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (rms_norm_uses_kernel(x, weight)) return rms_norm_cuda(x, weight, eps);
  return rms_norm_reference(x, weight, eps);
}

at::Tensor rms_norm_reference(const at::Tensor& x, const at::Tensor& weight, double eps) {
  auto h = x.to(at::kFloat);
  auto variance = h.pow(2).mean(-1, /*keepdim=*/true);
  h = h * at::rsqrt(variance + eps);
  return weight * h.to(x.scalar_type());
}

bool rope_rotate_uses_kernel(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  return x.is_cuda() && cuda_sources_compiled() && kernel_dtype(x.scalar_type()) && x.dim() == 4 &&
         x.size(3) % 2 == 0 && x.numel() > 0 && cos.scalar_type() == x.scalar_type() &&
         sin.scalar_type() == x.scalar_type() && cos.dim() == 3 && cos.sizes() == sin.sizes() &&
         cos.size(0) == x.size(0) && cos.size(1) == x.size(2) && cos.size(2) == x.size(3) &&
         no_grad_wanted({&x, &cos, &sin});
}

at::Tensor rope_rotate(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  if (rope_rotate_uses_kernel(x, cos, sin)) return rope_rotate_cuda(x, cos, sin);
  return rope_rotate_reference(x, cos, sin);
}

at::Tensor rope_rotate_reference(const at::Tensor& x, const at::Tensor& cos,
                                 const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  auto rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos.unsqueeze(1) + rotated * sin.unsqueeze(1);
}

}  // namespace retain
