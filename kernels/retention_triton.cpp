#include "kernels/retention_triton.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "kernels/triton_launch.h"

namespace retain {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// (first, last) index of each token's document in its row (B, T) int64; padding gets first = T,
// last = -1. A document is every token of the row with its id, so the ranges hold even when an
// id comes back after another document. Ids >= T share the last slot: their documents get the
// union of their spans, wider than needed but never narrower (the kernels mask the rest), and no
// host sync is needed to size the table.
std::pair<at::Tensor, at::Tensor> document_bounds(const at::Tensor& segments) {
  const int64_t b = segments.size(0), t = segments.size(1);
  auto seg = segments.to(at::kLong);
  auto padding = seg < 0;
  const int64_t slots = t + 1;  // ids 0 .. T - 1, then padding
  auto slot = at::where(padding, at::full_like(seg, t), seg.clamp_max(std::max<int64_t>(t - 1, 0)));
  auto index = at::arange(t, seg.options()).expand({b, t});
  auto first = at::full({b, slots}, t, seg.options())
                   .scatter_reduce(1, slot, index, "amin")
                   .gather(1, slot)
                   .masked_fill(padding, t);
  auto last = at::full({b, slots}, -1, seg.options())
                  .scatter_reduce(1, slot, index, "amax")
                  .gather(1, slot)
                  .masked_fill(padding, -1);
  return {first, last};
}

// x (B, T) reduced over tiles of `tile` tokens (the tail padded with `pad`): (B, ceil(T / tile)).
at::Tensor per_tile(const at::Tensor& x, int64_t tile, int64_t pad, bool minimum) {
  const int64_t b = x.size(0), t = x.size(1), tiles = ceil_div(t, tile);
  auto padded = at::constant_pad_nd(x, {0, tiles * tile - t}, pad).view({b, tiles, tile});
  return minimum ? padded.amin(-1) : padded.amax(-1);
}

const TritonCubin& cubin_for(const char* kernel, int arch, const at::Tensor& t, int head_dim) {
  const TritonCubin* c = find_triton_cubin(kernel, arch, triton_type(t.scalar_type()), head_dim);
  RETAIN_CHECK(c != nullptr, "no Triton cubin of ", kernel, " for sm_", arch, ", ", t.scalar_type(),
               ", head dim ", head_dim);
  return *c;
}

struct Inputs {
  at::Tensor q, k, v, a, pos, seg;
  int64_t b, h, hk, t, d;
};

// Contiguous and 16-byte aligned (the cubins assume it): a narrow view of a larger tensor, e.g.
// one tensor-parallel rank's heads of a batch of one, can start anywhere; it is copied then.
at::Tensor aligned(const at::Tensor& t) {
  at::Tensor c = t.contiguous();
  return reinterpret_cast<uintptr_t>(c.data_ptr()) % 16 == 0 ? c : c.clone();
}

Inputs prepare(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
               const at::Tensor& log_beta, const at::Tensor& positions,
               const at::Tensor& segments) {
  // Positions travel as int32 and their differences become fp32 in the tile: exact up to 2^24
  // tokens (not checked here: that would cost a host sync per call).
  return {aligned(q),
          aligned(k),
          aligned(v),
          aligned(log_beta.to(at::kFloat)),
          aligned(positions.to(at::kInt)),
          aligned(segments.to(at::kInt)),
          q.size(0),
          q.size(1),
          k.size(1),
          q.size(2),
          q.size(3)};
}

}  // namespace

RetentionTileRanges retention_tile_ranges(const at::Tensor& segments, int64_t row_tile,
                                          int64_t col_tile) {
  RETAIN_CHECK(segments.dim() == 2 && row_tile > 0 && col_tile > 0,
               "retention_tile_ranges: expected segments (B, T) and positive tiles, found ",
               segments.sizes(), ", ", row_tile, ", ", col_tile);
  auto [first, last] = document_bounds(segments);
  const int64_t t = segments.size(1);
  auto start = per_tile(first, row_tile, t, /*minimum=*/true).div(col_tile, "floor");
  auto end = per_tile(last, col_tile, -1, /*minimum=*/false).div(row_tile, "floor") + 1;
  return {start.to(at::kInt).contiguous(), end.to(at::kInt).contiguous()};
}

std::string retention_attention_triton_unsupported(const at::Tensor& q, const at::Tensor& k,
                                                   const at::Tensor& v,
                                                   const at::Tensor& log_beta) {
  if (!q.is_cuda()) return "the inputs are not on a GPU";
  if (triton_cubins().empty()) return "this build has no Triton cubins";
  if (k.scalar_type() != q.scalar_type() || v.scalar_type() != q.scalar_type() ||
      log_beta.scalar_type() != at::kFloat)
    return "q, k, v differ in dtype or log beta is not fp32";
  const int arch = cuda_device_arch(q.get_device());
  if (find_triton_cubin("retention_fwd", arch, triton_type(q.scalar_type()),
                        static_cast<int>(q.size(-1))) == nullptr)
    return str_cat("no cubin for sm_", arch, ", ", q.scalar_type(), ", head dim ", q.size(-1),
                   " (built: bf16/fp16, head dims 64/128, kernels/triton/configs.json's archs)");
  return "";
}

std::string retention_sum_triton_unsupported(const at::Tensor& log_beta) {
  if (!log_beta.is_cuda()) return "the inputs are not on a GPU";
  if (triton_cubins().empty()) return "this build has no Triton cubins";
  if (log_beta.scalar_type() != at::kFloat) return "log beta is not fp32";
  const int arch = cuda_device_arch(log_beta.get_device());
  if (find_triton_cubin("retention_sum_fwd", arch, "fp32", 0) == nullptr)
    return str_cat("no cubin for sm_", arch);
  return "";
}

TritonPlan plan_retention_attention_forward(const at::Tensor& q_in, const at::Tensor& k_in,
                                            const at::Tensor& v_in, const at::Tensor& log_beta,
                                            const at::Tensor& positions, const at::Tensor& segments,
                                            double scale, int arch) {
  Inputs x = prepare(q_in, k_in, v_in, log_beta, positions, segments);
  const TritonCubin& fwd = cubin_for("retention_fwd", arch, x.q, static_cast<int>(x.d));
  auto kv_start = retention_tile_ranges(x.seg, fwd.block_m, fwd.block_n).start;
  auto out = at::empty_like(x.q);
  auto lse = at::empty({x.b, x.h, x.t}, x.q.options().dtype(at::kFloat));
  const int64_t q_tiles = kv_start.size(1);
  TritonPlan plan;
  plan.outputs = {out, lse};
  auto& args = plan.add(fwd, q_tiles, x.b * x.h);
  args.tensor(x.q, "Q").tensor(x.k, "K").tensor(x.v, "V").tensor(x.a, "A");
  args.tensor(x.pos, "POS").tensor(x.seg, "SEG").tensor(kv_start, "KV_START");
  args.tensor(out, "OUT").tensor(lse, "LSE").f32(scale, "scale").i32(x.t, "T").i32(x.h, "H");
  args.i32(x.hk, "HK").i32(q_tiles, "NQT");
  return plan;
}

TritonPlan plan_retention_attention_backward(const at::Tensor& q_in, const at::Tensor& k_in,
                                             const at::Tensor& v_in, const at::Tensor& log_beta,
                                             const at::Tensor& positions,
                                             const at::Tensor& segments, const at::Tensor& out_in,
                                             const at::Tensor& lse_in, const at::Tensor& d_out_in,
                                             double scale, int arch) {
  Inputs x = prepare(q_in, k_in, v_in, log_beta, positions, segments);
  auto out = aligned(out_in), lse = aligned(lse_in);
  auto d_out = aligned(d_out_in.to(x.q.scalar_type()));
  const int d = static_cast<int>(x.d);
  TritonPlan plan;

  // delta_i = sum_d dO O, then dK, dV, d log beta per key tile, then dQ per query tile.
  const TritonCubin& delta_k = cubin_for("retention_bwd_delta", arch, x.q, d);
  auto delta = at::empty({x.b, x.h, x.t}, lse.options());
  auto& delta_args = plan.add(delta_k, ceil_div(x.t, delta_k.block_m), x.b * x.h);
  delta_args.tensor(out, "OUT").tensor(d_out, "DOUT").tensor(delta, "DELTA").i32(x.t, "T");

  const TritonCubin& dkdv = cubin_for("retention_bwd_dkdv", arch, x.q, d);
  auto dk = at::empty_like(x.k), dv = at::empty_like(x.v), da = at::empty_like(x.a);
  auto q_end = retention_tile_ranges(x.seg, dkdv.block_m, dkdv.block_n).end;
  const int64_t k_tiles = q_end.size(1);
  auto& kv_args = plan.add(dkdv, k_tiles, x.b * x.hk);
  kv_args.tensor(x.q, "Q").tensor(x.k, "K").tensor(x.v, "V").tensor(x.a, "A");
  kv_args.tensor(x.pos, "POS").tensor(x.seg, "SEG").tensor(q_end, "Q_END");
  kv_args.tensor(d_out, "DOUT").tensor(lse, "LSE").tensor(delta, "DELTA");
  kv_args.tensor(dk, "DK").tensor(dv, "DV").tensor(da, "DA").f32(scale, "scale");
  kv_args.i32(x.t, "T").i32(x.h, "H").i32(x.hk, "HK").i32(k_tiles, "NKT");

  const TritonCubin& dq_k = cubin_for("retention_bwd_dq", arch, x.q, d);
  auto dq = at::empty_like(x.q);
  auto kv_start = retention_tile_ranges(x.seg, dq_k.block_m, dq_k.block_n).start;
  const int64_t q_tiles = kv_start.size(1);
  auto& q_args = plan.add(dq_k, q_tiles, x.b * x.h);
  q_args.tensor(x.q, "Q").tensor(x.k, "K").tensor(x.v, "V").tensor(x.a, "A");
  q_args.tensor(x.pos, "POS").tensor(x.seg, "SEG").tensor(kv_start, "KV_START");
  q_args.tensor(d_out, "DOUT").tensor(lse, "LSE").tensor(delta, "DELTA").tensor(dq, "DQ");
  q_args.f32(scale, "scale").i32(x.t, "T").i32(x.h, "H").i32(x.hk, "HK").i32(q_tiles, "NQT");
  plan.outputs = {dq, dk, dv, da};
  return plan;
}

TritonPlan plan_retention_sum_forward(const at::Tensor& log_beta, const at::Tensor& positions,
                                      const at::Tensor& segments, int arch) {
  auto a = aligned(log_beta);
  auto pos = aligned(positions.to(at::kInt)), seg = aligned(segments.to(at::kInt));
  const TritonCubin& c = cubin_for("retention_sum_fwd", arch, a, 0);
  auto start = retention_tile_ranges(seg, c.block_m, c.block_m).start;
  auto s = at::empty_like(a);
  TritonPlan plan;
  plan.outputs = {s};
  auto& args = plan.add(c, start.size(1), a.size(0) * a.size(1));
  args.tensor(a, "A").tensor(pos, "POS").tensor(seg, "SEG").tensor(start, "START");
  args.tensor(s, "S").i32(a.size(2), "T").i32(a.size(1), "HK").i32(start.size(1), "NT");
  return plan;
}

TritonPlan plan_retention_sum_backward(const at::Tensor& log_beta, const at::Tensor& positions,
                                       const at::Tensor& segments, const at::Tensor& d_sum,
                                       int arch) {
  auto a = aligned(log_beta), ds = aligned(d_sum.to(at::kFloat));
  auto pos = aligned(positions.to(at::kInt)), seg = aligned(segments.to(at::kInt));
  const TritonCubin& c = cubin_for("retention_sum_bwd", arch, a, 0);
  auto end = retention_tile_ranges(seg, c.block_m, c.block_m).end;
  auto da = at::empty_like(a);
  TritonPlan plan;
  plan.outputs = {da};
  auto& args = plan.add(c, end.size(1), a.size(0) * a.size(1));
  args.tensor(a, "A").tensor(pos, "POS").tensor(seg, "SEG").tensor(end, "END");
  args.tensor(ds, "DS").tensor(da, "DA").i32(a.size(2), "T").i32(a.size(1), "HK");
  args.i32(end.size(1), "NT");
  return plan;
}

namespace {

std::vector<at::Tensor> run(TritonPlan plan, const at::Tensor& on) {
  return launch_triton_plan(std::move(plan), on.get_device());
}

int arch_of(const at::Tensor& t) { return cuda_device_arch(t.get_device()); }

}  // namespace

std::vector<at::Tensor> retention_attention_triton_forward(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_beta,
    const at::Tensor& positions, const at::Tensor& segments, double scale) {
  return run(
      plan_retention_attention_forward(q, k, v, log_beta, positions, segments, scale, arch_of(q)),
      q);
}

std::vector<at::Tensor> retention_attention_triton_backward(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& log_beta,
    const at::Tensor& positions, const at::Tensor& segments, const at::Tensor& out,
    const at::Tensor& lse, const at::Tensor& d_out, double scale) {
  auto g = run(plan_retention_attention_backward(q, k, v, log_beta, positions, segments, out, lse,
                                                 d_out, scale, arch_of(q)),
               q);
  g[3] = g[3].to(log_beta.scalar_type());
  return g;
}

at::Tensor retention_sum_triton_forward(const at::Tensor& log_beta, const at::Tensor& positions,
                                        const at::Tensor& segments) {
  return run(plan_retention_sum_forward(log_beta, positions, segments, arch_of(log_beta)),
             log_beta)[0];
}

at::Tensor retention_sum_triton_backward(const at::Tensor& log_beta, const at::Tensor& positions,
                                         const at::Tensor& segments, const at::Tensor& d_sum) {
  return run(plan_retention_sum_backward(log_beta, positions, segments, d_sum, arch_of(log_beta)),
             log_beta)[0];
}

}  // namespace retain
