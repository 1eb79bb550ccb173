// libFuzzer target: a synthetic task file (retain synth's heldout.jsonl, read by
// `eval synthetic --data`). Every line either becomes an example whose answers are in its
// document, or throws retain::Error naming the line.
#include <sstream>

#include "core/error.h"
#include "core/json.h"
#include "data/synthetic.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retain;
  std::istringstream in(fuzz::as_text(data, size));
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    try {
      const SyntheticExample ex = synthetic_from_json(parse_json(line, "tasks.jsonl"), "line");
      for (size_t t = 0; t < ex.turns.size(); ++t) synthetic_prompt(ex, t);
    } catch (const Error&) {
    }
  }
  return 0;
}
