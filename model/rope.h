// Rotary position embeddings with the scaling variants of transformers' modeling_rope_utils
// (default, linear, dynamic NTK, llama3, yarn), computed the same way in fp32 so logits match.
#pragma once

#include <ATen/ATen.h>

#include "model/model_config.h"

namespace retain {

struct RopeFrequencies {
  at::Tensor inv_freq;             // (D/2,) fp32
  double attention_scaling = 1.0;  // multiplies cos and sin (yarn)
};

// `seq_len` matters only for dynamic NTK: transformers recomputes the frequencies from the
// largest position of the current call (max position + 1) once it exceeds the trained length.
RopeFrequencies rope_frequencies(const ModelConfig& config, int64_t seq_len, at::Device device);

// cos, sin: (B, T, D) in `dtype` for positions (B, T) (negative positions are padding; their
// values are irrelevant because such tokens are masked).
std::pair<at::Tensor, at::Tensor> rope_cos_sin(const RopeFrequencies& freqs,
                                               const at::Tensor& positions, at::ScalarType dtype);

// cos, sin of rotation angles (..., D/2) laid out as transformers does (the half repeated), scaled
// by the frequencies' attention scaling and cast to `dtype`.
std::pair<at::Tensor, at::Tensor> rope_cos_sin_from_angles(const at::Tensor& angles,
                                                           const RopeFrequencies& freqs,
                                                           at::ScalarType dtype);

// x: (B, heads, T, D); cos, sin: (B, T, D).
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace retain
