"""Python launcher of the chunked prefill attention over a cache (kernels/triton/cache_attention.py):
the interpreter check in `make test` calls it on CPU tensors (TRITON_INTERPRET=1), a GPU session
on CUDA tensors. kernels/cache_attention_triton.cpp is its C++ twin (same grid and argument
order)."""

import torch

import cache_attention as kernels


def attend(q, keys, values, key_positions, lengths, q_positions, scale, block_m=16, block_n=16,
           warps=4, stages=2):
    """q (B, H, T, D); keys, values (B, Hk, S, D); key_positions (B, Hk or 1, S) int64; lengths
    (B, Hk) int64; q_positions (B, T) int64 -> out (B, H, T, D) in q's dtype."""
    b, h, t, d = q.shape
    hk = keys.shape[1]
    assert h % hk == 0 and q.stride(3) == keys.stride(3) == values.stride(3) == 1
    assert key_positions.dtype == lengths.dtype == q_positions.dtype == torch.int64
    out = torch.empty_like(q)
    head_stride = key_positions.stride(1) if key_positions.shape[1] == hk else 0
    grid = (triton_cdiv(t, block_m), b * h)
    kernels.cache_attention[grid](
        q, keys, values, key_positions, lengths, q_positions, out, t, h, h // hk, scale,
        q.stride(0), q.stride(1), q.stride(2), keys.stride(0), keys.stride(1), keys.stride(2),
        values.stride(0), values.stride(1), values.stride(2), key_positions.stride(0),
        head_stride, key_positions.stride(2), lengths.stride(0), lengths.stride(1),
        q_positions.stride(0), q_positions.stride(1), out.stride(0), out.stride(1), out.stride(2),
        D=d, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps, num_stages=stages)
    return out


def triton_cdiv(a, b):
    return (a + b - 1) // b
