// `retain bench decode`: long-context batched generation under an eviction policy, timed the way
// the TrimKV paper reports it (Qwen3-4B, 32k-token prompts, budget M = 1024 entries per KV head,
// batch 4, 1024 new tokens; 130 tokens/s with HF transformers on an H200). Prints prefill and
// decode throughput, ms per decode step, live/peak KV bytes, and a roofline line: the bytes one
// decode step must read (weights + live KV) at the device's measured copy bandwidth, over the
// measured step time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "eval/policies/policy_registry.h"
#include "gates/gate_bank.h"
#include "model/bench_model.h"

namespace retain {

struct BenchDecodeOptions {
  BenchModelOptions model;
  int64_t context = 32768;  // prompt tokens per sequence
  double budget = 1024;     // entries per KV head (>= 1) or a fraction of the prompt
  int64_t batch = 4;
  int64_t new_tokens = 1024;
  std::string policy = "dbtrimkv";  // any eviction policy spec; trimkv/dbtrimkv get random gates
  int64_t chunk = 512;              // prefill chunk (the eager attention is chunk x cache wide)
  std::string decode = "auto";      // auto (CUDA graphs where possible) | eager | static
  // A JSON array of prompts (token id arrays of one length) instead of random ones: sets batch
  // and context. The peers' driver (scripts/peers/bench_decode.py) times the same ids.
  std::string prompts_file;
  bool json = false;  // one JSON object instead of the table
};

// Learned-gate policies get random gates of the right architecture (null for the others): the
// work per step is the same as with trained ones (speed, not quality, is measured).
std::unique_ptr<GateBank> make_bench_gates(const PolicySpec& policy, const ModelConfig& config,
                                           c10::Device device, uint64_t seed);

// Returns 0; throws retain::Error on bad options.
int run_bench_decode_command(const BenchDecodeOptions& options);

}  // namespace retain
