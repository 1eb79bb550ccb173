"""Python launchers of the Triton retention kernels (kernels/triton/retention_attention.py).

The interpreter checks in `make test` call these on CPU tensors (TRITON_INTERPRET=1); a GPU
session can call them on CUDA tensors beside torch. kernels/triton_launch.cpp is the C++ twin
(same tables, grids and argument order) that launches the cubins compiled from the same kernels.
"""

from dataclasses import dataclass

import torch
import triton

import retention_attention as kernels


@dataclass(frozen=True)
class Blocks:
    """Tile shapes of one launch: query rows (m) and key columns (n) per program; warps/stages
    only matter on a GPU."""
    m: int = 64
    n: int = 64
    warps: int = 4
    stages: int = 2


def tile_segment_ranges(segments: torch.Tensor, tile: int):
    """(lo, hi), each (B, ceil(T / tile)) int32: the smallest and largest segment id of each tile
    of `tile` tokens (the tail tile over its real tokens only)."""
    b, t = segments.shape
    tiles = triton.cdiv(t, tile)
    pad = tiles * tile - t
    big = torch.iinfo(torch.int32).max
    seg = segments.to(torch.int32)
    lo = torch.nn.functional.pad(seg, (0, pad), value=big).view(b, tiles, tile).amin(-1)
    hi = torch.nn.functional.pad(seg, (0, pad), value=-big).view(b, tiles, tile).amax(-1)
    return lo.contiguous(), hi.contiguous()


def _prepare(q, k, v, log_beta, positions, segments):
    if q.shape[1] % k.shape[1] != 0:
        raise ValueError(f"query heads {q.shape[1]} are not a multiple of KV heads {k.shape[1]}")
    return (q.contiguous(), k.contiguous(), v.contiguous(), log_beta.float().contiguous(),
            positions.to(torch.int32).contiguous(), segments.to(torch.int32).contiguous())


def forward(q, k, v, log_beta, positions, segments, scale, blocks=Blocks()):
    """-> (out (B, H, T, D) in q's dtype, lse (B, H, T) fp32)."""
    q, k, v, a, pos, seg = _prepare(q, k, v, log_beta, positions, segments)
    b, h, t, d = q.shape
    hk = k.shape[1]
    q_lo, q_hi = tile_segment_ranges(seg, blocks.m)
    k_lo, k_hi = tile_segment_ranges(seg, blocks.n)
    out = torch.empty_like(q)
    lse = torch.empty((b, h, t), dtype=torch.float32, device=q.device)
    grid = (q_lo.shape[1], b * h)
    kernels.retention_fwd[grid](q, k, v, a, pos, seg, q_lo, q_hi, k_lo, k_hi, out, lse, scale, t,
                                h, hk, q_lo.shape[1], k_lo.shape[1], D=d, BLOCK_M=blocks.m,
                                BLOCK_N=blocks.n, num_warps=blocks.warps, num_stages=blocks.stages)
    return out, lse


def backward(q, k, v, log_beta, positions, segments, out, lse, d_out, scale,
             dq_blocks=Blocks(), dkdv_blocks=Blocks()):
    """-> (dq, dk, dv in the dtypes of q, k, v; d log_beta fp32)."""
    q, k, v, a, pos, seg = _prepare(q, k, v, log_beta, positions, segments)
    out, lse, d_out = out.contiguous(), lse.contiguous(), d_out.contiguous()
    b, h, t, d = q.shape
    hk = k.shape[1]
    delta = torch.empty((b, h, t), dtype=torch.float32, device=q.device)
    kernels.retention_bwd_delta[(triton.cdiv(t, dq_blocks.m), b * h)](
        out, d_out, delta, t, D=d, BLOCK_M=dq_blocks.m)

    dk, dv = torch.empty_like(k), torch.empty_like(v)
    da = torch.empty_like(a)
    q_lo, q_hi = tile_segment_ranges(seg, dkdv_blocks.m)
    k_lo, k_hi = tile_segment_ranges(seg, dkdv_blocks.n)
    kernels.retention_bwd_dkdv[(k_lo.shape[1], b * hk)](
        q, k, v, a, pos, seg, q_lo, q_hi, k_lo, k_hi, d_out, lse, delta, dk, dv, da, scale, t, h,
        hk, q_lo.shape[1], k_lo.shape[1], D=d, BLOCK_M=dkdv_blocks.m, BLOCK_N=dkdv_blocks.n,
        num_warps=dkdv_blocks.warps, num_stages=dkdv_blocks.stages)

    dq = torch.empty_like(q)
    q_lo, q_hi = tile_segment_ranges(seg, dq_blocks.m)
    k_lo, k_hi = tile_segment_ranges(seg, dq_blocks.n)
    kernels.retention_bwd_dq[(q_lo.shape[1], b * h)](
        q, k, v, a, pos, seg, q_lo, q_hi, k_lo, k_hi, d_out, lse, delta, dq, scale, t, h, hk,
        q_lo.shape[1], k_lo.shape[1], D=d, BLOCK_M=dq_blocks.m, BLOCK_N=dq_blocks.n,
        num_warps=dq_blocks.warps, num_stages=dq_blocks.stages)
    return dq, dk, dv, da


def retention_sum(log_beta, positions, segments, block=64):
    """(B, Hk, T) fp32 -> S (B, Hk, T) fp32."""
    a = log_beta.float().contiguous()
    pos, seg = positions.to(torch.int32).contiguous(), segments.to(torch.int32).contiguous()
    b, hk, t = a.shape
    lo, hi = tile_segment_ranges(seg, block)
    s = torch.empty_like(a)
    kernels.retention_sum_fwd[(lo.shape[1], b * hk)](a, pos, seg, lo, hi, s, t, hk, lo.shape[1],
                                                     BLOCK=block)
    return s


def retention_sum_backward(log_beta, positions, segments, d_sum, block=64):
    """-> d log_beta (B, Hk, T) fp32."""
    a = log_beta.float().contiguous()
    pos, seg = positions.to(torch.int32).contiguous(), segments.to(torch.int32).contiguous()
    b, hk, t = a.shape
    lo, hi = tile_segment_ranges(seg, block)
    da = torch.empty_like(a)
    kernels.retention_sum_bwd[(lo.shape[1], b * hk)](a, pos, seg, lo, hi,
                                                     d_sum.float().contiguous(), da, t, hk,
                                                     lo.shape[1], BLOCK=block)
    return da
