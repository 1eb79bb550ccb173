#include "kernels/retention_triton.h"

#include <algorithm>

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

const char* dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16:
      return "bf16";
    case at::kHalf:
      return "fp16";
    case at::kFloat:
      return "fp32";
    default:
      return "";
  }
}

const TritonCubin& cubin_for(const char* kernel, const at::Tensor& t, int head_dim) {
  const TritonCubin* c = find_triton_cubin(kernel, cuda_device_arch(t.get_device()),
                                           dtype_name(t.scalar_type()), head_dim);
  RETAIN_CHECK(c != nullptr, "no Triton cubin of ", kernel, " for this GPU (sm_",
               cuda_device_arch(t.get_device()), "), ", t.scalar_type(), ", head dim ", head_dim);
  return *c;
}

struct Inputs {
  at::Tensor q, k, v, a, pos, seg;
  int64_t b, h, hk, t, d;
};

Inputs prepare(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
               const at::Tensor& log_beta, const at::Tensor& positions,
               const at::Tensor& segments) {
  // Positions travel as int32 and their differences become fp32 in the tile: exact up to 2^24
  // tokens (not checked here: that would cost a host sync per call).
  return {q.contiguous(),
          k.contiguous(),
          v.contiguous(),
          log_beta.to(at::kFloat).contiguous(),
          positions.to(at::kInt).contiguous(),
          segments.to(at::kInt).contiguous(),
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
  if (find_triton_cubin("retention_fwd", arch, dtype_name(q.scalar_type()),
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

std::vector<at::Tensor> retention_attention_triton_forward(
    const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
    const at::Tensor& log_beta, const at::Tensor& positions, const at::Tensor& segments,
    double scale) {
  Inputs x = prepare(q_in, k_in, v_in, log_beta, positions, segments);
  const TritonCubin& fwd = cubin_for("retention_fwd", x.q, static_cast<int>(x.d));
  auto ranges = retention_tile_ranges(x.seg, fwd.block_m, fwd.block_n);
  auto out = at::empty_like(x.q);
  auto lse = at::empty({x.b, x.h, x.t}, x.q.options().dtype(at::kFloat));
  const int64_t q_tiles = ranges.start.size(1);
  TritonArgs args;
  args.tensor(x.q, "q").tensor(x.k, "k").tensor(x.v, "v").tensor(x.a, "log_beta");
  args.tensor(x.pos, "positions").tensor(x.seg, "segments").tensor(ranges.start, "kv_start");
  args.tensor(out, "out").tensor(lse, "lse").f32(scale).i32(x.t, "T").i32(x.h, "H");
  args.i32(x.hk, "Hk").i32(q_tiles, "query tiles");
  launch_triton_cubin(fwd, x.q.get_device(), q_tiles, x.b * x.h, args);
  return {out, lse};
}

std::vector<at::Tensor> retention_attention_triton_backward(
    const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
    const at::Tensor& log_beta, const at::Tensor& positions, const at::Tensor& segments,
    const at::Tensor& out_in, const at::Tensor& lse_in, const at::Tensor& d_out_in, double scale) {
  Inputs x = prepare(q_in, k_in, v_in, log_beta, positions, segments);
  auto out = out_in.contiguous(), lse = lse_in.contiguous();
  auto d_out = d_out_in.to(x.q.scalar_type()).contiguous();
  const int device = x.q.get_device();
  const int d = static_cast<int>(x.d);

  const TritonCubin& delta_k = cubin_for("retention_bwd_delta", x.q, d);
  auto delta = at::empty({x.b, x.h, x.t}, lse.options());
  TritonArgs delta_args;
  delta_args.tensor(out, "out").tensor(d_out, "d_out").tensor(delta, "delta").i32(x.t, "T");
  launch_triton_cubin(delta_k, device, ceil_div(x.t, delta_k.block_m), x.b * x.h, delta_args);

  const TritonCubin& dkdv = cubin_for("retention_bwd_dkdv", x.q, d);
  auto dk = at::empty_like(x.k), dv = at::empty_like(x.v), da = at::empty_like(x.a);
  auto q_end = retention_tile_ranges(x.seg, dkdv.block_m, dkdv.block_n).end;
  const int64_t k_tiles = q_end.size(1);
  TritonArgs kv_args;
  kv_args.tensor(x.q, "q").tensor(x.k, "k").tensor(x.v, "v").tensor(x.a, "log_beta");
  kv_args.tensor(x.pos, "positions").tensor(x.seg, "segments").tensor(q_end, "q_end");
  kv_args.tensor(d_out, "d_out").tensor(lse, "lse").tensor(delta, "delta");
  kv_args.tensor(dk, "dk").tensor(dv, "dv").tensor(da, "dlog_beta").f32(scale);
  kv_args.i32(x.t, "T").i32(x.h, "H").i32(x.hk, "Hk").i32(k_tiles, "key tiles");
  launch_triton_cubin(dkdv, device, k_tiles, x.b * x.hk, kv_args);

  const TritonCubin& dq_k = cubin_for("retention_bwd_dq", x.q, d);
  auto dq = at::empty_like(x.q);
  auto kv_start = retention_tile_ranges(x.seg, dq_k.block_m, dq_k.block_n).start;
  const int64_t q_tiles = kv_start.size(1);
  TritonArgs q_args;
  q_args.tensor(x.q, "q").tensor(x.k, "k").tensor(x.v, "v").tensor(x.a, "log_beta");
  q_args.tensor(x.pos, "positions").tensor(x.seg, "segments").tensor(kv_start, "kv_start");
  q_args.tensor(d_out, "d_out").tensor(lse, "lse").tensor(delta, "delta").tensor(dq, "dq");
  q_args.f32(scale).i32(x.t, "T").i32(x.h, "H").i32(x.hk, "Hk").i32(q_tiles, "query tiles");
  launch_triton_cubin(dq_k, device, q_tiles, x.b * x.h, q_args);
  return {dq, dk, dv, da.to(log_beta.scalar_type())};
}

at::Tensor retention_sum_triton_forward(const at::Tensor& log_beta, const at::Tensor& positions,
                                        const at::Tensor& segments) {
  auto a = log_beta.contiguous();
  auto pos = positions.to(at::kInt).contiguous(), seg = segments.to(at::kInt).contiguous();
  const TritonCubin& c = cubin_for("retention_sum_fwd", a, 0);
  auto start = retention_tile_ranges(seg, c.block_m, c.block_m).start;
  auto s = at::empty_like(a);
  TritonArgs args;
  args.tensor(a, "log_beta").tensor(pos, "positions").tensor(seg, "segments");
  args.tensor(start, "start").tensor(s, "sum").i32(a.size(2), "T").i32(a.size(1), "Hk");
  args.i32(start.size(1), "tiles");
  launch_triton_cubin(c, a.get_device(), start.size(1), a.size(0) * a.size(1), args);
  return s;
}

at::Tensor retention_sum_triton_backward(const at::Tensor& log_beta, const at::Tensor& positions,
                                         const at::Tensor& segments, const at::Tensor& d_sum) {
  auto a = log_beta.contiguous(), ds = d_sum.to(at::kFloat).contiguous();
  auto pos = positions.to(at::kInt).contiguous(), seg = segments.to(at::kInt).contiguous();
  const TritonCubin& c = cubin_for("retention_sum_bwd", a, 0);
  auto end = retention_tile_ranges(seg, c.block_m, c.block_m).end;
  auto da = at::empty_like(a);
  TritonArgs args;
  args.tensor(a, "log_beta").tensor(pos, "positions").tensor(seg, "segments");
  args.tensor(end, "end").tensor(ds, "d_sum").tensor(da, "dlog_beta").i32(a.size(2), "T");
  args.i32(a.size(1), "Hk").i32(end.size(1), "tiles");
  launch_triton_cubin(c, a.get_device(), end.size(1), a.size(0) * a.size(1), args);
  return da;
}

}  // namespace retain
