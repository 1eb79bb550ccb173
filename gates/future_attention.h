// What the learned scorers regress: for every key j of a layer, the most attention a query pays
// it, Locret's causal importance score (and, in log, KVzip's reduction, which KVzap regresses).
// With A_h[i, j] the softmax over the keys j' <= i of i's document of q_i.k_j' / sqrt(D) for query
// head h: the max over the queries i >= j of j's document and over the KV head's query group of
// A_h[i, j]. (A sum over the queries was tried for kvzap: it grows with the number of later
// queries, so a scorer that sees one token at a time learns position, and kept only the earliest
// entries: 1-4% exact match on the demo where the max gives 9-21%.)
// Computed over blocks of queries (memory B H block T, never T x T), in fp32, without grad.
// Shapes: q (B, H, T, D), k (B, Hk, T, D); segments (B, T) the document of each token, -1 padding
// (packed documents are contiguous, in order). Result (B, Hk, T); padding keys get 0.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace retain {

at::Tensor future_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& segments,
                            int64_t block = 128);

}  // namespace retain
