// libFuzzer target: tokenizer_config.json and the Jinja chat template it carries. Any bytes either
// give a template that renders a conversation, or throw retain::Error.
#include "core/error.h"
#include "fuzz_util.h"
#include "model/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retain;
  fuzz::write_input("tokenizer_config.json", data, size);
  try {
    if (has_chat_template(fuzz::scratch_dir())) {
      ChatTemplate t = load_chat_template(fuzz::scratch_dir());
      t.render({{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "?"}},
               ChatOptions{});
    }
  } catch (const Error&) {
  }
  return 0;
}
