// `retain init-model`: writes a HuggingFace-format model directory with random weights (config.json
// + model.safetensors, and for the tiny/small presets a SentencePiece tokenizer trained on the
// project's own corpus), so tests, benchmarks and recipes never need a download.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"

namespace retain {

struct InitModelOptions {
  std::string arch;    // llama | mistral | qwen2 | qwen3 (may be empty for a named preset)
  std::string preset;  // tiny | small | llama2-7b | llama3-8b | llama3-70b | mistral-7b | qwen2-7b
                       // | qwen3-4b | qwen3-8b
  uint64_t seed = 0;
  std::vector<std::string> sets;     // "key=value" edits of config.json (value parsed as JSON)
  std::optional<std::string> dtype;  // float32 | bfloat16 | float16 (default: the preset's)
  // A SentencePiece tokenizer.model to ship with the model; vocab_size, bos/eos ids follow it
  // (instead of the tokenizer the tiny/small presets train on the project's own corpus).
  std::string tokenizer;
  std::string out;
  bool force = false;  // replace an existing output directory
};

// The config.json of a preset (before --set edits). Throws for unknown arch/preset pairs.
Json preset_config(const std::string& arch, const std::string& preset);
std::vector<std::string> preset_names();

void init_model(const InitModelOptions& options);

}  // namespace retain
