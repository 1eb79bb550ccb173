// libFuzzer target: a model directory's tokenizer.json, and optionally its tokenizer_config.json
// and config.json (the input's parts after "\n#config#\n" and "\n#model#\n"), which decide the
// class transformers 5 would build and so the pipeline. Any bytes either load as a tokenizer, and
// then encoding text (the input's own bytes: arbitrary, often invalid UTF-8) and decoding any ids
// must not crash, or throw retain::Error.
#include <string_view>

#include "core/error.h"
#include "fuzz_util.h"
#include "model/tokenizers/hf_tokenizer.h"

namespace {

// Writes `part` as `name`, or removes `name` when the input has no such part.
void write_part(const std::string& name, std::string_view part, bool present) {
  using namespace retain;
  if (present)
    fuzz::write_input(name, reinterpret_cast<const uint8_t*>(part.data()), part.size());
  else
    fs::remove(fuzz::scratch_dir() / name);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retain;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kConfig = "\n#config#\n", kModel = "\n#model#\n";
  const size_t config_at = input.find(kConfig), model_at = input.find(kModel);
  // The text after the marker at `at` up to the other marker when that one comes later.
  auto section = [&](size_t at, size_t marker_size, size_t other_at) {
    const size_t begin = at + marker_size;
    return input.substr(begin, other_at > at ? other_at - begin : std::string_view::npos);
  };
  write_part("tokenizer.json", input.substr(0, std::min(config_at, model_at)), true);
  const bool has_config = config_at != std::string_view::npos;
  const bool has_model = model_at != std::string_view::npos;
  write_part("tokenizer_config.json",
             has_config ? section(config_at, kConfig.size(), model_at) : std::string_view(),
             has_config);
  write_part("config.json",
             has_model ? section(model_at, kModel.size(), config_at) : std::string_view(),
             has_model);
  try {
    HfTokenizer tokenizer(fuzz::scratch_dir());
    // The full encoding (model/tokenizer.cpp, which this target does not link, adds the same).
    auto ids = tokenizer.encode(fuzz::as_text(data, std::min<size_t>(size, 512)));
    ids.insert(ids.begin(), tokenizer.prefix_ids().begin(), tokenizer.prefix_ids().end());
    ids.insert(ids.end(), tokenizer.suffix_ids().begin(), tokenizer.suffix_ids().end());
    for (int64_t id : ids)
      if (id < 0) __builtin_trap();  // an id the model could be asked to embed
    tokenizer.decode(ids);
    tokenizer.decode(ids, /*skip_special=*/true);
    tokenizer.explain();
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
