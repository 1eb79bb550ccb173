// Chunked prefill's attention over a KV cache in one launch (kernels/triton/cache_attention.py,
// compiled into the embedded cubins): a chunk of queries reads every entry of its KV head up to
// the head's length, masked by the entries' own positions (0 <= pos_j <= pos_i), with the online
// softmax of FlashAttention-2. ATen's SDPA needs a dense (B, H, T, S) mask for a later chunk,
// which keeps it off its flash kernel (the memory-efficient one runs, with K/V repeated for GQA).
// Same result as model/attention.h's attention without a sliding window, to rounding, for every
// query that sees an entry; a query that sees none (padding) gets zeros (its output is unused).
//
// Shapes: q (B, H, T, D); keys, values (B, Hk, S, D); key positions (B, 1|Hk, S) int64; query
// positions (B, T). Unit stride along D; any other strides.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "kernels/triton_launch.h"

namespace retain {

struct CacheAttentionTensors {
  const at::Tensor& q;
  const at::Tensor& keys;
  const at::Tensor& values;
  const at::Tensor& key_positions;
  const at::Tensor& q_positions;
};

// Which attention a prefill chunk over a cache runs on a GPU: ATen's SDPA with the dense position
// mask (the default until a GPU session has verified the kernel: scripts/gpu-run.sh) or the
// Triton kernel, where it takes the tensors. Process-wide; starts from
// RETAIN_PREFILL_ATTENTION=aten|triton.
enum class PrefillAttention { aten, triton };
PrefillAttention prefill_attention_choice();
void set_prefill_attention(PrefillAttention choice);
// "aten" | "triton"; anything else is refused naming `where`.
PrefillAttention parse_prefill_attention(const std::string& name, const std::string& where);

// Empty when the kernel runs these tensors on their device; otherwise why not (not a GPU, no
// cubin for the arch, dtype or head dim, a layout the kernel does not take).
std::string cache_attention_triton_unsupported(const CacheAttentionTensors& t);

// The launch, planned without a GPU for a device of compute capability `arch` (x 10): the CPU
// tests check its arguments against the cubin's parameters. outputs[0] is the attention
// (B, H, T, D); positions that are not int64 or not 16-byte aligned are copied, and the plan holds
// the copies until the launch is queued.
TritonPlan plan_cache_attention(const CacheAttentionTensors& t, double scale, int arch);

// The attention on the GPU (cache_attention_triton_unsupported(t) must be empty).
at::Tensor cache_attention_triton(const CacheAttentionTensors& t, double scale);

}  // namespace retain
