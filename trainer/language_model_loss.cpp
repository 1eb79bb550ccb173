#include "trainer/language_model_loss.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <vector>

#include "gates/losses.h"

namespace retain {

LanguageModelLoss language_model_loss(const Decoder& model, const GateBank* gates,
                                      const MicroBatch& batch, int64_t targets, bool with_stats,
                                      const TrainSettings& s, const PhaseMark& mark) {
  LanguageModelLoss out;
  out.student = std::make_shared<GatedAttentionHook>(gates, batch.segments);
  ForwardContext student_context{nullptr, out.student.get(), s.activation_checkpointing};
  student_context.multimodal = batch.multimodal;
  auto hidden = model.forward_hidden(batch.ids, batch.positions, student_context);
  if (mark) mark("student_forward");
  at::Tensor teacher_hidden;
  if (s.terms.fwkl || s.terms.rvkl) {
    at::NoGradGuard no_grad;
    GatedAttentionHook teacher(nullptr, batch.segments);
    ForwardContext teacher_context{nullptr, &teacher};
    teacher_context.multimodal = batch.multimodal;
    teacher_hidden = model.forward_hidden(batch.ids, batch.positions, teacher_context);
  }
  if (mark) mark("teacher_forward");
  LossSums sums = base_loss_sums(model, hidden, teacher_hidden, batch.ids, batch.segments,
                                 batch.loss_mask, s.terms, s.logit_block);
  BatchLoss& loss = out.loss;
  loss.student_hook = out.student;
  // Each term is normalised by the step's (not the micro-batch's) count of targets, so
  // accumulation gives the same gradient as one big batch.
  const auto n = static_cast<double>(std::max<int64_t>(targets, 1));
  std::vector<at::Tensor> parts;
  if (sums.fwkl.defined()) parts.push_back(sums.fwkl / n);
  if (sums.rvkl.defined()) parts.push_back(sums.rvkl / n);
  if (sums.ntp.defined()) parts.push_back(sums.ntp / n);
  loss.base = at::stack(parts).sum() / static_cast<double>(parts.size());
  loss.capacity = at::zeros({}, loss.base.options());
  if (with_stats) {
    at::NoGradGuard no_grad;
    if (sums.fwkl.defined()) loss.kl = sums.fwkl.item<double>() / n;
    if (sums.ntp.defined()) loss.ntp = sums.ntp.item<double>() / n;
  }
  return out;
}

}  // namespace retain
