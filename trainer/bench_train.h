// `retain bench train`: one gate-training step at long context, the trainer's own (the gates'
// Trainable of trainer/trainable.h with loss.base [fwkl], loss.capacity global, loss.weight 1), as
// the official TrimKV recipe runs it: a frozen base; a student forward with gates; a teacher
// forward without; forward KL + the global capacity loss; the backward through the frozen
// activations to the gates; AdamW on the gates. Prints tokens/s, model FLOPs utilisation against
// the device's measured matrix-product rate, peak memory, and the time of each phase.
#pragma once

#include <cstdint>
#include <string>

#include "model/bench_model.h"

namespace retain {

struct BenchTrainOptions {
  BenchModelOptions model;
  int64_t seq = 8192;  // tokens per sequence (one document)
  int64_t batch = 1;
  std::string gates = "mlp3";  // gate architecture: mlp2 | mlp3
  int64_t gate_width = 512;
  double memory = 1024;            // the capacity loss's budget M
  int64_t logit_block = 1024;      // tokens per LM-head block in the KL
  bool checkpointing = true;       // recompute each student layer in the backward pass
  std::string attention = "wmma";  // wmma | triton | reference (RetentionKernels)
  int iters = 5;
  int warmup = 2;
  bool json = false;
};

// Returns 0; throws retain::Error on bad options.
int run_bench_train_command(const BenchTrainOptions& options);

}  // namespace retain
