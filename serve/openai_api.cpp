#include "serve/openai_api.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

#include "core/utf8.h"
#include "eval/cache_factory.h"
#include "model/generate.h"

namespace retain {

namespace {

std::string random_id(const std::string& prefix) {
  static thread_local std::mt19937_64 engine{std::random_device{}()};
  static const char* digits = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string id = prefix;
  for (int i = 0; i < 24; ++i) id += digits[engine() % 36];
  return id;
}

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
const Json* field(const Json& body, const std::string& key) {
  auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

double number(const Json& body, const std::string& key, double fallback, double low, double high) {
  const Json* v = field(body, key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) throw bad(key, "'" + key + "' must be a number, found " + v->dump());
  const double x = v->get<double>();
  if (x < low || x > high)
    throw bad(key, "'" + key + "' must be in [" + std::to_string(low) + ", " +
                       std::to_string(high) + "], found " + v->dump());
  return x;
}

int64_t integer(const Json& body, const std::string& key, int64_t fallback, int64_t low) {
  const Json* v = field(body, key);
  if (v == nullptr) return fallback;
  if (!v->is_number_integer())
    throw bad(key, "'" + key + "' must be an integer, found " + v->dump());
  const auto x = v->get<int64_t>();
  if (x < low)
    throw bad(key, "'" + key + "' must be >= " + std::to_string(low) + ", found " + v->dump());
  return x;
}

bool boolean(const Json& body, const std::string& key, bool fallback) {
  const Json* v = field(body, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) throw bad(key, "'" + key + "' must be true or false, found " + v->dump());
  return v->get<bool>();
}

// Fields OpenAI defines that this server cannot honour: refused, so no client believes they took
// effect. A value equal to the default is fine.
void refuse_unsupported(const Json& body) {
  if (integer(body, "n", 1, 1) != 1) throw bad("n", "only n = 1 is supported");
  if (integer(body, "best_of", 1, 1) != 1) throw bad("best_of", "only best_of = 1 is supported");
  for (const char* key : {"logprobs", "top_logprobs", "echo", "tools", "functions", "suffix",
                          "response_format", "logit_bias"}) {
    const Json* v = field(body, key);
    if (v != nullptr && !(v->is_boolean() && !v->get<bool>()))
      throw bad(key, std::string("'") + key + "' is not supported by retain serve");
  }
  for (const char* key : {"presence_penalty", "frequency_penalty"})
    if (number(body, key, 0, -2, 2) != 0)
      throw bad(key, std::string("'") + key + "' is not supported by retain serve (use 0)");
}

std::vector<std::string> stop_strings(const Json& body) {
  const Json* v = field(body, "stop");
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

std::vector<int64_t> completion_prompt(const Json& body, const ApiContext& context) {
  const Json* v = field(body, "prompt");
  if (v == nullptr) throw bad("prompt", "'prompt' is required");
  const Tokenizer& tokenizer = *context.loaded->tokenizer;
  if (v->is_string()) return tokenizer.encode_prompt(v->get<std::string>());
  if (v->is_array() && !v->empty() && v->front().is_number_integer()) {
    std::vector<int64_t> ids;
    const int64_t vocab = context.loaded->model->config().vocab_size;
    for (const auto& id : *v) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab)
        throw bad("prompt", "'prompt' token ids must be integers in [0, " + std::to_string(vocab) +
                                "), found " + id.dump());
      ids.push_back(id.get<int64_t>());
    }
    return ids;
  }
  if (v->is_array() && v->size() == 1 && v->front().is_string())
    return tokenizer.encode_prompt(v->front().get<std::string>());
  throw bad("prompt",
            "'prompt' must be a string, a list of one string, or a list of token ids (one prompt "
            "per request)");
}

// `text`: the request body as sent; the messages go to the template in their keys' order, as
// transformers hands its dicts (a parsed Json sorts keys).
std::vector<int64_t> chat_prompt(const Json& body, const std::string& text,
                                 const ApiContext& context) {
  if (!context.chat_template)
    throw bad("messages",
              "this model has no chat template: start the server with --chat-template FILE|chatml, "
              "or use /v1/completions");
  const Json* v = field(body, "messages");
  if (v == nullptr || !v->is_array() || v->empty())
    throw bad("messages", "'messages' must be a non-empty list of {role, content}");
  for (const auto& m : *v)
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw bad("messages", "each message needs a string 'role', found " + m.dump());
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  if (context.no_thinking) kwargs["enable_thinking"] = false;
  std::string rendered;
  try {
    rendered = context.chat_template->render_json(nlohmann::ordered_json::parse(text)["messages"],
                                                  true, nullptr, kwargs);
  } catch (const std::exception& e) {
    throw bad("messages", std::string("the chat template refused the messages: ") + e.what());
  }
  // The template writes BOS itself where the model has one.
  return context.loaded->tokenizer->encode(rendered);
}

}  // namespace

Json error_body(const ApiError& e) {
  return {{"error",
           {{"message", e.what()},
            {"type", e.type},
            {"param", e.param.empty() ? Json(nullptr) : Json(e.param)},
            {"code", e.code.empty() ? Json(nullptr) : Json(e.code)}}}};
}

ApiRequest parse_api_request(const std::string& text, const ApiContext& context, bool chat) {
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
  Json body;
  try {
    body = Json::parse(text);
  } catch (const std::exception& e) {
    throw ApiError(400, std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  const Json* model = field(body, "model");
  if (model == nullptr || !model->is_string()) throw bad("model", "'model' is required");
  if (model->get<std::string>() != context.model_name)
    throw ApiError(404,
                   "the model '" + model->get<std::string>() +
                       "' does not exist; this server "
                       "serves '" +
                       context.model_name + "'",
                   "model", "invalid_request_error", "model_not_found");
  refuse_unsupported(body);

  ApiRequest r;
  r.chat = chat;
  r.id = random_id(chat ? "chatcmpl-" : "cmpl-");
  r.created = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  ServeRequest& e = r.engine;
  e.prompt = chat ? chat_prompt(body, text, context) : completion_prompt(body, context);
  if (e.prompt.empty()) throw bad(chat ? "messages" : "prompt", "the prompt has no tokens");
  const char* max_key =
      chat && field(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  const auto prompt_tokens = static_cast<int64_t>(e.prompt.size());
  // Without max_tokens: the server's default, or what the context leaves when that is less.
  int64_t fallback = context.default_max_tokens;
  if (context.context_length > 0)
    fallback = std::max<int64_t>(1, std::min(fallback, context.context_length - prompt_tokens));
  e.max_new_tokens = integer(body, max_key, fallback, 1);
  if (context.context_length > 0 && prompt_tokens + e.max_new_tokens > context.context_length)
    throw ApiError(
        400,
        "this model's maximum context length is " + std::to_string(context.context_length) +
            " tokens; the request asks for " + std::to_string(prompt_tokens + e.max_new_tokens) +
            " (" + std::to_string(prompt_tokens) + " in the prompt, " +
            std::to_string(e.max_new_tokens) + " to generate)",
        chat ? "messages" : "prompt", "invalid_request_error", "context_length_exceeded");
  // OpenAI's default temperature is 1 (sampling); 0 is greedy.
  e.temperature = number(body, "temperature", 1.0, 0, 2);
  e.top_p = number(body, "top_p", 1.0, 0, 1);
  if (e.top_p <= 0) throw bad("top_p", "'top_p' must be in (0, 1]");
  e.top_k = integer(body, "top_k", 0, 0);
  if (const Json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) throw bad("seed", "'seed' must be an integer");
    e.seed = static_cast<uint64_t>(seed->get<int64_t>());
  } else {
    e.seed = std::random_device{}();
  }
  e.stop_strings = stop_strings(body);
  if (!boolean(body, "ignore_eos", false)) e.stop_ids = context.stop_ids;
  r.skip_special = boolean(body, "skip_special_tokens", true);
  r.stream = boolean(body, "stream", false);
  if (const Json* options = field(body, "stream_options")) {
    if (!options->is_object()) throw bad("stream_options", "'stream_options' must be an object");
    r.include_usage = boolean(*options, "include_usage", false);
  }

  // The eviction policy: the server's, or the request's own where the server allows it. A request
  // names no files: its learned policies use the gates and scorers the server loaded.
  std::string policy = context.policy;
  double budget = context.budget;
  if (const Json* p = field(body, "policy")) {
    if (!context.request_policies)
      throw bad("policy", "this server fixes the policy (started with --fixed-policy)");
    if (!p->is_string()) throw bad("policy", "'policy' must be a string like \"snapkv:window=16\"");
    policy = p->get<std::string>();
  }
  if (field(body, "budget") != nullptr) {
    if (!context.request_policies)
      throw bad("budget", "this server fixes the budget (started with --fixed-policy)");
    budget = number(body, "budget", 0, 0, 1e12);
  }
  try {
    e.policy = parse_policy(policy);
  } catch (const std::exception& err) {
    throw bad("policy", err.what());
  }
  if (e.policy.text != context.policy && (!e.policy.gates().empty() || !e.policy.scorer().empty()))
    throw bad("policy",
              "a request cannot name gate or scorer files; use the server's --policy, or a policy "
              "that reads --gates");
  try {
    e.learned = context.loaded->learned_for(e.policy);
  } catch (const std::exception&) {
    throw bad("policy", "the server has no learned files for --policy " + policy);
  }
  if (e.policy.budgeted()) {
    if (budget <= 0)
      throw bad("budget", "policy " + e.policy.name() +
                              " needs a budget: entries per KV head (>= 1) or a fraction of "
                              "the prompt (< 1)");
    if (e.policy.needs_gates() && e.learned.gates == nullptr)
      throw bad("policy",
                "policy " + e.policy.name() + " needs gates: start the server with --gates");
    if (e.policy.needs_scorer() && e.learned.scorer == nullptr)
      throw bad("policy", "policy " + e.policy.name() +
                              " needs its scorer: start the server with "
                              "--policy " +
                              e.policy.name() + ":scorer=FILE");
    if (resolve_budget(budget, prompt_tokens) < 1)
      throw bad("budget", "budget " + std::to_string(budget) + " leaves no entry of a " +
                              std::to_string(prompt_tokens) + "-token prompt");
  }
  e.budget = budget;
  return r;
}

namespace {

Json usage(const ApiRequest& r, int64_t completion_tokens) {
  const auto prompt = static_cast<int64_t>(r.engine.prompt.size());
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt + completion_tokens}};
}

Json finish(const std::string& reason) { return reason.empty() ? Json(nullptr) : Json(reason); }

}  // namespace

Json completion_response(const ApiRequest& r, const ApiContext& context, const std::string& text,
                         const std::string& finish_reason, int64_t completion_tokens) {
  Json choice = {{"index", 0}, {"finish_reason", finish(finish_reason)}, {"logprobs", nullptr}};
  if (r.chat)
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  else
    choice["text"] = text;
  return {{"id", r.id},
          {"object", r.chat ? "chat.completion" : "text_completion"},
          {"created", r.created},
          {"model", context.model_name},
          {"choices", Json::array({choice})},
          {"usage", usage(r, completion_tokens)}};
}

Json stream_chunk(const ApiRequest& r, const ApiContext& context, const std::string& delta,
                  const std::string& finish_reason, bool first) {
  Json choice = {{"index", 0}, {"finish_reason", finish(finish_reason)}, {"logprobs", nullptr}};
  if (r.chat) {
    choice["delta"] = Json::object();
    if (first) choice["delta"]["role"] = "assistant";
    if (!delta.empty() || first) choice["delta"]["content"] = delta;
  } else {
    choice["text"] = delta;
  }
  Json chunk = {{"id", r.id},
                {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
                {"created", r.created},
                {"model", context.model_name},
                {"choices", Json::array({choice})}};
  if (r.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

Json usage_chunk(const ApiRequest& r, const ApiContext& context, int64_t completion_tokens) {
  return {{"id", r.id},
          {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", r.created},
          {"model", context.model_name},
          {"choices", Json::array()},
          {"usage", usage(r, completion_tokens)}};
}

StreamText stream_text(const std::string& text, const std::vector<std::string>& stop_strings,
                       bool finished) {
  StreamText out;
  out.text = cut_at_stop(text, stop_strings);
  out.stable = out.text.size();
  if (finished) return out;
  // A tail that could still become a stop string waits.
  size_t hold = 0;
  for (const auto& stop : stop_strings)
    for (size_t n = std::min(stop.size() - 1, out.text.size()); n > hold; --n)
      if (out.text.compare(out.text.size() - n, n, stop, 0, n) == 0) {
        hold = n;
        break;
      }
  out.stable -= hold;
  // An incomplete UTF-8 character decodes to U+FFFD until its last byte comes.
  static const std::string kReplacement = "\xEF\xBF\xBD";
  while (out.stable >= kReplacement.size() &&
         out.text.compare(out.stable - kReplacement.size(), kReplacement.size(), kReplacement) == 0)
    out.stable -= kReplacement.size();
  return out;
}

}  // namespace retain
