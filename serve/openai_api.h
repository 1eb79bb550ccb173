// The OpenAI API's request and response bodies for /v1/completions and /v1/chat/completions:
// requests checked and turned into engine requests (errors name the field, as OpenAI's do), and
// responses, streamed chunks and error bodies in OpenAI's shapes.
//
// Supported request fields: model, prompt (a string or token ids) or messages, max_tokens
// (max_completion_tokens), temperature, top_p, seed, stop (a string or up to 4), stream,
// stream_options.include_usage, n (1), vLLM's skip_special_tokens (true: the reply's text shows
// no special token; the end-of-turn token that stopped it is never shown), and retain's own:
// top_k, policy, budget, ignore_eos.
// Fields this server cannot honour (n > 1, logprobs, echo, best_of > 1, tools, ...) are refused
// rather than ignored.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "eval/sweep.h"
#include "model/chat_template.h"
#include "serve/engine.h"
#include "serve/openai_request.h"

namespace retain {

// What requests are checked against and encoded with.
struct ApiContext {
  const EvalModel* loaded = nullptr;  // the model, tokenizer and learned files
  std::string model_name;             // the id /v1/models lists and requests must name
  std::shared_ptr<const ChatTemplate> chat_template;  // null: /v1/chat/completions refuses
  bool no_thinking = false;
  std::string policy = "full";  // the server's --policy and --budget, a request's default
  double budget = 0;
  bool request_policies = true;   // whether a request may choose its own policy and budget
  std::vector<int64_t> stop_ids;  // EOS ids (config.json's and the tokenizer's)
  int64_t context_length = 0;     // prompt + max_tokens may not exceed it (0: no bound)
  int64_t default_max_tokens = 256;
};

struct ApiRequest {
  ServeRequest engine;
  bool chat = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
  bool skip_special = true;    // skip_special_tokens (vLLM's field): special tokens not shown
  std::string id;              // cmpl-... / chatcmpl-...
  int64_t created = 0;         // unix seconds
};

// The body's fields read (serve/openai_request.h), then what needs the model checked: the prompt
// encoded, token ids in the vocabulary, the context length, the policy and its learned files.
// Throws ApiError (400 for bad fields, a body that is not UTF-8 or nests too deep, 404 for an
// unknown model).
ApiRequest parse_api_request(const std::string& body, const ApiContext& context, bool chat);

// The whole response once generation ended.
Json completion_response(const ApiRequest& request, const ApiContext& context,
                         const std::string& text, const std::string& finish_reason,
                         int64_t completion_tokens);
// One streamed chunk: a text delta, and the finish reason on the last one (empty: none yet).
Json stream_chunk(const ApiRequest& request, const ApiContext& context, const std::string& delta,
                  const std::string& finish_reason, bool first);
// The usage-only last chunk (stream_options.include_usage).
Json usage_chunk(const ApiRequest& request, const ApiContext& context, int64_t completion_tokens);

// The text to show of the answer's text so far (cut before any stop string), and how much of it
// is safe to send while generation goes on: not a possible start of a stop string, not a partial
// UTF-8 character. `text` comes from an IncrementalDetokenizer while streaming (decoding the
// whole answer at every token made streaming quadratic), from one decode at the end otherwise.
struct StreamText {
  std::string text;
  size_t stable = 0;
};
StreamText stream_text(const std::string& text, const std::vector<std::string>& stop_strings,
                       bool finished);

}  // namespace retain
