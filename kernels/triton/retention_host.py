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


def document_bounds(segments: torch.Tensor):
    """(first, last), each (B, T) int64: the index of the first and the last token of each
    token's document (the tokens of its row with its segment id). Padding (segment -1) gets
    first = T and last = -1: it sees nothing and nothing sees it. Ids >= T share one slot (their
    documents get the union of their spans: wider, never narrower; no host sync)."""
    b, t = segments.shape
    seg = segments.to(torch.int64)
    padding = seg < 0
    slots = t + 1  # ids 0 .. T - 1, then one slot for padding
    slot = torch.where(padding, t, seg.clamp(max=max(t - 1, 0)))
    index = torch.arange(t, device=seg.device).expand(b, t)
    first = torch.full((b, slots), t, dtype=torch.int64, device=seg.device)
    first = first.scatter_reduce(1, slot, index, "amin").gather(1, slot)
    last = torch.full((b, slots), -1, dtype=torch.int64, device=seg.device)
    last = last.scatter_reduce(1, slot, index, "amax").gather(1, slot)
    return first.masked_fill(padding, t), last.masked_fill(padding, -1)


def tile_ranges(segments: torch.Tensor, row_tile: int, col_tile: int):
    """(start, end), int32, the loop bounds of the kernels:
    start (B, ceil(T / row_tile)): per tile of rows (queries), the first tile of columns (keys)
        that any of its rows can see: the column tile of its earliest document start;
    end (B, ceil(T / col_tile)): per tile of columns, one past the last tile of rows that can see
        any of its columns: the row tile of its latest document end, plus one."""
    first, last = document_bounds(segments)
    b, t = first.shape

    def per_tile(x, tile, pad, reduce):
        tiles = triton.cdiv(t, tile)
        x = torch.nn.functional.pad(x, (0, tiles * tile - t), value=pad).view(b, tiles, tile)
        return reduce(x, -1)

    start = per_tile(first, row_tile, t, torch.amin) // col_tile
    end = per_tile(last, col_tile, -1, torch.amax).div(row_tile, rounding_mode="floor") + 1
    return start.to(torch.int32).contiguous(), end.to(torch.int32).contiguous()


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
    kv_start, _ = tile_ranges(seg, blocks.m, blocks.n)
    out = torch.empty_like(q)
    lse = torch.empty((b, h, t), dtype=torch.float32, device=q.device)
    grid = (kv_start.shape[1], b * h)
    kernels.retention_fwd[grid](q, k, v, a, pos, seg, kv_start, out, lse, scale, t, h, hk,
                                kv_start.shape[1], D=d, BLOCK_M=blocks.m, BLOCK_N=blocks.n,
                                num_warps=blocks.warps, num_stages=blocks.stages)
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
    _, q_end = tile_ranges(seg, dkdv_blocks.m, dkdv_blocks.n)
    kernels.retention_bwd_dkdv[(q_end.shape[1], b * hk)](
        q, k, v, a, pos, seg, q_end, d_out, lse, delta, dk, dv, da, scale, t, h, hk,
        q_end.shape[1], D=d, BLOCK_M=dkdv_blocks.m, BLOCK_N=dkdv_blocks.n,
        num_warps=dkdv_blocks.warps, num_stages=dkdv_blocks.stages)

    dq = torch.empty_like(q)
    kv_start, _ = tile_ranges(seg, dq_blocks.m, dq_blocks.n)
    kernels.retention_bwd_dq[(kv_start.shape[1], b * h)](
        q, k, v, a, pos, seg, kv_start, d_out, lse, delta, dq, scale, t, h, hk,
        kv_start.shape[1], D=d, BLOCK_M=dq_blocks.m, BLOCK_N=dq_blocks.n,
        num_warps=dq_blocks.warps, num_stages=dq_blocks.stages)
    return dq, dk, dv, da


def retention_sum(log_beta, positions, segments, block=64, warps=4, stages=1):
    """(B, Hk, T) fp32 -> S (B, Hk, T) fp32."""
    a = log_beta.float().contiguous()
    pos, seg = positions.to(torch.int32).contiguous(), segments.to(torch.int32).contiguous()
    b, hk, t = a.shape
    start, _ = tile_ranges(seg, block, block)
    s = torch.empty_like(a)
    kernels.retention_sum_fwd[(start.shape[1], b * hk)](a, pos, seg, start, s, t, hk,
                                                        start.shape[1], BLOCK=block,
                                                        num_warps=warps, num_stages=stages)
    return s


def retention_sum_backward(log_beta, positions, segments, d_sum, block=64, warps=4, stages=1):
    """-> d log_beta (B, Hk, T) fp32."""
    a = log_beta.float().contiguous()
    pos, seg = positions.to(torch.int32).contiguous(), segments.to(torch.int32).contiguous()
    b, hk, t = a.shape
    _, end = tile_ranges(seg, block, block)
    da = torch.empty_like(a)
    kernels.retention_sum_bwd[(end.shape[1], b * hk)](a, pos, seg, end,
                                                      d_sum.float().contiguous(), da, t, hk,
                                                      end.shape[1], BLOCK=block,
                                                      num_warps=warps, num_stages=stages)
    return da
