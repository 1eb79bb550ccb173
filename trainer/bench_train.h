// `retain bench train`: one gate-training step at long context, timed the way the official TrimKV
// recipe runs it (a frozen base; a teacher forward without gates; a student forward with gates;
// forward KL + the global capacity loss; the backward through the frozen activations to the gates;
// AdamW on the gates). Prints tokens/s, model FLOPs utilisation against the device's measured
// matrix-product rate, peak memory, and the time of each phase.
#pragma once

#include <cstdint>
#include <string>

namespace retain {

struct BenchTrainOptions {
  std::string model_dir;            // a HF model directory, or empty for a preset
  std::string preset = "qwen3-4b";  // init-model preset with random weights (made on the device)
  std::string arch;                 // for the tiny/small presets
  std::string device = "auto";
  std::string dtype = "bf16";
  int64_t seq = 8192;  // tokens per sequence (one document)
  int64_t batch = 1;
  std::string gates = "mlp3";  // gate architecture: mlp2 | mlp3
  int64_t gate_width = 512;
  double memory = 1024;              // the capacity loss's budget M
  int64_t logit_block = 1024;        // tokens per LM-head block in the KL
  bool checkpointing = true;         // recompute each student layer in the backward pass
  std::string attention = "kernel";  // kernel | reference (the retention attention path)
  int iters = 5;
  int warmup = 2;
  uint64_t seed = 0;
  int threads = 0;
  bool json = false;
};

// Returns 0; throws retain::Error on bad options.
int run_bench_train_command(const BenchTrainOptions& options);

}  // namespace retain
