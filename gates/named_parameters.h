// What GateBank and ScorerBank share: their trainable tensors by name, and loading them from a
// file's tensors.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

namespace retain {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// The tensors of `named`, in order.
std::vector<at::Tensor> tensors_of(const NamedTensors& named);

// Copies every tensor of `params` in place from the one of the same name in `source` (read from
// `where`); a missing name, another shape or extra tensors are errors naming the file and `what`
// ("gate" or "scorer") and `owner` (what needs them: "this model's gates").
void load_named(NamedTensors& params, const NamedTensors& source, const std::string& where,
                const std::string& what, const std::string& owner);

}  // namespace retain
