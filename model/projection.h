// The decoder's projections, x W^T + b as at::linear computes it, with one CPU fast path: a
// decode step multiplies a few rows by every weight matrix, which is bound by reading the weights
// from memory, and MKL runs such a matrix-vector product on one thread (measured on the 2-core
// machine: 10.7 GB/s on one thread or two; 20.2 GB/s with the rows split over two). Without grad,
// on the CPU, for at most kSplitRows input rows, the output features are split into one
// contiguous block of W's rows per intra-op thread, each block a product of its own. Each output
// is the same dot product at::linear takes (MKL's kernel on fewer rows of W): results agree to
// the last bits, not necessarily in them.
#pragma once

#include <ATen/ATen.h>

namespace retain {

at::Tensor project(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias = {});

// Whether project() splits this product over the threads.
bool project_splits(const at::Tensor& x, const at::Tensor& weight);

}  // namespace retain
