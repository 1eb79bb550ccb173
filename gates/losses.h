// Training losses of TrimKV / DBTrimKV, exactly as the reference implementation computes them.
//
// Capacity (budget) loss, with S_{l,h,t} = sum_{i<=t, same document} beta_i^(t-i) the expected
// number of live entries and t the token's 0-based position in its document:
//   local  (TrimKV):   c_{l,h,t} = max(0, (S_{l,h,t} - M) / max(t - M, 1))
//   global (DBTrimKV): c_t = max(0, (sum_{l,h} S_{l,h,t} - M L Hk) / max((t - M) L Hk, 1))
//   L_cap = sum(c) / count(c > 0), 0 when no entry is positive; padding excluded.
//
// Base losses over the LM head, computed in blocks of `logit_block` tokens (checkpointed, so no
// T x V tensor is kept for the backward pass):
//   fwkl: KL(p_teacher || p_student) at every token whose label is kept (temperature 1)
//   rvkl: KL(p_student || p_teacher), same tokens
//   ntp:  cross-entropy of the next token, for tokens whose next token is kept and in the same
//   document
// Each is a sum plus a count, so the caller can normalise by local or global (all-rank) counts.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "model/decoder.h"

namespace retain {

enum class CapacityMode { kLocal, kGlobal };

CapacityMode parse_capacity_mode(const std::string& name, const std::string& where);

// The capacity loss as a sum over entries and the number of positive entries, so a caller can
// divide by a count taken over several ranks.
struct CapacitySums {
  at::Tensor sum;  // scalar, differentiable
  int64_t positive = 0;
};
CapacitySums capacity_sums(const std::vector<at::Tensor>& log_betas, const at::Tensor& positions,
                           const at::Tensor& segments, double memory, CapacityMode mode);

// log_betas: per layer (B, Hk, T); positions, segments: (B, T).
at::Tensor capacity_loss(const std::vector<at::Tensor>& log_betas, const at::Tensor& positions,
                         const at::Tensor& segments, double memory, CapacityMode mode);

struct BaseLossTerms {
  bool fwkl = false, rvkl = false, ntp = false;
  static BaseLossTerms parse(const std::vector<std::string>& names, const std::string& where);
  int count() const { return int(fwkl) + int(rvkl) + int(ntp); }
};

// The positions whose prediction every base term (fwkl, rvkl, ntp) scores, (B, T) bool: the next
// token exists, is in the same document and carries a label (loss_mask). So the KL terms compare,
// and ntp scores, the predictions OF labelled tokens (transformers' shifted labels): with labels
// on an answer only, the prediction of its first token counts and the one after its last does
// not. One definition for the losses and every count of them.
at::Tensor loss_targets(const at::Tensor& segments, const at::Tensor& loss_mask);

// How many positions the base terms of a batch average over.
int64_t count_loss_targets(const at::Tensor& segments, const at::Tensor& loss_mask);

struct LossSums {
  at::Tensor fwkl, rvkl, ntp;  // scalar sums (undefined when not requested)
  int64_t tokens = 0;          // positions every term averages over (loss_targets)
};

// student_hidden, teacher_hidden: (B, T, d) after the final norm (teacher may be undefined when
// no KL term is asked); input_ids, segments: (B, T); loss_mask: (B, T) bool, true where a
// token's label counts (assistant tokens of chat data, everything otherwise).
LossSums base_loss_sums(const Decoder& model, const at::Tensor& student_hidden,
                        const at::Tensor& teacher_hidden, const at::Tensor& input_ids,
                        const at::Tensor& segments, const at::Tensor& loss_mask,
                        const BaseLossTerms& terms, int64_t logit_block);

}  // namespace retain
