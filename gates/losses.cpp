#include "gates/losses.h"

#include <ATen/core/grad_mode.h>

#include "core/activation_checkpoint.h"
#include "core/error.h"
#include "kernels/retention_attention.h"

namespace retain {

CapacityMode parse_capacity_mode(const std::string& name, const std::string& where) {
  if (name == "local") return CapacityMode::kLocal;
  if (name == "global") return CapacityMode::kGlobal;
  fail(where, ": capacity mode '", name, "' is not supported (expected local or global)");
}

at::Tensor capacity_loss(const std::vector<at::Tensor>& log_betas, const at::Tensor& positions,
                         const at::Tensor& segments, double memory, CapacityMode mode) {
  CapacitySums sums = capacity_sums(log_betas, positions, segments, memory, mode);
  // Mean over positive entries; with none, a zero that still depends on the gates.
  return sums.sum / static_cast<double>(std::max<int64_t>(sums.positive, 1));
}

CapacitySums capacity_sums(const std::vector<at::Tensor>& log_betas, const at::Tensor& positions,
                           const at::Tensor& segments, double memory, CapacityMode mode) {
  RETAIN_CHECK(!log_betas.empty(), "capacity_loss: no log beta (are gates attached?)");
  std::vector<at::Tensor> sums;
  for (const auto& lb : log_betas) sums.push_back(retention_sum(lb, positions, segments));
  auto s = at::stack(sums, 1);  // (B, L, Hk, T)
  const auto layers = static_cast<double>(s.size(1)), heads = static_cast<double>(s.size(2));
  auto pos = positions.to(s.device(), at::kFloat);
  auto valid = segments.to(s.device()) >= 0;  // (B, T)
  at::Tensor c;
  if (mode == CapacityMode::kLocal) {
    auto denominator = (pos - memory).clamp_min(1.0).view({s.size(0), 1, 1, s.size(3)});
    c = at::relu((s - memory) / denominator) * valid.view({s.size(0), 1, 1, s.size(3)});
  } else {
    const double scale = layers * heads;
    auto denominator = ((pos - memory) * scale).clamp_min(1.0);
    c = at::relu((s.sum({1, 2}) - memory * scale) / denominator) * valid;
  }
  return {c.sum(), (c > 0).sum().item<int64_t>()};
}

BaseLossTerms BaseLossTerms::parse(const std::vector<std::string>& names,
                                   const std::string& where) {
  BaseLossTerms t;
  for (const auto& n : names) {
    if (n == "fwkl")
      t.fwkl = true;
    else if (n == "rvkl")
      t.rvkl = true;
    else if (n == "ntp")
      t.ntp = true;
    else
      fail(where, ": loss term '", n, "' is not supported (expected fwkl, rvkl or ntp)");
  }
  RETAIN_CHECK(t.count() > 0, where, ": at least one of fwkl, rvkl, ntp is needed");
  return t;
}

at::Tensor loss_targets(const at::Tensor& segments, const at::Tensor& loss_mask) {
  const int64_t t = segments.size(1);
  auto labelled = loss_mask.to(at::kBool).logical_and(segments >= 0);
  auto targets = at::zeros_like(labelled);
  if (t > 1) {
    targets.narrow(1, 0, t - 1)
        .copy_(labelled.narrow(1, 1, t - 1)
                   .logical_and(segments.narrow(1, 1, t - 1) == segments.narrow(1, 0, t - 1)));
  }
  return targets;
}

int64_t count_loss_targets(const at::Tensor& segments, const at::Tensor& loss_mask) {
  return loss_targets(segments, loss_mask).sum().item<int64_t>();
}

LossSums base_loss_sums(const Decoder& model, const at::Tensor& student_hidden,
                        const at::Tensor& teacher_hidden, const at::Tensor& input_ids,
                        const at::Tensor& segments, const at::Tensor& loss_mask,
                        const BaseLossTerms& terms, int64_t logit_block) {
  RETAIN_CHECK(logit_block > 0, "logit_block_size must be positive");
  RETAIN_CHECK(!(terms.fwkl || terms.rvkl) || teacher_hidden.defined(),
               "KL terms need the teacher's hidden states");
  const int64_t b = student_hidden.size(0), t = student_hidden.size(1), d = student_hidden.size(2);
  const auto device = student_hidden.device();
  auto ids = input_ids.to(device);
  const at::Tensor targets_mask = loss_targets(segments.to(device), loss_mask.to(device));
  auto next_ids = at::cat({ids.narrow(1, 1, t - 1), at::zeros({b, 1}, ids.options())}, 1);

  LossSums sums;
  // Only the labelled positions get logits: with answer labels (the demo's gates) that is a few
  // dozen of a row's thousand tokens, and unlabelled positions add nothing to any term, so their
  // (tokens, vocab) products and softmaxes would be wasted.
  auto rows = targets_mask.reshape({-1}).nonzero().squeeze(1);
  sums.tokens = rows.size(0);
  auto flat_s = student_hidden.reshape({b * t, d}).index_select(0, rows);
  auto flat_t = teacher_hidden.defined()
                    ? teacher_hidden.reshape({b * t, d}).detach().index_select(0, rows)
                    : at::Tensor();
  auto flat_next = next_ids.reshape({-1}).index_select(0, rows);
  auto zero = student_hidden.sum() * 0;  // keeps sums attached to the graph even if empty
  at::Tensor fwkl = zero, rvkl = zero, ntp = zero;
  for (int64_t start = 0; start < sums.tokens; start += logit_block) {
    const int64_t n = std::min(logit_block, sums.tokens - start);
    auto teacher_b = flat_t.defined() ? flat_t.narrow(0, start, n) : at::Tensor();
    auto targets = flat_next.narrow(0, start, n);
    // Each block's three sums come out of one checkpointed function of the student's hidden
    // states, so only (n, d) activations are kept per block.
    auto block_losses = checkpoint(
        // By value: this runs again in the backward pass, after this function returned.
        [&model, terms, teacher_b, targets](const at::Tensor& h) {
          auto logp_s = at::log_softmax(model.logits(h), -1);  // (n, V) fp32
          std::vector<at::Tensor> parts;
          at::Tensor logp_t;
          if (terms.fwkl || terms.rvkl) {
            at::NoGradGuard no_grad;
            logp_t = at::log_softmax(model.logits(teacher_b), -1);
          }
          parts.push_back(terms.fwkl ? (logp_t.exp() * (logp_t - logp_s)).sum() : h.sum() * 0);
          parts.push_back(terms.rvkl ? (logp_s.exp() * (logp_s - logp_t)).sum() : h.sum() * 0);
          parts.push_back(terms.ntp ? -logp_s.gather(1, targets.unsqueeze(1)).sum() : h.sum() * 0);
          return at::stack(parts);
        },
        flat_s.narrow(0, start, n));
    fwkl = fwkl + block_losses[0];
    rvkl = rvkl + block_losses[1];
    ntp = ntp + block_losses[2];
  }
  if (terms.fwkl) sums.fwkl = fwkl;
  if (terms.rvkl) sums.rvkl = rvkl;
  if (terms.ntp) sums.ntp = ntp;
  return sums;
}

}  // namespace retain
