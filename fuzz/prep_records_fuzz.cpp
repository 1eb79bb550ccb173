// libFuzzer target: `retain prep`'s input lines (JSONL), each read the three ways prep reads one:
// --format chat (messages with text and image items, images as data: URIs or paths), --format
// math (a math row made a conversation first) and --format jsonl --label-spans (a text and its
// answer byte ranges). Conversations are rendered with ChatML and tokenized by a byte-level BPE
// tokenizer (the tokenizer_json fuzzer's seed bytelevel.json); every mask must cover its ids.
// Every line either gives that, or throws retain::Error naming it.
#include <sstream>

#include "core/error.h"
#include "data/answer_spans.h"
#include "data/math_conversation.h"
#include "data/prep_records.h"
#include "fuzz_util.h"
#include "model/tokenizers/hf_tokenizer.h"

namespace {

const retain::Tokenizer& tokenizer() {
  using namespace retain;
  static const HfTokenizer t = [] {
    const fs::path dir = fuzz::scratch_dir() / "tokenizer";
    fs::create_directories(dir);
    fs::copy_file(RETAIN_FUZZ_TOKENIZER_JSON, dir / "tokenizer.json",
                  fs::copy_options::overwrite_existing);
    return HfTokenizer(dir);
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retain;
  static const ChatTemplate chatml(kChatMLTemplate, "chatml", nlohmann::ordered_json::object());
  const fs::path base = fuzz::scratch_dir();  // image paths resolve here (nothing to find)
  std::istringstream in(fuzz::as_text(data, size));
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    Json j;
    try {
      j = parse_json(line, "line");
    } catch (const Error&) {
      continue;
    }
    for (const bool math : {false, true}) {
      try {
        const ChatLine chat = read_chat_line(
            math ? math_conversation(j, kMathInstruction, "line") : j, base, "line", "<image>");
        fuzz::require(!chat.messages.empty());
        const ChatTokens tokens = chat_tokens(chat.messages, chatml, tokenizer());
        fuzz::require(tokens.mask.size() == tokens.ids.size());
      } catch (const Error&) {
      }
    }
    try {
      if (j.is_object() && j.contains("text") && j["text"].is_string() && j.contains("spans")) {
        const std::string text = j["text"].get<std::string>();
        const auto ids = tokenizer().encode_with_special_tokens(text);
        fuzz::require(
            answer_span_mask(text, j["spans"], ids, tokenizer(), "line", "spans").size() ==
            ids.size());
      }
    } catch (const Error&) {
    }
  }
  return 0;
}
