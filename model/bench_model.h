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
  // --tp N: the model's heads split over N ranks started by a launcher (WORLD_SIZE == N), one
  // GPU each; every figure a rank measures is its own (weights, KV, memory), rank 0 prints.
  int tensor_parallel = 1;

  // "preset qwen3-4b (random weights)" or the directory.
  std::string describe() const;
};

// Sets the thread count, resolves the device and loads or makes the model there. With --tp N,
// joins the run's ranks first and sets `world` to all of them (null for one process).
std::unique_ptr<Decoder> load_bench_model(const BenchModelOptions& options,
                                          std::shared_ptr<Collectives>* world = nullptr);

}  // namespace retain
