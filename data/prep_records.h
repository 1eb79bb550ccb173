// `retain prep`'s input lines read, free of LibTorch (the fuzzer, fuzz/prep_records_fuzz.cpp,
// builds them alone): a chat line's messages and image bytes, and a conversation's tokens with
// the assistant-only mask. data/prep.cpp turns them into shard documents (images decoded and
// expanded to their patch counts there).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/json.h"
#include "model/chat_template.h"
#include "model/tokenizers/tokenizer.h"

namespace retain {

struct ChatLine {
  std::vector<ChatMessage> messages;
  std::vector<std::vector<uint8_t>> images;  // in the order of their placeholders
};

// {"messages": [{"role": str, "content": str | [{"type": "text", "text": str} |
// {"type": "image", "image": a path relative to `base` | a data:<type>;base64,<data> URI}]}]}:
// each image item written as `image_placeholder` in its message's text. Errors name `where`.
ChatLine read_chat_line(const Json& line, const fs::path& base, const std::string& where,
                        const std::string& image_placeholder);

// The conversation's ids with a mask of its assistant turns. Each assistant turn's tokens are
// found by rendering the conversation up to the turn (with the generation prompt) and through the
// turn; the templates put special tokens at turn boundaries, so the prefixes tokenize stably.
struct ChatTokens {
  std::vector<int64_t> ids;
  std::vector<uint8_t> mask;
};
ChatTokens chat_tokens(const std::vector<ChatMessage>& messages, const ChatTemplate& tmpl,
                       const Tokenizer& tokenizer);

}  // namespace retain
