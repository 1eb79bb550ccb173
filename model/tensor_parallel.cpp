#include "model/tensor_parallel.h"

#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>

#include "dist/collectives.h"

namespace retain {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// The group travels through the autograd context as an address (saved_data holds IValues only);
// the decoder that owns it outlives every backward pass through its layers.
Collectives& group_of(AutogradContext* ctx) {
  return *reinterpret_cast<Collectives*>(ctx->saved_data["group"].toInt());
}
int64_t address_of(Collectives& group) { return reinterpret_cast<int64_t>(&group); }

struct EnterFunction : public torch::autograd::Function<EnterFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, int64_t group) {
    ctx->saved_data["group"] = group;
    return input.view_as(input);
  }
  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto grad = grads[0].contiguous().clone();
    group_of(ctx).all_reduce_sum(grad);
    return {grad, at::Tensor()};
  }
};

struct ReduceFunction : public torch::autograd::Function<ReduceFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& partial, int64_t group) {
    ctx->saved_data["group"] = group;
    auto sum = partial.contiguous().clone();
    group_of(ctx).all_reduce_sum(sum);
    return sum;
  }
  static tensor_list backward(AutogradContext*, tensor_list grads) {
    return {grads[0], at::Tensor()};
  }
};

}  // namespace

at::Tensor tensor_parallel_enter(Collectives& group, const at::Tensor& input) {
  if (group.world() == 1 || !at::GradMode::is_enabled() || !input.requires_grad()) return input;
  return EnterFunction::apply(input, address_of(group));
}

at::Tensor tensor_parallel_reduce(Collectives& group, const at::Tensor& partial) {
  if (group.world() == 1) return partial;
  if (!at::GradMode::is_enabled() || !partial.requires_grad()) {
    auto sum = partial.contiguous();
    group.all_reduce_sum(sum);
    return sum;
  }
  return ReduceFunction::apply(partial, address_of(group));
}

}  // namespace retain
