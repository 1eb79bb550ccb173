// `retain bench serve`: the serving engine under concurrency next to `retain generate` run on the
// same requests one after another (the baseline). Closed loop: `concurrency` clients each send a
// request, wait for its end and send the next, until `requests` were served. Prompt and answer
// lengths vary by request (seeded, from half to one and a half times the given ones). Prints
// throughput, request latency, time to first token and inter-token latency of both, their ratio,
// and whether every greedy answer equals the baseline's.
#pragma once

#include <cstdint>
#include <string>

#include "model/bench_model.h"

namespace retain {

struct BenchServeOptions {
  BenchModelOptions model;
  int64_t requests = 32;
  int64_t concurrency = 8;
  int64_t prompt_tokens = 256;    // the mean prompt length
  int64_t new_tokens = 64;        // the mean max_tokens
  std::string policy = "snapkv";  // trimkv / dbtrimkv get random gates
  double budget = 64;
  int64_t chunk = 256;
  int64_t max_batch = 16;
  std::string kv_memory = "0";
  std::string decode = "auto";  // the engine's static decode rows: auto | eager | static
  bool json = false;
};

int run_bench_serve_command(const BenchServeOptions& options);

}  // namespace retain
