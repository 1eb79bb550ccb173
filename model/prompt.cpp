#include "model/prompt.h"

#include <sstream>

#include "core/error.h"
#include "core/log.h"
#include "model/chat_template.h"

namespace retain {

PromptEncoder::PromptEncoder(const std::string& model_dir, const ChatFlags& flags) : flags_(flags) {
  RETAIN_CHECK(!(flags.chat && flags.no_chat), "--chat and --no-chat exclude each other");
  const bool use_chat =
      flags.chat ||
      (!flags.no_chat && (has_chat_template(model_dir) || !flags.chat_template.empty()));
  if (!use_chat) {
    RETAIN_CHECK(!flags.system, "--system needs the chat template (drop --no-chat)");
    return;
  }
  template_ =
      std::make_shared<const ChatTemplate>(load_chat_template(model_dir, flags.chat_template));
  log_info("chat template ", template_->origin(), " applied");
}

std::vector<int64_t> PromptEncoder::encode(const Tokenizer& tokenizer,
                                           const std::string& text) const {
  if (!template_) return tokenizer.encode_prompt(text);
  std::vector<ChatMessage> messages;
  if (flags_.system) messages.push_back({"system", *flags_.system});
  messages.push_back({"user", text});
  ChatOptions options;
  options.enable_thinking = !flags_.no_thinking;
  // The template writes BOS itself where the model has one.
  return tokenizer.encode(template_->render(messages, options));
}

std::vector<int64_t> prompt_ids(const std::string& model_dir, const Tokenizer& tokenizer,
                                const std::string& text, const ChatFlags& flags) {
  return PromptEncoder(model_dir, flags).encode(tokenizer, text);
}

std::vector<int64_t> parse_id_list(const std::string& text, const std::string& flag) {
  std::vector<int64_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto first = item.find_first_not_of(" \t");
    auto last = item.find_last_not_of(" \t");
    RETAIN_CHECK(first != std::string::npos, flag, ": empty item in '", text, "'");
    item = item.substr(first, last - first + 1);
    size_t used = 0;
    int64_t id = -1;
    try {
      id = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    RETAIN_CHECK(used == item.size() && id >= 0, flag, ": item ", ids.size() + 1, ", '", item,
                 "' is not a non-negative integer; expected comma-separated ids like 1,15043,3186");
    ids.push_back(id);
  }
  RETAIN_CHECK(!ids.empty(), flag, ": no ids given");
  return ids;
}

}  // namespace retain
