#include "kernels/retention_attention.h"

#include <atomic>

#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <set>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "kernels/cuda_launchers.h"
#include "kernels/device_info.h"
#include "kernels/retention_triton.h"
#include "kernels/triton_launch.h"

namespace retain {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Where a query block [qs, qe) may see a key block [ks, ke): same segment, key index <= query
// index, not padding. (B, 1, 1, tq, tk) bool.
at::Tensor block_mask(const at::Tensor& segments, int64_t qs, int64_t qe, int64_t ks, int64_t ke) {
  auto seg_q = segments.narrow(1, qs, qe - qs).unsqueeze(2);  // (B, tq, 1)
  auto seg_k = segments.narrow(1, ks, ke - ks).unsqueeze(1);  // (B, 1, tk)
  auto idx_q = at::arange(qs, qe, segments.options()).view({1, -1, 1});
  auto idx_k = at::arange(ks, ke, segments.options()).view({1, 1, -1});
  auto mask = (seg_q == seg_k).logical_and(idx_k <= idx_q).logical_and(seg_q >= 0);
  return mask.unsqueeze(1).unsqueeze(1);
}

// exp(x), in place, where a result below the smallest normal float is 0, as under flush-to-zero.
// MKL's vectorised exp (LibTorch's CPU exp) takes a slow path for every result in the denormal
// range, ~8x the time per element (measured on the 2-core dev machine); trained gates with a
// strongly negative log beta put most of a block there, which made the demo's gate runs ~1.3x
// slower (216 vs 165 s). Arguments under kExpFloor go to -inf first, so exp gives 0.
// What is dropped weighs < 1.2e-38 against a row maximum of 1: below fp32's resolution. fp64
// (the gradient checks) keeps its exact exp.
constexpr double kExpFloor = -87.0;  // exp(-87) = 1.65e-38, still a normal float
at::Tensor& exp_flushing_denormals_(at::Tensor& x) {
  if (x.scalar_type() == at::kFloat) at::threshold_(x, kExpFloor, kNegInf);
  return x.exp_();
}

// Accumulation type: fp32 for fp32/bf16/fp16 inputs, fp64 for fp64 (gradient checks).
at::ScalarType accumulation_type(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

// pos_i - pos_j, (B, 1, 1, tq, tk).
at::Tensor block_distance(const at::Tensor& positions, int64_t qs, int64_t qe, int64_t ks,
                          int64_t ke, at::ScalarType type) {
  auto pos_q = positions.narrow(1, qs, qe - qs).unsqueeze(2);
  auto pos_k = positions.narrow(1, ks, ke - ks).unsqueeze(1);
  return (pos_q - pos_k).to(type).unsqueeze(1).unsqueeze(1);
}

// Scores of one block in fp32 with bias and mask: (B, Hk, G, tq, tk).
at::Tensor block_scores(const at::Tensor& q5, const at::Tensor& k, const at::Tensor& log_beta,
                        const at::Tensor& mask, const at::Tensor& distance, double scale,
                        int64_t qs, int64_t qe, int64_t ks, int64_t ke) {
  const int64_t b = q5.size(0), hk = q5.size(1), g = q5.size(2), d = q5.size(4);
  const int64_t tq = qe - qs, tk = ke - ks;
  const auto type = distance.scalar_type();
  auto qb = q5.narrow(3, qs, tq).to(type).reshape({b, hk, g * tq, d});
  auto kb = k.narrow(2, ks, tk).to(type);
  auto s = at::matmul(qb, kb.transpose(-1, -2)).mul_(scale).view({b, hk, g, tq, tk});
  auto lb = log_beta.narrow(2, ks, tk).to(type).view({b, hk, 1, 1, tk});
  s.add_(distance * lb);
  return s.masked_fill_(mask.logical_not(), kNegInf);
}

struct RetentionAttentionFunction : public torch::autograd::Function<RetentionAttentionFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const at::Tensor& log_beta,
                            const at::Tensor& positions, const at::Tensor& segments, double scale,
                            int64_t block_q, int64_t block_k) {
    const int64_t b = q.size(0), h = q.size(1), t = q.size(2), d = q.size(3), hk = k.size(1);
    const int64_t g = h / hk;
    const auto type = accumulation_type(q);
    auto q5 = q.view({b, hk, g, t, d});
    auto out = at::empty({b, hk, g, t, d}, q.options().dtype(type));
    auto lse = at::empty({b, hk, g, t}, q.options().dtype(type));
    for (int64_t qs = 0; qs < t; qs += block_q) {
      const int64_t qe = std::min(t, qs + block_q), tq = qe - qs;
      auto m = at::full({b, hk, g, tq}, kNegInf, lse.options());
      auto l = at::zeros({b, hk, g, tq}, lse.options());
      auto acc = at::zeros({b, hk, g * tq, d}, out.options());
      for (int64_t ks = 0; ks < qe;
           ks += block_k) {  // keys after the block's last query are masked
        const int64_t ke = std::min(qe, ks + block_k), tk = ke - ks;
        auto s =
            block_scores(q5, k, log_beta, block_mask(segments, qs, qe, ks, ke),
                         block_distance(positions, qs, qe, ks, ke, type), scale, qs, qe, ks, ke);
        auto m_new = at::maximum(m, s.amax(-1));
        // Rows with nothing visible yet keep -inf; shift them by 0 so exp() gives 0, not NaN.
        auto shift = at::where(at::isinf(m_new), at::zeros_like(m_new), m_new);
        auto p = s.sub_(shift.unsqueeze(-1));
        exp_flushing_denormals_(p);
        auto alpha = at::exp(m - shift);
        l = l * alpha + p.sum(-1);
        acc = acc * alpha.view({b, hk, g * tq, 1}) +
              at::matmul(p.view({b, hk, g * tq, tk}), v.narrow(2, ks, tk).to(type));
        m = m_new;
      }
      // Padding rows (l == 0) get zeros.
      auto safe_l = at::where(l > 0, l, at::ones_like(l));
      out.narrow(3, qs, tq).copy_(acc.view({b, hk, g, tq, d}) / safe_l.unsqueeze(-1));
      auto shift = at::where(at::isinf(m), at::zeros_like(m), m);
      lse.narrow(3, qs, tq).copy_(
          at::where(l > 0, shift + at::log(safe_l), at::full_like(l, kNegInf)));
    }
    auto result = out.view({b, h, t, d}).to(q.scalar_type());
    ctx->save_for_backward({q, k, v, log_beta, positions, segments, result, lse});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["block_q"] = block_q;
    ctx->saved_data["block_k"] = block_k;
    return result;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &log_beta = saved[3];
    const auto &positions = saved[4], &segments = saved[5], &out = saved[6], &lse = saved[7];
    const double scale = ctx->saved_data["scale"].toDouble();
    const int64_t block_q = ctx->saved_data["block_q"].toInt(),
                  block_k = ctx->saved_data["block_k"].toInt();
    const int64_t b = q.size(0), h = q.size(1), t = q.size(2), d = q.size(3), hk = k.size(1);
    const int64_t g = h / hk;

    const auto type = accumulation_type(q);
    auto q5 = q.view({b, hk, g, t, d});
    auto d_out = grads[0].to(type).reshape({b, hk, g, t, d});
    // D_i = sum_d dO * O, the softmax backward's row term.
    auto delta = (d_out * out.to(type).view({b, hk, g, t, d})).sum(-1);  // (B, Hk, G, T)
    auto dq = at::zeros({b, hk, g, t, d}, d_out.options());
    auto dk = at::zeros({b, hk, t, d}, d_out.options());
    auto dv = at::zeros({b, hk, t, d}, d_out.options());
    auto dlb = at::zeros({b, hk, t}, d_out.options());
    for (int64_t qs = 0; qs < t; qs += block_q) {
      const int64_t qe = std::min(t, qs + block_q), tq = qe - qs;
      auto qb = q5.narrow(3, qs, tq).to(type).reshape({b, hk, g * tq, d});
      auto dob = d_out.narrow(3, qs, tq).reshape({b, hk, g * tq, d});
      auto lse_b = lse.narrow(3, qs, tq);
      auto lse_safe = at::where(at::isinf(lse_b), at::zeros_like(lse_b), lse_b).unsqueeze(-1);
      auto delta_b = delta.narrow(3, qs, tq).unsqueeze(-1);
      for (int64_t ks = 0; ks < qe; ks += block_k) {
        const int64_t ke = std::min(qe, ks + block_k), tk = ke - ks;
        auto distance = block_distance(positions, qs, qe, ks, ke, type);
        auto s = block_scores(q5, k, log_beta, block_mask(segments, qs, qe, ks, ke), distance,
                              scale, qs, qe, ks, ke);
        auto p = s.sub_(lse_safe);  // masked entries: exp(-inf) = 0
        exp_flushing_denormals_(p);
        auto kb = k.narrow(2, ks, tk).to(type);
        auto vb = v.narrow(2, ks, tk).to(type);
        auto p2 = p.view({b, hk, g * tq, tk});
        dv.narrow(2, ks, tk).add_(at::matmul(p2.transpose(-1, -2), dob));
        auto dp = at::matmul(dob, vb.transpose(-1, -2)).view({b, hk, g, tq, tk});
        auto ds = p * (dp - delta_b);  // gradient of the biased score
        auto ds2 = ds.view({b, hk, g * tq, tk});
        dq.narrow(3, qs, tq).add_(at::matmul(ds2, kb).mul_(scale).view({b, hk, g, tq, d}));
        dk.narrow(2, ks, tk).add_(at::matmul(ds2.transpose(-1, -2), qb).mul_(scale));
        // d log_beta_j = sum over query heads of the group and rows i of dS_ij (pos_i - pos_j).
        dlb.narrow(2, ks, tk).add_((ds * distance).sum({2, 3}));
      }
    }
    return {dq.view({b, h, t, d}).to(q.scalar_type()),
            dk.to(k.scalar_type()),
            dv.to(v.scalar_type()),
            dlb.to(log_beta.scalar_type()),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor(),
            at::Tensor()};
  }
};

// The terms beta_i^(pos_t - pos_i) of the retention sum for tokens t in [ts, te) and i in
// [is, ie), 0 where i is not visible to t, and the distances: (B, Hk, tt, ti) and (B, 1, tt, ti).
struct RetentionTerms {
  at::Tensor terms, distance;
};
RetentionTerms retention_terms(const at::Tensor& lb, const at::Tensor& positions,
                               const at::Tensor& segments, int64_t ts, int64_t te, int64_t is,
                               int64_t ie) {
  auto mask = block_mask(segments, ts, te, is, ie).squeeze(1);
  auto distance = block_distance(positions, ts, te, is, ie, lb.scalar_type()).squeeze(1);
  // Masked terms (other documents, later tokens: a negative distance) go to -inf before the exp,
  // not after it, where they could overflow.
  auto terms =
      (distance * lb.narrow(2, is, ie - is).unsqueeze(2)).masked_fill_(mask.logical_not(), kNegInf);
  exp_flushing_denormals_(terms);
  return {terms, distance};
}

struct RetentionSumFunction : public torch::autograd::Function<RetentionSumFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& log_beta,
                            const at::Tensor& positions, const at::Tensor& segments,
                            int64_t block) {
    const int64_t t = log_beta.size(2);
    auto lb = log_beta.to(accumulation_type(log_beta));
    auto sum = at::zeros_like(lb);
    for (int64_t ts = 0; ts < t; ts += block) {
      const int64_t te = std::min(t, ts + block);
      for (int64_t is = 0; is < te; is += block) {
        const int64_t ie = std::min(te, is + block);
        sum.narrow(2, ts, te - ts)
            .add_(retention_terms(lb, positions, segments, ts, te, is, ie).terms.sum(-1));
      }
    }
    ctx->save_for_backward({lb, positions, segments});
    ctx->saved_data["block"] = block;
    return sum;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &lb = saved[0], &positions = saved[1], &segments = saved[2];
    const int64_t block = ctx->saved_data["block"].toInt();
    const int64_t t = lb.size(2);
    auto d_sum = grads[0].to(lb.scalar_type());
    auto dlb = at::zeros_like(lb);
    for (int64_t ts = 0; ts < t; ts += block) {
      const int64_t te = std::min(t, ts + block);
      auto ds = d_sum.narrow(2, ts, te - ts).unsqueeze(-1);  // (B, Hk, tt, 1)
      for (int64_t is = 0; is < te; is += block) {
        const int64_t ie = std::min(te, is + block);
        auto [terms, distance] = retention_terms(lb, positions, segments, ts, te, is, ie);
        // d/d lb_i of exp(dist * lb_i) = dist * exp(dist * lb_i).
        dlb.narrow(2, is, ie - is).add_((ds * distance * terms).sum(2));
      }
    }
    return {dlb, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// The fused GPU kernels (WMMA or Triton, `triton`) behind the same autograd contract as the
// references.
struct RetentionAttentionCudaFunction
    : public torch::autograd::Function<RetentionAttentionCudaFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const at::Tensor& log_beta,
                            const at::Tensor& positions, const at::Tensor& segments, double scale,
                            bool triton) {
    auto result =
        triton ? retention_attention_triton_forward(q, k, v, log_beta, positions, segments, scale)
               : retention_attention_cuda_forward(q, k, v, log_beta, positions, segments, scale);
    ctx->save_for_backward({q, k, v, log_beta, positions, segments, result[0], result[1]});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["triton"] = triton;
    return result[0];
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto s = ctx->get_saved_variables();
    const double scale = ctx->saved_data["scale"].toDouble();
    auto g = ctx->saved_data["triton"].toBool()
                 ? retention_attention_triton_backward(s[0], s[1], s[2], s[3], s[4], s[5], s[6],
                                                       s[7], grads[0], scale)
                 : retention_attention_cuda_backward(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7],
                                                     grads[0], scale);
    return {g[0], g[1], g[2], g[3], at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct RetentionSumCudaFunction : public torch::autograd::Function<RetentionSumCudaFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& log_beta,
                            const at::Tensor& positions, const at::Tensor& segments, bool triton) {
    ctx->save_for_backward({log_beta, positions, segments});
    ctx->saved_data["triton"] = triton;
    return triton ? retention_sum_triton_forward(log_beta, positions, segments)
                  : retention_sum_cuda_forward(log_beta, positions, segments);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    auto s = ctx->get_saved_variables();
    auto d = ctx->saved_data["triton"].toBool()
                 ? retention_sum_triton_backward(s[0], s[1], s[2], grads[0])
                 : retention_sum_cuda_backward(s[0], s[1], s[2], grads[0]);
    return {d, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

bool kernel_dtype(at::ScalarType t) {
  return t == at::kFloat || t == at::kBFloat16 || t == at::kHalf;
}

void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const at::Tensor& log_beta, const at::Tensor& positions,
                  const at::Tensor& segments) {
  RETAIN_CHECK(q.dim() == 4 && k.dim() == 4 && v.sizes() == k.sizes(),
               "retention_attention: expected q (B,H,T,D) and k, v (B,Hk,T,D), found ", q.sizes(),
               ", ", k.sizes(), ", ", v.sizes());
  RETAIN_CHECK(q.size(0) == k.size(0) && q.size(2) == k.size(2) && q.size(3) == k.size(3),
               "retention_attention: q ", q.sizes(), " and k ", k.sizes(),
               " disagree on B, T or D");
  RETAIN_CHECK(q.size(1) % k.size(1) == 0, "retention_attention: ", q.size(1),
               " query heads are not a multiple of ", k.size(1), " KV heads");
  RETAIN_CHECK(log_beta.sizes() == at::IntArrayRef({k.size(0), k.size(1), k.size(2)}),
               "retention_attention: log_beta must be (B, Hk, T) = ",
               at::IntArrayRef({k.size(0), k.size(1), k.size(2)}), ", found ", log_beta.sizes());
  RETAIN_CHECK(positions.sizes() == at::IntArrayRef({q.size(0), q.size(2)}) &&
                   segments.sizes() == positions.sizes(),
               "retention_attention: positions and segments must be (B, T)");
}

}  // namespace

namespace {

RetentionKernels initial_kernels() {
  const char* env = std::getenv("RETAIN_RETENTION_KERNELS");
  return env == nullptr || *env == 0
             ? RetentionKernels::wmma
             : parse_retention_kernels(env, "environment variable RETAIN_RETENTION_KERNELS");
}

std::atomic<RetentionKernels>& kernels_choice() {
  static std::atomic<RetentionKernels> choice{initial_kernels()};
  return choice;
}

bool wmma_supports(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const at::Tensor& log_beta) {
  return q.is_cuda() && cuda_sources_compiled() && kernel_dtype(q.scalar_type()) &&
         k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() &&
         (q.size(-1) == 64 || q.size(-1) == 128) && log_beta.scalar_type() == at::kFloat;
}

}  // namespace

void set_retention_kernels(RetentionKernels kernels) { kernels_choice() = kernels; }
RetentionKernels retention_kernels() { return kernels_choice(); }

const char* retention_kernels_name(RetentionKernels kernels) {
  switch (kernels) {
    case RetentionKernels::reference:
      return "reference";
    case RetentionKernels::wmma:
      return "wmma";
    case RetentionKernels::triton:
      return "triton";
  }
  return "?";
}

RetentionKernels parse_retention_kernels(const std::string& name, const std::string& what) {
  for (auto k : {RetentionKernels::wmma, RetentionKernels::triton, RetentionKernels::reference})
    if (name == retention_kernels_name(k)) return k;
  throw Error(str_cat(what, ": '", name, "' is not a retention kernel; expected wmma, triton or ",
                      "reference"));
}

RetentionKernels retention_attention_path(const at::Tensor& q, const at::Tensor& k,
                                          const at::Tensor& v, const at::Tensor& log_beta) {
  const RetentionKernels choice = retention_kernels();
  if (choice == RetentionKernels::reference || !q.is_cuda()) return RetentionKernels::reference;
  if (choice == RetentionKernels::triton) {
    const std::string why = retention_attention_triton_unsupported(q, k, v, log_beta);
    if (why.empty()) return RetentionKernels::triton;
    const bool wmma = wmma_supports(q, k, v, log_beta);
    log_triton_fallback("retention_attention", why, wmma ? "the WMMA kernels" : "the reference");
    return wmma ? RetentionKernels::wmma : RetentionKernels::reference;
  }
  return wmma_supports(q, k, v, log_beta) ? RetentionKernels::wmma : RetentionKernels::reference;
}

bool retention_attention_uses_kernel(const at::Tensor& q, const at::Tensor& k,
                                     const at::Tensor& log_beta) {
  return retention_attention_path(q, k, k, log_beta) != RetentionKernels::reference;
}

at::Tensor retention_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const at::Tensor& log_beta, const at::Tensor& positions,
                               const at::Tensor& segments,
                               const RetentionAttentionOptions& options) {
  const RetentionKernels path = retention_attention_path(q, k, v, log_beta);
  if (path == RetentionKernels::reference)
    return retention_attention_reference(q, k, v, log_beta, positions, segments, options);
  check_inputs(q, k, v, log_beta, positions, segments);
  const double scale =
      options.scale > 0 ? options.scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  return RetentionAttentionCudaFunction::apply(
      q.contiguous(), k.contiguous(), v.contiguous(), log_beta.contiguous(),
      positions.to(at::kLong).contiguous(), segments.to(at::kLong).contiguous(), scale,
      path == RetentionKernels::triton);
}

at::Tensor retention_attention_reference(const at::Tensor& q, const at::Tensor& k,
                                         const at::Tensor& v, const at::Tensor& log_beta,
                                         const at::Tensor& positions, const at::Tensor& segments,
                                         const RetentionAttentionOptions& options) {
  check_inputs(q, k, v, log_beta, positions, segments);
  RETAIN_CHECK(options.block_q > 0 && options.block_k > 0,
               "retention_attention: block sizes must be positive");
  const double scale =
      options.scale > 0 ? options.scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  return RetentionAttentionFunction::apply(
      q.contiguous(), k.contiguous(), v.contiguous(), log_beta.contiguous(),
      positions.to(at::kLong), segments.to(at::kLong), scale, options.block_q, options.block_k);
}

RetentionKernels retention_sum_path(const at::Tensor& log_beta) {
  const RetentionKernels choice = retention_kernels();
  if (choice == RetentionKernels::reference || !log_beta.is_cuda())
    return RetentionKernels::reference;
  const bool wmma = cuda_sources_compiled() && log_beta.scalar_type() == at::kFloat;
  if (choice == RetentionKernels::triton) {
    const std::string why = retention_sum_triton_unsupported(log_beta);
    if (why.empty()) return RetentionKernels::triton;
    log_triton_fallback("retention_sum", why, wmma ? "the WMMA kernels" : "the reference");
  }
  return wmma ? RetentionKernels::wmma : RetentionKernels::reference;
}

bool retention_sum_uses_kernel(const at::Tensor& log_beta) {
  return retention_sum_path(log_beta) != RetentionKernels::reference;
}

at::Tensor retention_sum(const at::Tensor& log_beta, const at::Tensor& positions,
                         const at::Tensor& segments, int64_t block) {
  const RetentionKernels path = retention_sum_path(log_beta);
  if (path == RetentionKernels::reference)
    return retention_sum_reference(log_beta, positions, segments, block);
  RETAIN_CHECK(log_beta.dim() == 3 && positions.dim() == 2 &&
                   log_beta.size(0) == positions.size(0) && log_beta.size(2) == positions.size(1) &&
                   segments.sizes() == positions.sizes(),
               "retention_sum: expected log_beta (B, Hk, T) and positions, segments (B, T), found ",
               log_beta.sizes(), ", ", positions.sizes(), ", ", segments.sizes());
  return RetentionSumCudaFunction::apply(
      log_beta.contiguous(), positions.to(at::kLong).contiguous(),
      segments.to(at::kLong).contiguous(), path == RetentionKernels::triton);
}

at::Tensor retention_sum_reference(const at::Tensor& log_beta, const at::Tensor& positions,
                                   const at::Tensor& segments, int64_t block) {
  RETAIN_CHECK(log_beta.dim() == 3 && positions.dim() == 2 &&
                   log_beta.size(0) == positions.size(0) && log_beta.size(2) == positions.size(1) &&
                   segments.sizes() == positions.sizes(),
               "retention_sum: expected log_beta (B, Hk, T) and positions, segments (B, T), found ",
               log_beta.sizes(), ", ", positions.sizes(), ", ", segments.sizes());
  RETAIN_CHECK(block > 0, "retention_sum: block must be positive");
  return RetentionSumFunction::apply(log_beta.contiguous(), positions.to(at::kLong),
                                     segments.to(at::kLong), block);
}

}  // namespace retain
