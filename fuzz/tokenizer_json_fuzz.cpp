// libFuzzer target: a model directory's tokenizer.json. Any bytes either load as a tokenizer, and
// then encoding text (the input's own bytes: arbitrary, often invalid UTF-8) and decoding any ids
// must not crash, or throw retain::Error.
#include "core/error.h"
#include "fuzz_util.h"
#include "model/tokenizers/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retain;
  fuzz::write_input("tokenizer.json", data, size);
  try {
    HfTokenizer tokenizer(fuzz::scratch_dir());
    const auto ids = tokenizer.encode(fuzz::as_text(data, std::min<size_t>(size, 512)));
    for (int64_t id : ids)
      if (id < 0) __builtin_trap();  // an id the model could be asked to embed
    tokenizer.decode(ids);
    tokenizer.decode(ids, /*skip_special=*/true);
    const int64_t n = tokenizer.vocab_size();
    for (int64_t id : {int64_t{0}, n / 2, n - 1}) {
      if (id < 0) continue;
      tokenizer.id_to_token(id);
      tokenizer.decode({id});
    }
  } catch (const Error&) {
  }
  return 0;
}
