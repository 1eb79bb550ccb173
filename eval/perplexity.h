// Perplexity of a token sequence with a sliding window (the evaluation transformers documents):
// windows of max_length tokens advancing by stride; each window scores only the tokens no earlier
// window scored, conditioned on everything in the window before them. With max_length >= the text
// this is exactly the model's mean next-token loss.
#pragma once

#include <cstdint>
#include <vector>

#include "model/decoder.h"

namespace retain {

struct PerplexityOptions {
  int64_t max_length = 0;      // 0: the whole sequence in one window
  int64_t stride = 0;          // 0: equal to max_length (disjoint windows)
  int64_t logit_block = 1024;  // tokens per LM-head block, so no (T, V) fp32 tensor is built
};

struct PerplexityResult {
  double nll = 0;  // mean negative log-likelihood per scored token (nats)
  double ppl = 0;
  int64_t tokens = 0;  // scored tokens
  int64_t windows = 0;
};

PerplexityResult compute_perplexity(const Decoder& model, const std::vector<int64_t>& ids,
                                    const PerplexityOptions& options);

// Perplexity with the KV cache carried along: the text goes through `cache` in chunks of `chunk`
// tokens (an evicting cache evicts after each), every token after the first is scored once, with
// whatever context the cache kept. With the full cache this equals compute_perplexity over one
// window. `scored` (one flag per token of `ids`): only the tokens flagged are scored (e.g. the
// answers of a document, whose prediction needs far context); tokens == 0 when none is.
// `progress`: a progress bar over the tokens.
PerplexityResult compute_streaming_perplexity(const Decoder& model, const std::vector<int64_t>& ids,
                                              KvCache& cache, int64_t chunk,
                                              const std::vector<uint8_t>* scored = nullptr,
                                              bool progress = true);

}  // namespace retain
