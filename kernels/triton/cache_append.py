"""The budgeted cache's append as one Triton kernel: a decode step's keys, values, positions and
policy statistic land after each KV head's live entries, and the head's length grows, in one
launch instead of ATen's four scatters, their index arithmetic and the length update
(eval/cache/cache_storage.cpp; kernels/cache_cpu.h has the contract: write_at_lengths).

One program per (sequence, KV head): it reads the head's length once, copies the new tokens in
tiles of BLOCK_T rows of D, then writes length + n. No other program touches that head, so the
length is read before it is written without any synchronisation across programs. A slot at or
past the capacity C is not written (the caller made room: static decode sizes the buffers ahead).

Layouts: the cache's keys and values (B, Hk, C, D) contiguous, positions (B, Hk, C) int64,
statistic (B, Hk, C) fp32, lengths (B, Hk) int64; the new keys and values (B, Hk, n, D) with unit
stride along D, positions (B, n) int64, statistic (B, Hk, n) fp32, any other strides (passed as
int64, so a 64-bit offset never wraps).

Run by `make test` on the CPU through Triton's interpreter (tests/fixtures/make_triton_cases.py,
compared bit for bit with write_at_lengths in tests/triton_kernels_test.cpp) and compiled ahead of
time into cubins (compile_cubins.py) that kernels/cache_append_triton.cpp launches. The
parameters are the cubins' ABI: change both together.
"""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["n", "HK", "C", "stride_kb", "stride_kh", "stride_kt", "stride_vb",
                               "stride_vh", "stride_vt", "stride_pb", "stride_pt", "stride_sb",
                               "stride_sh", "stride_st"])
def cache_append(CACHE_K, CACHE_V, CACHE_POS, CACHE_STAT, LENGTH, NEW_K, NEW_V, NEW_POS, NEW_STAT,
                 n, HK, C, stride_kb, stride_kh, stride_kt, stride_vb, stride_vh, stride_vt,
                 stride_pb, stride_pt, stride_sb, stride_sh, stride_st, D: tl.constexpr,
                 BLOCK_T: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)  # the (sequence, KV head) row of the cache
    b = r // HK
    h = r % HK
    length = tl.load(LENGTH + r)
    row = r * C  # the row's first slot
    dims = tl.arange(0, D)
    for t0 in range(0, n, BLOCK_T):
        t = t0 + tl.arange(0, BLOCK_T)
        slot = length + t
        ok = (t < n) & (slot < C)
        k = tl.load(NEW_K + b * stride_kb + h * stride_kh + t[:, None] * stride_kt + dims[None, :],
                    mask=ok[:, None])
        v = tl.load(NEW_V + b * stride_vb + h * stride_vh + t[:, None] * stride_vt + dims[None, :],
                    mask=ok[:, None])
        at = (row + slot)[:, None] * D + dims[None, :]
        tl.store(CACHE_K + at, k, mask=ok[:, None])
        tl.store(CACHE_V + at, v, mask=ok[:, None])
        pos = tl.load(NEW_POS + b * stride_pb + t * stride_pt, mask=ok)
        tl.store(CACHE_POS + row + slot, pos, mask=ok)
        stat = tl.load(NEW_STAT + b * stride_sb + h * stride_sh + t * stride_st, mask=ok)
        tl.store(CACHE_STAT + row + slot, stat, mask=ok)
    tl.store(LENGTH + r, length + n)
