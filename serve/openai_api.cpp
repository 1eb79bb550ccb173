#include "serve/openai_api.h"

#include <algorithm>
#include <chrono>
#include <random>

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

std::vector<int64_t> completion_prompt(const RequestFields& f, const ApiContext& context) {
  const Tokenizer& tokenizer = *context.loaded->tokenizer;
  if (f.prompt_text) return tokenizer.encode_prompt(*f.prompt_text);
  const int64_t vocab = context.loaded->model->config().vocab_size;
  for (const int64_t id : f.prompt_ids)
    if (id >= vocab)
      throw bad("prompt", "'prompt' token ids must be integers in [0, " + std::to_string(vocab) +
                              "), found " + std::to_string(id));
  return f.prompt_ids;
}

std::vector<int64_t> chat_prompt(const RequestFields& f, const ApiContext& context) {
  if (!context.chat_template)
    throw bad("messages",
              "this model has no chat template: start the server with --chat-template FILE|chatml, "
              "or use /v1/completions");
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  if (context.no_thinking) kwargs["enable_thinking"] = false;
  std::string rendered;
  try {
    rendered = context.chat_template->render_json(f.messages, true, nullptr, kwargs);
  } catch (const std::exception& e) {
    throw bad("messages", std::string("the chat template refused the messages: ") + e.what());
  }
  // The template writes BOS itself where the model has one.
  return context.loaded->tokenizer->encode(rendered);
}

}  // namespace

ApiRequest parse_api_request(const std::string& text, const ApiContext& context, bool chat) {
  const RequestFields f = read_request_fields(text, chat, context.model_name);
  ApiRequest r;
  r.chat = chat;
  r.id = random_id(chat ? "chatcmpl-" : "cmpl-");
  r.created = std::chrono::duration_cast<std::chrono::seconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  ServeRequest& e = r.engine;
  e.prompt = chat ? chat_prompt(f, context) : completion_prompt(f, context);
  if (e.prompt.empty()) throw bad(chat ? "messages" : "prompt", "the prompt has no tokens");
  const auto prompt_tokens = static_cast<int64_t>(e.prompt.size());
  // Without max_tokens: the server's default, or what the context leaves when that is less.
  int64_t fallback = context.default_max_tokens;
  if (context.context_length > 0)
    fallback = std::max<int64_t>(1, std::min(fallback, context.context_length - prompt_tokens));
  e.max_new_tokens = f.max_tokens.value_or(fallback);
  if (context.context_length > 0 && prompt_tokens + e.max_new_tokens > context.context_length)
    throw ApiError(
        400,
        "this model's maximum context length is " + std::to_string(context.context_length) +
            " tokens; the request asks for " + std::to_string(prompt_tokens + e.max_new_tokens) +
            " (" + std::to_string(prompt_tokens) + " in the prompt, " +
            std::to_string(e.max_new_tokens) + " to generate)",
        chat ? "messages" : "prompt", "invalid_request_error", "context_length_exceeded");
  e.temperature = f.temperature;
  e.top_p = f.top_p;
  e.top_k = f.top_k;
  e.seed = f.seed.value_or(std::random_device{}());
  e.stop_strings = f.stop_strings;
  if (!f.ignore_eos) e.stop_ids = context.stop_ids;
  r.skip_special = f.skip_special;
  r.stream = f.stream;
  r.include_usage = f.include_usage;

  // The eviction policy: the server's, or the request's own where the server allows it. A request
  // names no files: its learned policies use the gates and scorers the server loaded.
  if ((f.policy || f.budget) && !context.request_policies)
    throw bad(f.policy ? "policy" : "budget", std::string("this server fixes the ") +
                                                  (f.policy ? "policy" : "budget") +
                                                  " (started with --fixed-policy)");
  const std::string policy = f.policy.value_or(context.policy);
  const double budget = f.budget.value_or(context.budget);
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
