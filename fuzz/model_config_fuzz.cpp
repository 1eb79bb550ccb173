// libFuzzer target: config.json. Any bytes either give a model config whose shapes are
// consistent (heads divide, positive sizes), or throw retain::Error.
#include "core/error.h"
#include "core/json.h"
#include "fuzz_util.h"
#include "model/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retain;
  try {
    const Json json = parse_json(fuzz::as_text(data, size), "config.json");
    const ModelConfig c = ModelConfig::from_json(json, "config.json");
    if (c.num_layers <= 0 || c.num_heads <= 0 || c.num_kv_heads <= 0 || c.head_dim <= 0 ||
        c.num_heads % c.num_kv_heads != 0 ||
        static_cast<int64_t>(c.sliding_window.size()) != c.num_layers)
      __builtin_trap();
  } catch (const Error&) {
  }
  return 0;
}
