"""Chunked prefill's attention over a KV cache as one Triton kernel (FlashAttention-2's forward):
a chunk of T queries at their positions reads every live entry of its KV head, masked by the
entries' own positions, without the dense (T, S) mask that keeps SDPA off its flash path.

    out_i = sum_j softmax_j(q_i . k_j * scale) v_j    over the live entries j with 0 <= pos_j <= pos_i

(model/kv_cache.h's rule without a sliding window; kernels/cache_attention_triton.h has the
contract). A query that sees no entry (padding, position -1) gets zeros where the model's
attention gives uniform weights: its output is never read.

One program per (tile of BLOCK_M queries, sequence, query head): it walks the first `length`
entries of its KV head (h // (H / Hk)) in tiles of BLOCK_N with the online softmax, in fp32, and
writes its tile once. Entries past a head's length are never read: the budgeted cache's heads hold
different numbers of live entries, and the full cache passes one length for every head.

Layouts: q (B, H, T, D), out (B, H, T, D), the cache's keys and values (B, Hk, S, D), all with unit
stride along D and any other strides; entry positions (B, Hk, S) int64, or shared by the heads
(B, 1, S) with a head stride of 0; lengths (B, Hk) int64 (strides again); query positions (B, T)
int64. Strides are int64 (a cache's offsets pass 2^31).

Run by `make test` on the CPU through Triton's interpreter (tests/fixtures/make_triton_cases.py,
compared with the model's attention in tests/triton_kernels_test.cpp, fp32 and fp16: the
interpreter's bf16 dot is wrong) and compiled ahead of time into cubins (compile_cubins.py) that
kernels/cache_attention_triton.cpp launches. The parameters are the cubins' ABI: change both
together.
"""

import triton
import triton.language as tl


@triton.jit(do_not_specialize=["T", "H", "G", "scale", "stride_qb", "stride_qh", "stride_qt",
                               "stride_kb", "stride_kh", "stride_kt", "stride_vb", "stride_vh",
                               "stride_vt", "stride_pb", "stride_ph", "stride_pt", "stride_lb",
                               "stride_lh", "stride_xb", "stride_xt", "stride_ob", "stride_oh",
                               "stride_ot"])
def cache_attention(Q, K, V, KPOS, LENGTH, QPOS, OUT, T, H, G, scale, stride_qb, stride_qh,
                    stride_qt, stride_kb, stride_kh, stride_kt, stride_vb, stride_vh, stride_vt,
                    stride_pb, stride_ph, stride_pt, stride_lb, stride_lh, stride_xb, stride_xt,
                    stride_ob, stride_oh, stride_ot, D: tl.constexpr, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr):
    tile = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    b = bh // H
    h = bh % H
    hk = h // G
    rows = tile * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < T
    dims = tl.arange(0, D)
    q = tl.load(Q + b * stride_qb + h * stride_qh + rows[:, None].to(tl.int64) * stride_qt
                + dims[None, :], mask=row_ok[:, None], other=0.0)
    q_pos = tl.load(QPOS + b * stride_xb + rows.to(tl.int64) * stride_xt, mask=row_ok, other=-1)
    length = tl.load(LENGTH + b * stride_lb + hk * stride_lh)
    scale_log2 = scale * 1.4426950408889634
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    k_base = K + b * stride_kb + hk * stride_kh
    v_base = V + b * stride_vb + hk * stride_vh
    p_base = KPOS + b * stride_pb + hk * stride_ph
    for start in range(0, length, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        col_ok = cols < length
        k = tl.load(k_base + cols[:, None].to(tl.int64) * stride_kt + dims[None, :],
                    mask=col_ok[:, None], other=0.0)
        v = tl.load(v_base + cols[:, None].to(tl.int64) * stride_vt + dims[None, :],
                    mask=col_ok[:, None], other=0.0)
        k_pos = tl.load(p_base + cols.to(tl.int64) * stride_pt, mask=col_ok, other=-1)
        s = tl.dot(q, tl.trans(k)) * scale_log2
        visible = (k_pos[None, :] >= 0) & (k_pos[None, :] <= q_pos[:, None])
        s = tl.where(visible, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        # A row that has seen nothing yet keeps m = -inf: shift by 0 there, so exp2 gives 0, not
        # NaN from -inf - -inf.
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(s - shift[:, None])
        alpha = tl.math.exp2(m_i - shift)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    tl.store(OUT + b * stride_ob + h * stride_oh + rows[:, None].to(tl.int64) * stride_ot
             + dims[None, :], out.to(OUT.dtype.element_ty), mask=row_ok[:, None])
