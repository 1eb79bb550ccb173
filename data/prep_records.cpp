#include "data/prep_records.h"

#include <algorithm>

#include "core/base64.h"
#include "core/error.h"

namespace retain {

namespace {

// An image item's bytes: a path (relative to the JSONL file's directory) or a data: URI with
// base64 content.
std::vector<uint8_t> image_item_bytes(const std::string& value, const fs::path& base,
                                      const std::string& where) {
  if (value.starts_with("data:")) {
    const size_t comma = value.find(',');
    RETAIN_CHECK(comma != std::string::npos && value.substr(0, comma).ends_with(";base64"), where,
                 ": an inline image must be a data:<type>;base64,<data> URI");
    std::string error;
    auto bytes = decode_base64(std::string_view(value).substr(comma + 1), &error);
    RETAIN_CHECK(bytes.has_value(), where, ": the inline image's base64 is invalid (", error, ")");
    return std::move(*bytes);
  }
  const fs::path path = fs::path(value).is_absolute() ? fs::path(value) : base / value;
  RETAIN_CHECK(fs::is_regular_file(path), where, ": image ", path.string(), " does not exist");
  const std::string text = read_text_file(path);
  return {text.begin(), text.end()};
}

// A message's content: a string, or a list of {"type": "text", "text"} and {"type": "image",
// "image": path | data URI} items (transformers' chat format), each image written as
// `image_placeholder` in place.
std::string message_content(const Json& content, const fs::path& base, const std::string& where,
                            const std::string& image_placeholder,
                            std::vector<std::vector<uint8_t>>& images) {
  if (content.is_string()) return content.get<std::string>();
  RETAIN_CHECK(content.is_array(), where,
               ": a message's content must be a string or a list of text and image items");
  std::string text;
  for (const auto& item : content) {
    const std::string type = json_get<std::string>(item, "type", where);
    if (type == "text") {
      text += json_get<std::string>(item, "text", where);
    } else if (type == "image") {
      images.push_back(image_item_bytes(json_get<std::string>(item, "image", where), base, where));
      text += image_placeholder;
    } else {
      fail(where, ": content item of type '", type, "' (expected text or image)");
    }
  }
  return text;
}

}  // namespace

ChatLine read_chat_line(const Json& line, const fs::path& base, const std::string& where,
                        const std::string& image_placeholder) {
  RETAIN_CHECK(line.is_object() && line.contains("messages") && line["messages"].is_array(), where,
               ": expected {\"messages\": [...]}");
  ChatLine chat;
  for (const auto& m : line["messages"]) {
    RETAIN_CHECK(m.is_object() && m.contains("content"), where,
                 ": every message needs a role and a content");
    chat.messages.push_back(
        {json_get<std::string>(m, "role", where),
         message_content(m["content"], base, where, image_placeholder, chat.images)});
  }
  RETAIN_CHECK(!chat.messages.empty(), where, ": empty conversation");
  return chat;
}

ChatTokens chat_tokens(const std::vector<ChatMessage>& messages, const ChatTemplate& tmpl,
                       const Tokenizer& tokenizer) {
  ChatOptions closed;
  closed.add_generation_prompt = false;
  ChatTokens out;
  out.ids = tokenizer.encode(tmpl.render(messages, closed));
  out.mask.assign(out.ids.size(), 0);
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != "assistant") continue;
    std::vector<ChatMessage> before(messages.begin(), messages.begin() + static_cast<long>(i));
    std::vector<ChatMessage> through(messages.begin(), messages.begin() + static_cast<long>(i) + 1);
    const size_t begin = tokenizer.encode(tmpl.render(before, ChatOptions{})).size();
    const size_t end =
        std::min(out.ids.size(), tokenizer.encode(tmpl.render(through, closed)).size());
    for (size_t k = begin; k < end; ++k) out.mask[k] = 1;
  }
  return out;
}

}  // namespace retain
