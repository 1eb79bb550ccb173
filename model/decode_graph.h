// Decode steps as a replayed CUDA graph. Eager decode launches every kernel of every layer from
// the host each step (tens of microseconds each, over a thousand per step for a 36-layer model),
// so a small batch is bound by the host, not by the GPU's memory bandwidth. A cache in static
// decode (KvCache::begin_static_decode) keeps its buffers, shapes and device-side state fixed
// between steps, so one step is captured once and replayed: the host then launches one graph per
// token. The cache says when its buffers moved (end_static_step), and the step is captured again.
//
// Shapes: B sequences, V vocabulary.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>

#include "model/decoder.h"
#include "model/kv_cache.h"

namespace retain {

class DecodeGraph {
 public:
  // Whether this build and the model's device can replay decode steps as CUDA graphs (CUDA
  // device, CUDA graphs compiled in, and no host-dependent RoPE: dynamic NTK reads the longest
  // position back every step).
  static bool available(const Decoder& model);

  // `cache` must already be in static decode; both must outlive this object.
  DecodeGraph(const Decoder& model, KvCache& cache, int64_t batch);
  ~DecodeGraph();
  DecodeGraph(const DecodeGraph&) = delete;
  DecodeGraph& operator=(const DecodeGraph&) = delete;

  // One decode step: tokens and positions (B, 1) int64 (ids already known to be in the
  // vocabulary, e.g. the model's own argmax) -> logits (B, V) fp32 on the device, valid until the
  // next step. Also runs the cache's end_static_step.
  at::Tensor step(const at::Tensor& tokens, const at::Tensor& positions);

  // The cache's buffers moved between steps (a continuous batch loaded a row into a widened
  // buffer): the next step is captured again.
  void recapture();

  int64_t captures() const;  // how many times a step was captured
  int64_t replays() const;   // how many steps ran as a graph replay

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace retain
