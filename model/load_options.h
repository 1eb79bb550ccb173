// How a model is loaded: dtype, device, tensor parallelism and projection fusion. Its own header so
// that the vision tower (model/vision/) and the decoder load with the same options without
// including each other.
#pragma once

#include <ATen/ATen.h>

#include <memory>

namespace retain {

class Collectives;  // dist/collectives.h

struct LoadOptions {
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::kCPU;
  // Tensor parallelism (model/tensor_parallel.h): this process loads only its slice of every
  // projection (q/k/v and gate/up rows, o/down columns), straight from the safetensors, and the
  // group sums the row-parallel products. Embeddings, norms, the LM head and a vision tower are
  // replicated. Null: the whole model.
  std::shared_ptr<Collectives> tensor_parallel = nullptr;
  // q/k/v and gate/up weights concatenated at load, so a layer runs two products where it ran
  // five (each output is the same dot product; MKL and cuBLAS may sum it in another order, so the
  // logits agree to rounding, not bit for bit). The separate names stay, as views of the fused
  // tensors: nothing is held twice. The weights are frozen (retain trains gates and scorers on a
  // frozen model), so no gradient needs the separate tensors.
  bool fuse_projections = true;
};

}  // namespace retain
