#include "model/chat_template.h"

#include <map>

#include "core/error.h"
#include "core/json.h"

namespace retain {

const char* const kChatMLTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' "
    "}}{% endif %}";

namespace {

using OrderedJson = nlohmann::ordered_json;

// apply_chat_template's message normalisation: keys whose value is None are dropped, and the
// reasoning (reasoning_content, thinking or reasoning, the first present) is passed as both
// `thinking` and `reasoning_content`, in the key order Python's {"thinking": r, **m,
// "reasoning_content": r} gives.
OrderedJson normalise_messages(const OrderedJson& messages, const std::string& where) {
  RETAIN_CHECK(messages.is_array(), where, ": chat messages must be a list");
  OrderedJson out = OrderedJson::array();
  for (const auto& m : messages) {
    RETAIN_CHECK(m.is_object(), where, ": chat messages must be objects, got ", m.dump());
    OrderedJson kept = OrderedJson::object();
    for (const auto& [k, v] : m.items())
      if (!v.is_null()) kept[k] = v;
    const OrderedJson* reasoning = nullptr;
    for (const char* key : {"reasoning_content", "thinking", "reasoning"})
      if (kept.contains(key)) {
        reasoning = &kept[key];
        break;
      }
    if (reasoning == nullptr) {
      out.push_back(std::move(kept));
      continue;
    }
    OrderedJson aliased = OrderedJson::object();
    aliased["thinking"] = *reasoning;
    for (const auto& [k, v] : kept.items()) aliased[k] = v;
    aliased["reasoning_content"] = *reasoning;
    out.push_back(std::move(aliased));
  }
  return out;
}

// A special token's text: a string, or an AddedToken object's "content".
std::optional<std::string> token_text(const Json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return std::nullopt;
}

bool ends_with_token(const std::string& key) {
  static const std::string suffix = "_token";
  return key.size() > suffix.size() &&
         key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void read_named_tokens(const Json& config, std::map<std::string, std::string>& tokens) {
  for (const auto& [k, v] : config.items())
    if (ends_with_token(k))
      if (auto t = token_text(v)) tokens[k] = *t;
  auto extra = config.find("extra_special_tokens");
  if (extra != config.end() && extra->is_object())
    for (const auto& [k, v] : extra->items())
      if (auto t = token_text(v)) tokens[k] = *t;
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, std::string origin,
                           nlohmann::ordered_json special_tokens)
    : origin_(std::move(origin)),
      special_tokens_(std::move(special_tokens)),
      template_(jinja::Template::parse(source, origin_)) {}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                 const ChatOptions& options) const {
  OrderedJson list = OrderedJson::array();
  for (const auto& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  OrderedJson kwargs = OrderedJson::object();
  if (!options.enable_thinking) kwargs["enable_thinking"] = false;
  return render_json(list, options.add_generation_prompt, nullptr, kwargs);
}

std::string ChatTemplate::render_json(const nlohmann::ordered_json& messages,
                                      bool add_generation_prompt,
                                      const nlohmann::ordered_json& tools,
                                      const nlohmann::ordered_json& kwargs,
                                      const jinja::RenderOptions& render_options) const {
  // As render(messages=..., tools=..., documents=None, add_generation_prompt=...,
  // **{**special_tokens, **kwargs}).
  OrderedJson context = OrderedJson::object();
  for (const auto& [k, v] : special_tokens_.items()) context[k] = v;
  for (const auto& [k, v] : kwargs.items()) context[k] = v;
  context["messages"] = normalise_messages(messages, origin_);
  context["tools"] = tools;
  context["documents"] = nullptr;
  context["add_generation_prompt"] = add_generation_prompt;
  return template_.render(context, render_options);
}

bool has_chat_template(const fs::path& model_dir) {
  if (fs::exists(model_dir / "chat_template.jinja")) return true;
  fs::path config_path = model_dir / "tokenizer_config.json";
  if (!fs::exists(config_path)) return false;
  return with_json_errors(config_path.string(), [&] {
    Json c = read_json_file(config_path);
    return c.is_object() && c.contains("chat_template") && !c["chat_template"].is_null();
  });
}

nlohmann::ordered_json load_special_tokens(const fs::path& model_dir) {
  OrderedJson out = OrderedJson::object();
  fs::path config_path = model_dir / "tokenizer_config.json";
  if (!fs::exists(config_path)) return out;
  std::map<std::string, std::string> tokens;
  with_json_errors(config_path.string(), [&] {
    Json c = read_json_file(config_path);
    RETAIN_CHECK(c.is_object(), config_path.string(), ": expected a JSON object");
    read_named_tokens(c, tokens);
    // Configs without added_tokens_decoder are the legacy layout, whose special_tokens_map.json
    // transformers still reads over the config.
    fs::path map_path = model_dir / "special_tokens_map.json";
    if (!c.contains("added_tokens_decoder") && fs::exists(map_path)) {
      Json m = read_json_file(map_path);
      RETAIN_CHECK(m.is_object(), map_path.string(), ": expected a JSON object");
      read_named_tokens(m, tokens);
    }
  });
  for (const auto& [k, v] : tokens) out[k] = v;
  return out;
}

ChatTemplate load_chat_template(const fs::path& model_dir, const std::string& override_template) {
  OrderedJson special = load_special_tokens(model_dir);
  if (!override_template.empty()) {
    if (override_template == "chatml")
      return ChatTemplate(kChatMLTemplate, "the built-in chatml template", special);
    fs::path path(override_template);
    RETAIN_CHECK(fs::is_regular_file(path), "--chat-template '", override_template,
                 "': expected the path of a Jinja chat template file, or 'chatml'; there is no "
                 "such file");
    return ChatTemplate(read_text_file(path), path.string(), special);
  }
  // transformers prefers chat_template.jinja over the config's entry.
  fs::path jinja_path = model_dir / "chat_template.jinja";
  if (fs::exists(jinja_path))
    return ChatTemplate(read_text_file(jinja_path), jinja_path.string(), special);
  fs::path config_path = model_dir / "tokenizer_config.json";
  std::string source;
  bool found = false;
  if (fs::exists(config_path)) {
    with_json_errors(config_path.string(), [&] {
      Json c = read_json_file(config_path);
      auto it = c.find("chat_template");
      if (it == c.end() || it->is_null()) return;
      if (it->is_string()) {
        source = it->get<std::string>();
        found = true;
        return;
      }
      RETAIN_CHECK(it->is_array(), config_path.string(),
                   ": chat_template must be a string or a list of {name, template}, found ",
                   it->type_name());
      std::string names;
      for (const auto& entry : *it) {
        RETAIN_CHECK(entry.is_object(), config_path.string(),
                     ": chat_template list entries must be {name, template} objects");
        std::string name = json_get<std::string>(entry, "name", config_path.string());
        names += (names.empty() ? "" : ", ") + name;
        if (name == "default") {
          source = json_get<std::string>(entry, "template", config_path.string());
          found = true;
        }
      }
      RETAIN_CHECK(found, config_path.string(), ": chat_template lists named templates (", names,
                   ") but none named 'default'; pass --chat-template FILE");
    });
  }
  RETAIN_CHECK(found, model_dir.string(),
               ": no chat template (tokenizer_config.json has no chat_template and there is no "
               "chat_template.jinja); pass --no-chat, or --chat-template FILE|chatml to give one");
  return ChatTemplate(source, config_path.string() + " (chat_template)", special);
}

}  // namespace retain
