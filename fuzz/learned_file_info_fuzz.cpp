// libFuzzer target: a gate or scorer file's header as `eval`, `serve` and `export` read it (the
// safetensors header, then checkpoints/learned_file_info.h on its __metadata__). Every input is
// either refused with retain::Error or gives a configuration within its documented ranges.
#include "checkpoints/learned_file_info.h"
#include "core/error.h"
#include "core/safetensors_header.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retain;
  StHeader header;
  try {
    header = parse_safetensors_header(data, size, "fuzz");
  } catch (const Error&) {
    return 0;
  }
  try {
    const GateFileInfo gate = gate_file_info(header.metadata, "fuzz");
    fuzz::require(gate.config.width >= 1 && gate.config.width <= kMaxLearnedWidth);
    fuzz::require(gate.config.init_std >= 0 && gate.budget >= 0);
  } catch (const Error&) {
  }
  try {
    const ScorerFileInfo scorer = scorer_file_info(header.metadata, "fuzz");
    fuzz::require(scorer.config.width >= 1 && scorer.config.width <= kMaxLearnedWidth);
    fuzz::require(scorer.config.init_std >= 0);
  } catch (const Error&) {
  }
  return 0;
}
