// How a user's prompt becomes token ids: raw (BOS + text) or through the model's chat template,
// as the --chat / --no-chat / --chat-template / --system / --no-thinking flags say; and id lists
// typed on a command line.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/tokenizers/tokenizer.h"

namespace retain {

// How a text prompt becomes ids: raw (BOS + text) or through the model's chat template.
struct ChatFlags {
  bool chat = false;          // --chat: always use the template
  bool no_chat = false;       // --no-chat: never (default: use it when the model dir has one)
  std::string chat_template;  // --chat-template FILE|chatml: replaces the model's template
  std::optional<std::string> system;  // --system TEXT: a system message before the prompt
  bool no_thinking = false;           // --no-thinking: qwen3's enable_thinking=false
};

class ChatTemplate;

// Text prompts into ids as the flags say: through the chat template when asked (or when the model
// has one and --no-chat is absent), else BOS + text. The template is read and parsed once, for
// every prompt of a benchmark.
class PromptEncoder {
 public:
  PromptEncoder(const std::string& model_dir, const ChatFlags& flags);
  std::vector<int64_t> encode(const Tokenizer& tokenizer, const std::string& text) const;

 private:
  ChatFlags flags_;
  std::shared_ptr<const ChatTemplate> template_;  // null: raw prompts
};

// One prompt's ids (a PromptEncoder for one text).
std::vector<int64_t> prompt_ids(const std::string& model_dir, const Tokenizer& tokenizer,
                                const std::string& text, const ChatFlags& flags);

// Parses "1,2,3" (spaces allowed); errors name `flag` and the bad item.
std::vector<int64_t> parse_id_list(const std::string& text, const std::string& flag);

}  // namespace retain
