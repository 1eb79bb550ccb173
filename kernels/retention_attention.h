// Retention attention: softmax attention with the additive retention bias of TrimKV/DBTrimKV,
//   s_ij = q_i . k_j * scale + (pos_i - pos_j) * log_beta_j     for j <= i in the same document,
// so key j's weight decays as beta_j^(i - j). Causal, GQA (query head h uses KV head h / G),
// packed documents (segment ids; -1 marks padding), gradients for q, k, v and log_beta.
//
// retention_attention / retention_sum run fused GPU kernels when the inputs are on a GPU and the
// kernels support them (fp32/bf16/fp16, head dim 64 or 128, fp32 log beta, CUDA sources
// compiled): the WMMA kernels of retention_attention.cu or the Triton kernels of kernels/triton/
// (RetentionKernels below). Otherwise the exact ATen references below: flash-style blocks
// with an online softmax, O(T) memory (no T x T tensor beyond one block), and recomputation in
// the backward pass. The references run on CPU and CUDA and stay callable for the tests.
//
// Shapes: B batch, H query heads, Hk KV heads, G = H / Hk, T tokens, D head dim.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

namespace retain {

struct RetentionAttentionOptions {
  double scale = 0;       // 0: 1 / sqrt(D)
  int64_t block_q = 128;  // query rows per block
  int64_t block_k = 128;  // key columns per block
};

// q: (B, H, T, D); k, v: (B, Hk, T, D); log_beta: (B, Hk, T) fp32 (<= 0);
// positions: (B, T) int64, the token's position inside its document; segments: (B, T) int64.
// Returns (B, H, T, D) in q's dtype. Differentiable in q, k, v, log_beta.
at::Tensor retention_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const at::Tensor& log_beta, const at::Tensor& positions,
                               const at::Tensor& segments,
                               const RetentionAttentionOptions& options = {});

// The ATen reference, whatever the device.
at::Tensor retention_attention_reference(const at::Tensor& q, const at::Tensor& k,
                                         const at::Tensor& v, const at::Tensor& log_beta,
                                         const at::Tensor& positions, const at::Tensor& segments,
                                         const RetentionAttentionOptions& options = {});

// Which implementation retention_attention and retention_sum run on a GPU, process-wide:
//   wmma       the CUDA kernels of retention_attention.cu (WMMA tensor cores; the default until
//              the Triton kernels are measured on a GPU);
//   triton     the Triton kernels (kernels/triton/, cubins embedded in the binary); inputs they do
//              not cover (fp32, other head dims, a GPU without a cubin) take wmma, with one log
//              line per reason;
//   reference  the ATen references, on every device.
// The environment variable RETAIN_RETENTION_KERNELS sets the starting value; `bench train
// --attention` and `bench kernels` set it for their runs.
enum class RetentionKernels { reference, wmma, triton };
void set_retention_kernels(RetentionKernels kernels);
RetentionKernels retention_kernels();
const char* retention_kernels_name(RetentionKernels kernels);
// "wmma" | "triton" | "reference"; throws naming `what` and the choices otherwise.
RetentionKernels parse_retention_kernels(const std::string& name, const std::string& what);

// The implementation retention_attention runs on these inputs (reference on a CPU).
RetentionKernels retention_attention_path(const at::Tensor& q, const at::Tensor& k,
                                          const at::Tensor& v, const at::Tensor& log_beta);
// Whether retention_attention runs a CUDA kernel (wmma or triton) on these inputs.
bool retention_attention_uses_kernel(const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& log_beta);

// The expected number of live cache entries of each (KV head, token):
//   S_t = sum over i <= t in t's document of beta_i^(pos_t - pos_i) = sum exp((pos_t - pos_i)
//   log_beta_i).
// log_beta: (B, Hk, T) fp32 -> (B, Hk, T) fp32, differentiable in log_beta. Blockwise, O(T) memory.
at::Tensor retention_sum(const at::Tensor& log_beta, const at::Tensor& positions,
                         const at::Tensor& segments, int64_t block = 256);

// The ATen reference of retention_sum, whatever the device; and whether the kernel would run.
at::Tensor retention_sum_reference(const at::Tensor& log_beta, const at::Tensor& positions,
                                   const at::Tensor& segments, int64_t block = 256);
bool retention_sum_uses_kernel(const at::Tensor& log_beta);
RetentionKernels retention_sum_path(const at::Tensor& log_beta);

}  // namespace retain
