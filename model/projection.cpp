#include "model/projection.h"

#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>

namespace retain {

namespace {

// Up to this many input rows (batch x tokens) a product reads W once for few flops: decode steps.
constexpr int64_t kSplitRows = 16;
// Below this many weight bytes per thread the split's overhead outweighs what it saves.
constexpr int64_t kMinBytesPerThread = int64_t{64} << 10;

}  // namespace

bool project_splits(const at::Tensor& x, const at::Tensor& weight) {
  if (!x.is_cpu() || at::GradMode::is_enabled() || (x.requires_grad() || weight.requires_grad()))
    return false;
  const int64_t threads = at::get_num_threads();
  if (threads < 2 || at::in_parallel_region() || weight.dim() != 2 || !weight.is_contiguous())
    return false;
  const int64_t rows = x.numel() / std::max<int64_t>(x.size(-1), 1);
  const int64_t bytes = weight.numel() * static_cast<int64_t>(weight.element_size());
  return rows >= 1 && rows <= kSplitRows && bytes >= threads * kMinBytesPerThread &&
         weight.size(0) >= threads && x.scalar_type() == weight.scalar_type();
  // (A bias must be (out,) of the same dtype, as at::linear requires.)
}

at::Tensor project(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!project_splits(x, weight)) return at::linear(x, weight, bias);
  const int64_t in = weight.size(1), out = weight.size(0);
  auto rows = x.reshape({-1, in});
  // (out, rows): each thread writes a contiguous block of W's rows' products.
  auto product_t = at::empty({out, rows.size(0)}, x.options());
  const auto rows_t = rows.t();
  const int64_t threads = at::get_num_threads();
  const int64_t block = (out + threads - 1) / threads;
  // The pool's threads run with the caller's thread-local state (inference mode, no-grad): an
  // inference tensor may only be written in inference mode.
  const at::ThreadLocalState caller;
  at::parallel_for(0, threads, 1, [&](int64_t begin, int64_t end) {
    at::ThreadLocalStateGuard state(caller);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t first = t * block, count = std::min(block, out - first);
      if (count <= 0) continue;
      auto slice = product_t.narrow(0, first, count);
      // The bias goes into the product (as at::linear's addmm adds it): one rounding, not two.
      if (bias.defined())
        at::addmm_out(slice, bias.narrow(0, first, count).unsqueeze(1),
                      weight.narrow(0, first, count), rows_t);
      else
        at::mm_out(slice, weight.narrow(0, first, count), rows_t);
    }
  });
  auto y = product_t.t().contiguous();  // a no-op for one row
  auto shape = x.sizes().vec();
  shape.back() = out;
  return y.reshape(shape);
}

}  // namespace retain
