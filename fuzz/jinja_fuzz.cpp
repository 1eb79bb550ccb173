// libFuzzer target: Jinja template text. Any bytes either parse and render against a chat-like
// context (messages with a tool call, tools, special tokens), or throw retain::Error; nothing else
// escapes, nothing crashes, and runaway recursion, nesting or output fail cleanly.
#include "core/error.h"
#include "fuzz_util.h"
#include "model/jinja/jinja.h"

namespace {

const nlohmann::ordered_json& context() {
  static const nlohmann::ordered_json c = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Paris? «é» 🙂"},
      {"role": "assistant", "content": "<think>\nhm\n</think>\n\nLet me check.",
       "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                       "arguments": {"city": "Paris", "days": 2, "ratio": 0.5, "x": null}}}]},
      {"role": "tool", "content": "{\"t\": 22}"},
      {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "and this?"}]}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                              "required": ["city"]}}}],
    "documents": null, "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retain;
  try {
    jinja::RenderOptions options;
    options.clock = [] {
      std::tm t{};
      t.tm_year = 124;
      t.tm_mday = 1;
      return t;
    };
    jinja::Template::parse(fuzz::as_text(data, size), "fuzz.jinja").render(context(), options);
  } catch (const Error&) {
  }
  return 0;
}
