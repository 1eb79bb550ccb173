#include "gates/named_parameters.h"

#include <ATen/core/grad_mode.h>

#include "core/error.h"

namespace retain {

std::vector<at::Tensor> tensors_of(const NamedTensors& named) {
  std::vector<at::Tensor> out;
  for (const auto& [name, t] : named) out.push_back(t);
  return out;
}

void load_named(NamedTensors& params, const NamedTensors& source, const std::string& where,
                const std::string& what, const std::string& owner) {
  at::NoGradGuard no_grad;
  for (auto& [name, p] : params) {
    const at::Tensor* src = nullptr;
    for (const auto& [n, t] : source)
      if (n == name) src = &t;
    RETAIN_CHECK(src != nullptr, where, ": missing ", what, " tensor '", name, "'");
    RETAIN_CHECK(src->sizes() == p.sizes(), where, ": ", what, " tensor '", name, "' has shape ",
                 src->sizes(), " but ", owner, " ", p.sizes());
    p.copy_(*src);
  }
  RETAIN_CHECK(source.size() == params.size(), where, ": holds ", source.size(), " ", what,
               " tensors, expected ", params.size());
}

}  // namespace retain
