// The layer hook that runs training-time attention over packed sequences through the retention
// attention reference/kernel: with gates (student) the bias is (i - j) log beta_j; without gates
// (teacher, or pretraining a base model) log beta is zero, i.e. plain causal attention with
// document masking.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "gates/gate_bank.h"
#include "model/layer_hook.h"

namespace retain {

class GatedAttentionHook : public LayerHook {
 public:
  // gates == nullptr: plain attention. segments: (B, T) document ids, -1 padding.
  GatedAttentionHook(const GateBank* gates, at::Tensor segments)
      : gates_(gates), segments_(std::move(segments)) {}

  at::Tensor attend(const LayerTensors& t) override;
  std::vector<at::Tensor> layer_outputs(int64_t layer) override;
  void set_layer_outputs(int64_t layer, std::vector<at::Tensor> outputs) override;

  // Per layer, the log beta of the last forward (B, Hk, T), every KV head of the model (also under
  // tensor parallelism, where attention reads this rank's slice); empty without gates.
  const std::vector<at::Tensor>& log_betas() const { return log_betas_; }

 private:
  // Without gates the bias is zero: plain causal attention within each document, which the fused
  // SDPA kernels compute (flash on CPU and CUDA) instead of the retention kernel or its blockwise
  // reference. One document per row at positions 0..T-1: is_causal, no mask. Several documents
  // (or padding) on the CPU with a mask of at most kDenseMaskLimit entries: a boolean
  // block-diagonal causal mask. Otherwise the retention path with log beta 0.
  at::Tensor plain_attention(const LayerTensors& t);
  // 64M entries: the boolean mask, and the float one SDPA makes of it (256 MB in fp32).
  static constexpr int64_t kDenseMaskLimit = int64_t{1} << 26;

  const GateBank* gates_;
  at::Tensor segments_;
  std::vector<at::Tensor> log_betas_;
  int single_document_rows_ = -1;  // -1 unknown, else whether every row is one whole document
  at::Tensor document_mask_;       // (B, 1, T, T) for the packed case, built once
};

}  // namespace retain
