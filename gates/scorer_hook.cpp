#include "gates/scorer_hook.h"

#include <ATen/core/grad_mode.h>

namespace retain {

at::Tensor ScorerTrainingHook::attend(const LayerTensors& t) {
  at::Tensor out;
  {
    at::NoGradGuard no_grad;
    out = plain_.attend(t);
  }
  const ScorerKind kind = scorer_.config().kind;
  const at::Tensor target = scorer_target(kind, t.q, t.k, segments_);
  at::AutoGradMode with_grad(true);  // the scorer's forward alone records a graph
  const ScorerLossSums sums = scorer_loss_sums(kind, scorer_.score(t), target, segments_);
  loss_sum_ = loss_sum_.defined() ? loss_sum_ + sums.sum : sums.sum;
  count_ += sums.count;
  return out;
}

}  // namespace retain
