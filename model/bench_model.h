// The base model a benchmark runs on: a HuggingFace directory, or an init-model preset (public
// shapes such as qwen3-4b) with random weights drawn on the target device, so timing a 4B model
// needs no download and no gigabytes written to disk. Shared by `bench decode` and `bench train`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "model/decoder.h"

namespace retain {

struct BenchModelOptions {
  std::string model_dir;            // a HF model directory, or empty for a preset
  std::string preset = "qwen3-4b";  // init-model preset with random weights
  std::string arch;                 // for the tiny/small presets
  std::string device = "auto";      // auto | cpu | cuda | cuda:N
  std::string dtype = "bf16";       // auto | fp32 | bf16 | fp16
  uint64_t seed = 0;                // weights, gates and inputs
  int threads = 0;                  // CPU threads (0: LibTorch's default)

  // "preset qwen3-4b (random weights)" or the directory.
  std::string describe() const;
};

// Sets the thread count, resolves the device and loads or makes the model there.
std::unique_ptr<Decoder> load_bench_model(const BenchModelOptions& options);

}  // namespace retain
