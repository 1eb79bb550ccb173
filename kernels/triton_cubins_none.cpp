// The cubin table of a build without the Triton kernels (no CUDA sources, or no triton in the
// build's Python): empty, so every dispatcher keeps the other paths.
#include "kernels/triton_cubins.h"

namespace retain {

std::span<const TritonCubin> triton_cubins() { return {}; }

}  // namespace retain
