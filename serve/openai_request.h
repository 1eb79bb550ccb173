// The OpenAI request body read into checked fields, before any model is involved: what a client
// sends is validated here (UTF-8, nesting, JSON, every field's type and range, unsupported fields
// refused), free of LibTorch so that the fuzzer (fuzz/openai_request_fuzz.cpp) builds it alone.
// serve/openai_api.cpp then encodes the prompt and checks what needs the model (vocabulary,
// context length, policy and learned files).
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/json.h"

namespace retain {

// An error answered to the client: HTTP status, OpenAI's error type, the offending field.
struct ApiError : std::runtime_error {
  ApiError(int status, const std::string& message, std::string param = "",
           std::string type = "invalid_request_error", std::string code = "")
      : std::runtime_error(message),
        status(status),
        param(std::move(param)),
        type(std::move(type)),
        code(std::move(code)) {}
  int status;
  std::string param, type, code;
};

Json error_body(const ApiError& error);

// The deepest JSON nesting a request body may have (OpenAI's bodies need about 6).
constexpr size_t kMaxJsonNesting = 64;

// A request's fields, each checked for its type and range.
struct RequestFields {
  std::string model;
  // The prompt: /v1/completions' text or token ids (>= 0; the vocabulary bound needs the model),
  // or /v1/chat/completions' messages in the body's key order (as transformers hands its dicts
  // to the template; a parsed Json would sort them), each an object with a string role.
  std::optional<std::string> prompt_text;
  std::vector<int64_t> prompt_ids;
  nlohmann::ordered_json messages;
  std::optional<int64_t> max_tokens;  // >= 1; max_completion_tokens for chat when given
  std::string max_tokens_key = "max_tokens";
  double temperature = 1.0;  // OpenAI's default is 1 (sampling); 0 is greedy
  double top_p = 1.0;        // (0, 1]
  int64_t top_k = 0;         // 0: off
  std::optional<uint64_t> seed;
  std::vector<std::string> stop_strings;  // at most 4, none empty
  bool ignore_eos = false;
  bool skip_special = true;  // skip_special_tokens (vLLM's field): special tokens not shown
  bool stream = false;
  bool include_usage = false;         // stream_options.include_usage
  std::optional<std::string> policy;  // retain's own: a policy spec and budget for this request
  std::optional<double> budget;       // >= 0
};

// Throws ApiError: 400 for a body that is not UTF-8 (naming the byte offset), nests deeper than
// kMaxJsonNesting, is not a JSON object, or has a bad field (named as `param`); 404 when `model`
// is not `served_model`.
RequestFields read_request_fields(const std::string& body, bool chat,
                                  const std::string& served_model);

}  // namespace retain
