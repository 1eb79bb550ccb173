// Chat templates: the Jinja template a model directory carries, rendered by retain's Jinja engine
// (model/jinja) with the context transformers' apply_chat_template builds — the messages (keys
// whose value is None dropped, reasoning aliased under `thinking` and `reasoning_content`),
// `tools`, `documents`, `add_generation_prompt`, the tokenizer's named special tokens (bos_token,
// eos_token, ...) and the caller's extra arguments (enable_thinking) — so a prompt is the text
// apply_chat_template gives, whatever the template (default system prompts, tools, <think>).
// A template using Jinja outside the engine's subset fails naming the construct, the template and
// the line; see docs/chat-templates.md.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/fs.h"
#include "model/jinja/jinja.h"

namespace retain {

struct ChatMessage {
  std::string role;  // system | user | assistant | tool | ...: the template decides what it accepts
  std::string content;
};

struct ChatOptions {
  bool add_generation_prompt = true;
  // false passes enable_thinking=False to the template (retain's --no-thinking), as
  // apply_chat_template(..., enable_thinking=False) does; true passes nothing, as a call without
  // the argument (templates then apply their own default).
  bool enable_thinking = true;
};

class ChatTemplate {
 public:
  // `source`: the Jinja text; `origin`: where it came from, named by errors and logs;
  // `special_tokens`: {"bos_token": "<s>", ...}, the strings the template sees under those names.
  // Throws retain::Error when the text does not parse or uses a statement outside the subset.
  ChatTemplate(const std::string& source, std::string origin,
               nlohmann::ordered_json special_tokens);

  std::string render(const std::vector<ChatMessage>& messages, const ChatOptions& options) const;

  // apply_chat_template(messages, tools=tools, add_generation_prompt=..., **kwargs, tokenize=False)
  // for messages given as JSON (content may be a list of parts; tool_calls, reasoning_content and
  // other keys pass through). `render_options` can fix the clock strftime_now reads.
  std::string render_json(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                          const nlohmann::ordered_json& tools = nullptr,
                          const nlohmann::ordered_json& kwargs = nlohmann::ordered_json::object(),
                          const jinja::RenderOptions& render_options = {}) const;

  const std::string& origin() const { return origin_; }
  const nlohmann::ordered_json& special_tokens() const { return special_tokens_; }

 private:
  std::string origin_;
  nlohmann::ordered_json special_tokens_;
  jinja::Template template_;
};

// The built-in template --chat-template chatml names: plain ChatML, as transformers' former
// default template wrote it.
extern const char* const kChatMLTemplate;

// Whether the model directory carries a chat template (chat_template.jinja, or a non-null
// "chat_template" in tokenizer_config.json).
bool has_chat_template(const fs::path& model_dir);

// The named special tokens apply_chat_template passes to the template, read as transformers reads
// them: bos/eos/unk/sep/pad/cls/mask_token and any other "*_token" string of
// tokenizer_config.json, its "extra_special_tokens" when a dict, and (for configs without
// added_tokens_decoder) special_tokens_map.json over them. Values may be strings or AddedToken
// objects ({"content": ...}).
nlohmann::ordered_json load_special_tokens(const fs::path& model_dir);

// The model directory's chat template, as transformers picks it: chat_template.jinja when present,
// else tokenizer_config.json's "chat_template" (a string, or a list of {name, template} whose
// "default" is taken). `override_template` (--chat-template) replaces it: the path of a Jinja
// file, or "chatml" for kChatMLTemplate. Throws when there is no template, or it does not parse.
ChatTemplate load_chat_template(const fs::path& model_dir,
                                const std::string& override_template = "");

}  // namespace retain
