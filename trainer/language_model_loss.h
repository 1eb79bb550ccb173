// The loss gates train with (its own file: the losses of the language model, apart from the
// gates' bookkeeping in gate_trainable.cpp): the model runs with a student hook (its gates, or
// none: plain attention) and, when a KL term is on, again without gates and without grad (the
// teacher); the base loss terms (loss.base: fwkl, rvkl, ntp) are averaged, each normalised by the
// step's count of targets so that accumulation gives one big batch's gradient.
#pragma once

#include <memory>

#include "gates/gate_bank.h"
#include "gates/gated_attention.h"
#include "trainer/trainable.h"

namespace retain {

struct LanguageModelLoss {
  BatchLoss loss;  // base, student_hook and (with_stats) kl, ntp; capacity zero
  // The student's hook, as its own type (the gates' log beta of the forward).
  std::shared_ptr<GatedAttentionHook> student;
};

// `mark` (may be empty) is called after the student's forward and after the teacher's.
LanguageModelLoss language_model_loss(const Decoder& model, const GateBank* gates,
                                      const MicroBatch& batch, int64_t targets, bool with_stats,
                                      const TrainSettings& settings, const PhaseMark& mark);

}  // namespace retain
