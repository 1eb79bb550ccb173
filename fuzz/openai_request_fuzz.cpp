// libFuzzer target: an OpenAI request body as `retain serve` reads it (serve/openai_request.h),
// for /v1/completions and /v1/chat/completions, and a chat request's messages rendered by two
// templates: ChatML (content used as a string) and one that walks OpenAI's content parts. Every
// input either gives fields within their documented ranges or throws ApiError with an error body
// that can be written out; a template may refuse messages only with retain::Error.
#include <cstdlib>

#include "core/error.h"
#include "fuzz_util.h"
#include "model/chat_template.h"
#include "serve/openai_request.h"

namespace {

// Content as a list of parts, as vision-language templates read it (Qwen2-VL's walks the same
// keys); a string content is written as it is.
const char* const kPartsTemplate =
    "{% for message in messages %}<|{{ message.role }}|>"
    "{% if message.content is string %}{{ message.content }}"
    "{% else %}{% for part in message.content %}"
    "{% if part.type == 'text' %}{{ part.text }}"
    "{% elif part.type == 'image_url' %}<image:{{ part.image_url.url | length }}>"
    "{% endif %}{% endfor %}{% endif %}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retain;
  static const ChatTemplate chatml(kChatMLTemplate, "chatml", nlohmann::ordered_json::object());
  static const ChatTemplate parts(kPartsTemplate, "parts", nlohmann::ordered_json::object());
  const std::string body = fuzz::as_text(data, size);
  for (const bool chat : {false, true}) {
    try {
      const RequestFields f = read_request_fields(body, chat, "m");
      fuzz::require(f.model == "m");
      fuzz::require(f.temperature >= 0 && f.temperature <= 2 && f.top_p > 0 && f.top_p <= 1);
      fuzz::require(f.top_k >= 0 && (!f.max_tokens || *f.max_tokens >= 1));
      fuzz::require(f.stop_strings.size() <= 4);
      for (const auto& s : f.stop_strings) fuzz::require(!s.empty());
      fuzz::require(!f.budget || *f.budget >= 0);
      if (chat) {
        fuzz::require(f.messages.is_array() && !f.messages.empty());
        for (const auto& m : f.messages) fuzz::require(m.is_object() && m["role"].is_string());
        for (const ChatTemplate* t : {&chatml, &parts}) {
          try {
            t->render_json(f.messages, true);
          } catch (const Error&) {
          }
        }
      } else {
        fuzz::require(f.prompt_text.has_value() != !f.prompt_ids.empty());
        for (const int64_t id : f.prompt_ids) fuzz::require(id >= 0);
      }
    } catch (const ApiError& e) {
      fuzz::require(e.status == 400 || e.status == 404);
      error_body(e).dump();  // the server writes it; a message must be valid UTF-8
    }
  }
  return 0;
}
