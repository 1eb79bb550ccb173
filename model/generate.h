// Autoregressive generation for one prompt through any KvCache: prefill, then one token per step,
// greedy (temperature 0) or sampled with temperature, top-k and nucleus (top-p) filtering.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/decoder.h"
#include "model/kv_cache.h"
#include "model/tokenizers/incremental_detokenizer.h"

namespace retain {

struct MultimodalPrompt;  // model/vision/multimodal_prompt.h

// How decode steps run. kAuto: as CUDA graphs when the model is on a GPU and the cache supports
// static decode (model/decode_graph.h), else eagerly. kEager: one launch per kernel, shapes
// following the cache (the reference). kStatic: static decode even without graphs (on the CPU:
// the same steps eagerly, which tests compare with kEager).
enum class DecodeMode { kAuto, kEager, kStatic };

// "auto" | "eager" | "static"; anything else is an error naming the choices.
DecodeMode parse_decode_mode(const std::string& name);

struct SamplingOptions {
  int64_t max_new_tokens = 64;
  double temperature = 0.0;  // 0 = greedy
  double top_p = 1.0;
  int64_t top_k = 0;  // 0: off
  uint64_t seed = 0;
  std::vector<int64_t> stop_ids;  // generation ends after emitting one of these
  int64_t prefill_chunk = 0;      // prefill in chunks of this many tokens (0: one forward)
  int64_t start_position = 0;  // position of the prompt's first token (a cache that already holds
                               // earlier turns continues counting)
  // Generation also ends once the decoded new text contains one of these (`detokenize` turns ids
  // into text, a few tokens at a time: IncrementalDetokenizer); callers cut the text before the
  // stop string (cut_at_stop).
  std::vector<std::string> stop_strings;
  TextDecoder detokenize;
  DecodeMode decode = DecodeMode::kAuto;
};

struct GenerationResult {
  std::vector<int64_t> tokens;  // new tokens only (a stop token included)
  std::string finish_reason;    // "stop" or "length"
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  std::string decode_mode;  // how the steps ran: "eager", "static" or "cuda-graph"
  // The most cache entries one generating query (the prompt's last token, then every decoded
  // token) read in one KV head, and in all layers and heads together; -1 where the cache does not
  // record it.
  int64_t max_attended_entries = -1;
  int64_t max_attended_total = -1;
};

GenerationResult generate(const Decoder& model, const std::vector<int64_t>& prompt, KvCache& cache,
                          const SamplingOptions& options);

// What one row of a batch may set apart from the batch's SamplingOptions (an evaluation batch
// mixes examples with different answer lengths, stop ids and, after a compressed context, first
// positions).
struct RowOptions {
  int64_t start_position = 0;           // the row's first prompt token's position
  int64_t max_new_tokens = -1;          // -1: the options' max_new_tokens
  std::vector<int64_t> extra_stop_ids;  // stop ids added to the options' for this row
  // A vision-language prompt (model/vision/multimodal_prompt.h): the row's prompt must be its
  // `ids`. CUDA-graph decode is off for a batch that has one (the rotary offset varies by row).
  std::shared_ptr<const MultimodalPrompt> multimodal;
  // A sampled row's own generator, seeded with this; without it the row draws from the batch's
  // (seeded with the options' seed, drawn row by row), so what it samples depends on its batch.
  // With it a row samples what it samples alone, whatever batch it is in (up to the rounding of
  // batched products).
  std::optional<uint64_t> seed;
};

// Several prompts of different lengths at once: left-padded (padding at position -1, masked), one
// forward per step for the whole batch; each row stops on its own. `rows` is empty (every row
// takes the options' start_position) or holds one entry per prompt. The prompts are read in
// chunks counted back from their end (see prefill_batch), so each row is read in exactly the
// chunks it would be read in alone and a batch generates what each row generates alone (up to
// the rounding of batched matrix products).
std::vector<GenerationResult> generate_batch(const Decoder& model,
                                             const std::vector<std::vector<int64_t>>& prompts,
                                             KvCache& cache, const SamplingOptions& options,
                                             const std::vector<RowOptions>& rows = {});

// `text` up to the first of `stop_strings` (all of it when none occurs).
std::string cut_at_stop(const std::string& text, const std::vector<std::string>& stop_strings);

// Whether `token` is one of `stop_ids`: the EOS or end-of-turn token that ended generation, which
// a reply never shows as text (OpenAI's and vLLM's replies do not; `reply_text`).
bool is_stop_token(int64_t token, const std::vector<int64_t>& stop_ids);

// The text a reader is shown of generated `tokens`, as OpenAI's and vLLM's replies are: a last
// token that is one of `stop_ids` is never shown, whatever `skip_special` says; other special
// tokens are skipped unless `skip_special` is false (vLLM's skip_special_tokens, true by default:
// the text transformers' decode(..., skip_special_tokens=True) gives); the text is cut before the
// first of `stop_strings`. Tokens the tokenizer does not mark special (Qwen3's <think>) stay.
std::string reply_text(const Tokenizer& tokenizer, const std::vector<int64_t>& tokens,
                       const std::vector<int64_t>& stop_ids,
                       const std::vector<std::string>& stop_strings, bool skip_special = true);

// Runs `ids` at positions start, start + 1, ... through the model into `cache` in chunks of
// `chunk` tokens (0: one forward) and returns the last token's hidden state (1, d).
at::Tensor prefill(const Decoder& model, const std::vector<int64_t>& ids, KvCache& cache,
                   int64_t start, int64_t chunk);

// Several rows at once, left-padded: row r's tokens at positions starts[r], starts[r] + 1, ...
// (an empty row is all padding). Chunks are counted back from the end, where every row ends: the
// first chunk is the partial one, so a row is cut at the same tokens as alone and an evicting
// cache sees the same steps. Returns each row's last hidden state (B, d).
at::Tensor prefill_batch(const Decoder& model, const std::vector<std::vector<int64_t>>& rows,
                         KvCache& cache, const std::vector<int64_t>& starts, int64_t chunk);

// Picks the next token from logits (V,): argmax when temperature == 0, else a sample from
// softmax(logits / temperature) restricted, as transformers' and vLLM's samplers do, to the top_k
// most likely tokens (0: all; equal probabilities keep the lower id first, so top_k 1 is the
// argmax), then, renormalised over those, to the smallest set whose probability reaches top_p
// (the most likely token always stays). The filtering runs on the logits' device and only the
// kept tokens go to the host, where `generator` draws (a 150k-entry sort on the host at every step
// of a 32k-token generation would cost more than the step).
int64_t sample_next_token(const at::Tensor& logits, const SamplingOptions& options,
                          at::Generator& generator);

}  // namespace retain
