// Activation checkpointing: run `fn` without keeping its intermediate activations and recompute
// it in the backward pass. Gradients flow to `input` and to every tensor `fn` uses that requires
// grad (parameters it captures), as with PyTorch's reentrant torch.utils.checkpoint. `fn` must be
// deterministic (no dropout), which holds for every model here, and must not capture references
// to locals that die before the backward pass.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <vector>

namespace retain {

using CheckpointFn = std::function<std::vector<at::Tensor>(const at::Tensor&)>;

// Several outputs (e.g. a layer's output plus values a hook computed inside it).
std::vector<at::Tensor> checkpoint(const CheckpointFn& fn, const at::Tensor& input);

at::Tensor checkpoint(const std::function<at::Tensor(const at::Tensor&)>& fn,
                      const at::Tensor& input);

}  // namespace retain
