// Megatron-style tensor parallelism of the decoder's projections (Shoeybi et al., 2019): q/k/v and
// gate/up are column-parallel (each rank computes its heads' / rows' outputs from the replicated
// input), o_proj and down_proj row-parallel (each rank multiplies its slice of the input and the
// partial products are summed over the group). Two conjugate operators keep autograd exact:
//   enter  (Megatron's f): identity forward; backward sums the input gradient over the group (each
//          rank only saw its own heads' share of it);
//   reduce (Megatron's g): sums the partial outputs over the group forward; identity backward
//          (every rank already holds the whole, replicated gradient).
// Without grad, enter is a no-op and reduce one in-place all-reduce.
#pragma once

#include <ATen/ATen.h>

namespace retain {

class Collectives;

at::Tensor tensor_parallel_enter(Collectives& group, const at::Tensor& input);
at::Tensor tensor_parallel_reduce(Collectives& group, const at::Tensor& partial);

}  // namespace retain
