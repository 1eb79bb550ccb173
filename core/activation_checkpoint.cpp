#include "core/activation_checkpoint.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/custom_class.h>

namespace retain {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Carries the function through the autograd context (saved_data holds IValues only).
struct FunctionHolder : torch::CustomClassHolder {
  CheckpointFn fn;
};

struct CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
  // `anchor` is a scalar that requires grad: autograd records this function only when some input
  // does, and the real trainable tensors (parameters captured by fn) are not inputs.
  static tensor_list forward(AutogradContext* ctx, const at::Tensor& input,
                             const at::Tensor& /*anchor*/, CheckpointFn fn) {
    auto holder = c10::make_intrusive<FunctionHolder>();
    holder->fn = std::move(fn);
    tensor_list out;
    {
      at::NoGradGuard no_grad;  // forward() already runs without grad; be explicit
      out = holder->fn(input);
    }
    ctx->saved_data["fn"] = c10::IValue::make_capsule(holder);
    ctx->save_for_backward({input});
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto input = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    auto holder =
        c10::static_intrusive_pointer_cast<FunctionHolder>(ctx->saved_data["fn"].toCapsule());
    tensor_list outs;
    {
      at::AutoGradMode enable(true);
      outs = holder->fn(input);
    }
    tensor_list roots, root_grads;
    for (size_t i = 0; i < outs.size(); ++i) {
      // Outputs no loss used get no gradient; outputs that do not depend on anything trainable
      // cannot propagate one.
      if (!grads[i].defined() || !outs[i].requires_grad()) continue;
      roots.push_back(outs[i]);
      root_grads.push_back(grads[i]);
    }
    // Accumulates into the leaves fn captured (parameters) and into input.grad().
    if (!roots.empty()) torch::autograd::backward(roots, root_grads);
    return {input.grad(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

std::vector<at::Tensor> checkpoint(const CheckpointFn& fn, const at::Tensor& input) {
  static thread_local at::Tensor anchor = at::zeros({}, at::kFloat).requires_grad_(true);
  return CheckpointFunction::apply(input, anchor, fn);
}

at::Tensor checkpoint(const std::function<at::Tensor(const at::Tensor&)>& fn,
                      const at::Tensor& input) {
  return checkpoint(
      CheckpointFn([fn](const at::Tensor& x) { return std::vector<at::Tensor>{fn(x)}; }), input)[0];
}

}  // namespace retain
