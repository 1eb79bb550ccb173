#include "serve/openai_request.h"

#include <algorithm>
#include <cstdio>

#include "core/utf8.h"

namespace retain {

namespace {

// Parsed once, keeping the body's key order (the messages go to the template in it).
using Body = nlohmann::ordered_json;

ApiError bad(const std::string& param, const std::string& message) {
  return ApiError(400, message, param);
}

// The deepest nesting of arrays and objects in a JSON text (strings skipped), counted only up to
// `limit` + 1: a body is refused on it before parsing, since a parsed value that deep would be
// written out (dump, error messages) by recursion, one stack frame a level.
size_t nesting_depth(const std::string& text, size_t limit) {
  size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size() && deepest <= limit; ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

// body[key] when present and not null.
const Body* field(const Body& body, const std::string& key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number(const Body& body, const std::string& key, double fallback, double low, double high) {
  const Body* v = field(body, key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) throw bad(key, "'" + key + "' must be a number, found " + v->dump());
  const double x = v->get<double>();
  if (x < low || x > high)
    throw bad(key, "'" + key + "' must be in [" + std::to_string(low) + ", " +
                       std::to_string(high) + "], found " + v->dump());
  return x;
}

std::optional<int64_t> integer(const Body& body, const std::string& key, int64_t low) {
  const Body* v = field(body, key);
  if (v == nullptr) return std::nullopt;
  // An unsigned value above INT64_MAX would wrap to a negative one.
  if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX))
    throw bad(key, "'" + key + "' must be an integer, found " + v->dump());
  const auto x = v->get<int64_t>();
  if (x < low)
    throw bad(key, "'" + key + "' must be >= " + std::to_string(low) + ", found " + v->dump());
  return x;
}

bool boolean(const Body& body, const std::string& key, bool fallback) {
  const Body* v = field(body, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) throw bad(key, "'" + key + "' must be true or false, found " + v->dump());
  return v->get<bool>();
}

// Fields OpenAI defines that this server cannot honour: refused, so no client believes they took
// effect. A value equal to the default is fine.
void refuse_unsupported(const Body& body) {
  if (integer(body, "n", 1).value_or(1) != 1) throw bad("n", "only n = 1 is supported");
  if (integer(body, "best_of", 1).value_or(1) != 1)
    throw bad("best_of", "only best_of = 1 is supported");
  for (const char* key : {"logprobs", "top_logprobs", "echo", "tools", "functions", "suffix",
                          "response_format", "logit_bias"}) {
    const Body* v = field(body, key);
    if (v != nullptr && !(v->is_boolean() && !v->get<bool>()))
      throw bad(key, std::string("'") + key + "' is not supported by retain serve");
  }
  for (const char* key : {"presence_penalty", "frequency_penalty"})
    if (number(body, key, 0, -2, 2) != 0)
      throw bad(key, std::string("'") + key + "' is not supported by retain serve (use 0)");
}

std::vector<std::string> stop_strings(const Body& body) {
  const Body* v = field(body, "stop");
  if (v == nullptr) return {};
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const auto& s : *v) {
      if (!s.is_string()) throw bad("stop", "'stop' must hold strings, found " + s.dump());
      out.push_back(s.get<std::string>());
    }
  } else {
    throw bad("stop", "'stop' must be a string or a list of strings, found " + v->dump());
  }
  if (out.size() > 4) throw bad("stop", "'stop' holds at most 4 strings");
  for (const auto& s : out)
    if (s.empty()) throw bad("stop", "'stop' strings must not be empty");
  return out;
}

void completion_prompt(const Body& body, RequestFields& r) {
  const Body* v = field(body, "prompt");
  if (v == nullptr) throw bad("prompt", "'prompt' is required");
  if (v->is_string()) {
    r.prompt_text = v->get<std::string>();
  } else if (v->is_array() && !v->empty() && v->front().is_number_integer()) {
    for (const auto& id : *v) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0)
        throw bad("prompt", "'prompt' token ids must be integers >= 0, found " + id.dump());
      r.prompt_ids.push_back(id.get<int64_t>());
    }
  } else if (v->is_array() && v->size() == 1 && v->front().is_string()) {
    r.prompt_text = v->front().get<std::string>();
  } else {
    throw bad("prompt",
              "'prompt' must be a string, a list of one string, or a list of token ids (one "
              "prompt per request)");
  }
}

void chat_messages(const Body& body, RequestFields& r) {
  const Body* v = field(body, "messages");
  if (v == nullptr || !v->is_array() || v->empty())
    throw bad("messages", "'messages' must be a non-empty list of {role, content}");
  for (const auto& m : *v)
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw bad("messages", "each message needs a string 'role', found " + m.dump());
  r.messages = *v;
}

}  // namespace

Json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.what()},
            {"type", e.type},
            {"param", e.param.empty() ? Json(nullptr) : Json(e.param)},
            {"code", e.code.empty() ? Json(nullptr) : Json(e.code)}}}};
}

RequestFields read_request_fields(const std::string& text, bool chat,
                                  const std::string& served_model) {
  // Checked before parsing, so the error names the byte and no message quotes an invalid byte.
  if (const size_t at = find_invalid_utf8(text); at != std::string::npos) {
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[at]));
    throw ApiError(400, "the request body is not valid UTF-8: byte " + std::string(byte) +
                            " at offset " + std::to_string(at) + " starts no valid character");
  }
  if (nesting_depth(text, kMaxJsonNesting) > kMaxJsonNesting)
    throw ApiError(400, "the request body nests arrays and objects deeper than " +
                            std::to_string(kMaxJsonNesting) + " levels");
  Body body;
  try {
    body = Body::parse(text);
  } catch (const std::exception& e) {
    // The parser's message quotes what it last read: cut (a long string token would be quoted
    // whole) and made valid UTF-8 (it may end inside a character).
    const std::string reason = e.what();
    throw ApiError(400, "the request body is not valid JSON: " + valid_utf8(reason.substr(0, 300)) +
                            (reason.size() > 300 ? "..." : ""));
  }
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  const Body* model = field(body, "model");
  if (model == nullptr || !model->is_string()) throw bad("model", "'model' is required");
  if (model->get<std::string>() != served_model)
    throw ApiError(404,
                   "the model '" + model->get<std::string>() +
                       "' does not exist; this server serves '" + served_model + "'",
                   "model", "invalid_request_error", "model_not_found");
  refuse_unsupported(body);

  RequestFields r;
  r.model = model->get<std::string>();
  if (chat)
    chat_messages(body, r);
  else
    completion_prompt(body, r);
  if (chat && field(body, "max_completion_tokens")) r.max_tokens_key = "max_completion_tokens";
  r.max_tokens = integer(body, r.max_tokens_key, 1);
  r.temperature = number(body, "temperature", 1.0, 0, 2);
  r.top_p = number(body, "top_p", 1.0, 0, 1);
  if (r.top_p <= 0) throw bad("top_p", "'top_p' must be in (0, 1]");
  r.top_k = integer(body, "top_k", 0).value_or(0);
  if (const Body* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) throw bad("seed", "'seed' must be an integer");
    // Negative seeds (OpenAI allows them) wrap to their two's complement, as before.
    r.seed = seed->is_number_unsigned() ? seed->get<uint64_t>()
                                        : static_cast<uint64_t>(seed->get<int64_t>());
  }
  r.stop_strings = stop_strings(body);
  r.ignore_eos = boolean(body, "ignore_eos", false);
  r.skip_special = boolean(body, "skip_special_tokens", true);
  r.stream = boolean(body, "stream", false);
  if (const Body* options = field(body, "stream_options")) {
    if (!options->is_object()) throw bad("stream_options", "'stream_options' must be an object");
    r.include_usage = boolean(*options, "include_usage", false);
  }
  if (const Body* p = field(body, "policy")) {
    if (!p->is_string()) throw bad("policy", "'policy' must be a string like \"snapkv:window=16\"");
    r.policy = p->get<std::string>();
  }
  if (field(body, "budget") != nullptr) r.budget = number(body, "budget", 0, 0, 1e12);
  return r;
}

}  // namespace retain
