"""Python launcher of the fused cache append (kernels/triton/cache_append.py): the interpreter
check in `make test` calls it on CPU tensors (TRITON_INTERPRET=1), a GPU session on CUDA tensors.
kernels/cache_append_triton.cpp is its C++ twin (same grid and argument order)."""

import torch

import cache_append as kernels


def append(cache_k, cache_v, cache_pos, cache_stat, length, new_k, new_v, new_pos, new_stat,
           block_t=16, warps=1):
    """Appends in place: cache_* (B, Hk, C[, D]) contiguous, length (B, Hk) int64; new_k, new_v
    (B, Hk, n, D) with unit stride along D, new_pos (B, n) int64, new_stat (B, Hk, n) fp32."""
    b, hk, c, d = cache_k.shape
    n = new_k.shape[2]
    assert new_k.stride(3) == 1 and new_v.stride(3) == 1
    for t in (cache_k, cache_v, cache_pos, cache_stat, length):
        assert t.is_contiguous()
    assert cache_pos.dtype == new_pos.dtype == length.dtype == torch.int64
    assert cache_stat.dtype == new_stat.dtype == torch.float32
    kernels.cache_append[(b * hk,)](
        cache_k, cache_v, cache_pos, cache_stat, length, new_k, new_v, new_pos, new_stat, n, hk, c,
        new_k.stride(0), new_k.stride(1), new_k.stride(2), new_v.stride(0), new_v.stride(1),
        new_v.stride(2), new_pos.stride(0), new_pos.stride(1), new_stat.stride(0),
        new_stat.stride(1), new_stat.stride(2), D=d, BLOCK_T=block_t, num_warps=warps)
