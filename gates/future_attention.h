// What the learned scorers regress (issue: learned competitors): for every key j of a layer, the
// attention later queries pay it. With A_h[i, j] the softmax over the keys j' <= i of i's document
// of q_i.k_j' / sqrt(D) for query head h:
//   kMax (Locret's causal importance score): max over the queries i >= j of j's document and over
//        the KV head's query group of A_h[i, j];
//   kSum (the future attention mass KVzap-style scorers regress the log of): sum over i >= j of
//        A_h[i, j], averaged over the group.
// Computed over blocks of queries (memory B H block T, never T x T), in fp32, without grad.
// Shapes: q (B, H, T, D), k (B, Hk, T, D); segments (B, T) the document of each token, -1 padding
// (packed documents are contiguous, in order). Result (B, Hk, T); padding keys get 0.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace retain {

enum class FutureReduce { kMax, kSum };

at::Tensor future_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& segments,
                            FutureReduce reduce, int64_t block = 128);

}  // namespace retain
