// What one forward pass of the decoder runs with beside its token ids: the KV cache (and whatever
// policy sits behind it), a layer hook, activation checkpointing and a vision-language prompt's
// inputs. Its own header so that callers (generation, the trainer's hooks, vision/) name a call's
// context without the decoder's class.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "model/kv_cache.h"
#include "model/layer_hook.h"

namespace retain {

// What a vision-language model's decoder takes beside the token ids of one call (a prompt, a
// chunk of it, or a decode step). Text-only calls leave it null.
struct MultimodalInputs {
  // (3, B, T) int64: the temporal/height/width rotary positions of this call's tokens
  // (model/vision/mrope.h). Undefined: every axis is the token's position + rope_delta.
  at::Tensor rope_positions;
  at::Tensor rope_delta;  // (B, 1) int64, used when rope_positions is undefined
  // (B, T) bool: the image tokens; their embeddings are replaced by visual_embeds' rows in
  // row-major order, and DeepStack's levels are added to them after the first decoder layers.
  at::Tensor visual_mask;
  at::Tensor visual_embeds;           // (n, d)
  std::vector<at::Tensor> deepstack;  // Qwen3-VL: one (n, d) per level
};

// What a forward pass runs with, beyond the tokens. With a hook, the hook computes every layer's
// attention (and the cache is not used); `checkpoint_layers` recomputes each layer in the backward
// pass instead of keeping its activations (training).
struct ForwardContext {
  KvCache* cache = nullptr;
  LayerHook* hook = nullptr;
  bool checkpoint_layers = false;
  // The caller has checked that every token id is in the vocabulary: forward skips its own check,
  // a device-to-host read that a CUDA graph capture cannot contain (model/decode_graph.h).
  bool ids_checked = false;
  const MultimodalInputs* multimodal = nullptr;
};

}  // namespace retain
