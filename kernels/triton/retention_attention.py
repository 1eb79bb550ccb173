"""Retention attention and the retention sum as Triton kernels (FlashAttention-2 algorithm).

    s_ij = q_i . k_j * scale + (pos_i - pos_j) * a_j     for j <= i in the same document,

a_j = log beta_j <= 0 (kernels/retention_attention.h has the definition and the ATen reference).
The bias is computed in fp32 inside the tile from integer positions: pos_i - pos_j is exact in
int32 and in fp32 up to 2^24, so a row at position 128k loses nothing to its offset.

Three places run this file:
  - `make test` runs the kernels on the CPU through Triton's interpreter (TRITON_INTERPRET=1,
    tests/fixtures/make_triton_cases.py) and compares them with the ATen reference in C++
    (tests/triton_kernels_test.cpp), in fp32 and fp16 (the interpreter's bf16 dot is wrong);
  - the build compiles them ahead of time into cubins (kernels/triton/compile_cubins.py), which
    kernels/triton_launch.cpp launches through the CUDA driver API: no Python at run time;
  - the host functions below (forward, backward, retention_sum...) launch them from Python, for
    the interpreter and for a GPU session's checks beside torch.

Layouts (every tensor contiguous): q (B, H, T, D); k, v (B, Hk, T, D); a (B, Hk, T) fp32;
positions, segments (B, T) int32 (segment -1: padding, sees and is seen by nothing). Query head h
reads KV head h // (H / Hk). out (B, H, T, D); lse (B, H, T) fp32, natural log, -inf on a row that
sees no key.

Tile skipping: the host passes, per query tile, the first key tile any of its rows can see
(KV_START: the tile of the first token of the row's document) and, per key tile, the end of the
query tiles that can see it (Q_END) (tile_ranges in retention_host.py). The loops run over those
ranges only, with no branch inside (which would keep Triton from pipelining the loads); causality
bounds them on the other side. A tile inside the range that a row cannot see is masked.

Integer parameters are not specialised (do_not_specialize): the JIT (the interpreter, the tuner on a
GPU) then compiles what the build ships, where no integer is assumed divisible by 16 or equal to 1.

The kernels' parameters are the ABI of the cubins: kernels/triton_launch.cpp passes the same
arguments in the same order (plus Triton's two scratch pointers); change both together.
"""

import triton
import triton.language as tl

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@triton.jit
def _scores_log2(q, k, a, pos_q, pos_k, seg_q, seg_k, rows, cols, T, scale_log2):
    """Scores of one (query tile, key tile) in log2 units, -inf where a key is not visible."""
    s = tl.dot(q, tl.trans(k)) * scale_log2
    distance = (pos_q[:, None] - pos_k[None, :]).to(tl.float32)
    s += distance * (a * 1.4426950408889634)[None, :]
    visible = (seg_q[:, None] == seg_k[None, :]) & (seg_q[:, None] >= 0)
    visible = visible & (cols[None, :] <= rows[:, None]) & (cols[None, :] < T)
    return tl.where(visible, s, float("-inf")), distance


@triton.jit
def _load_key_tile(K, V, A, POS, SEG, kv_base, b, T, kt, D: tl.constexpr, BLOCK_N: tl.constexpr):
    """Key tile kt of one KV head (rows of K and V from kv_base): its indices, K, V, log beta,
    positions and segments; past T, zeros and segment -2 (matches nothing)."""
    cols = kt * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < T
    offsets = (kv_base + cols[:, None]) * D + tl.arange(0, D)[None, :]
    k = tl.load(K + offsets, mask=col_ok[:, None], other=0.0)
    v = tl.load(V + offsets, mask=col_ok[:, None], other=0.0)
    a = tl.load(A + kv_base + cols, mask=col_ok, other=0.0)
    pos = tl.load(POS + b * T + cols, mask=col_ok, other=0)
    seg = tl.load(SEG + b * T + cols, mask=col_ok, other=-2)
    return cols, k, v, a, pos, seg


@triton.jit
def _load_query_rows(Q, DOUT, LSE, DELTA, POS, SEG, q_base, b, T, qt, D: tl.constexpr,
                     BLOCK_M: tl.constexpr):
    """What the backward kernels read of query tile qt of one head (rows from q_base): indices, Q,
    dO, the logsumexp in log2 units (0 on a row that sees nothing: its scores are all -inf, so P is
    0), delta, positions and segments; past T, zeros and segment -1."""
    rows = qt * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < T
    offsets = (q_base + rows[:, None]) * D + tl.arange(0, D)[None, :]
    q = tl.load(Q + offsets, mask=row_ok[:, None], other=0.0)
    do = tl.load(DOUT + offsets, mask=row_ok[:, None], other=0.0)
    lse = tl.load(LSE + q_base + rows, mask=row_ok, other=0.0)
    lse_log2 = tl.where(lse == float("-inf"), 0.0, lse * 1.4426950408889634)
    delta = tl.load(DELTA + q_base + rows, mask=row_ok, other=0.0)
    pos = tl.load(POS + b * T + rows, mask=row_ok, other=0)
    seg = tl.load(SEG + b * T + rows, mask=row_ok, other=-1)
    return rows, q, do, lse_log2, delta, pos, seg


@triton.jit(do_not_specialize=["T", "H", "HK", "NQT"])
def retention_fwd(Q, K, V, A, POS, SEG, KV_START, OUT, LSE, scale, T, H, HK, NQT,
                  D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    qt = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    hk = (bh % H) // (H // HK)
    rows = qt * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    row_ok = rows < T
    q_base = bh.to(tl.int64) * T * D
    kv_base = (b * HK + hk).to(tl.int64) * T
    q = tl.load(Q + q_base + rows[:, None] * D + dims[None, :], mask=row_ok[:, None], other=0.0)
    pos_q = tl.load(POS + b * T + rows, mask=row_ok, other=0)
    seg_q = tl.load(SEG + b * T + rows, mask=row_ok, other=-1)
    kt_start = tl.load(KV_START + b * NQT + qt)
    kt_end = (tl.minimum(qt * BLOCK_M + BLOCK_M, T) - 1) // BLOCK_N + 1  # keys after the last row
    scale_log2 = scale * 1.4426950408889634

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for kt in range(kt_start, kt_end):
        cols, k, v, a, pos_k, seg_k = _load_key_tile(K, V, A, POS, SEG, kv_base, b, T, kt, D,
                                                     BLOCK_N)
        s, _ = _scores_log2(q, k, a, pos_q, pos_k, seg_q, seg_k, rows, cols, T, scale_log2)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        # Rows that have seen nothing yet keep -inf: shift them by 0 so exp2 gives 0, not NaN.
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp2(s - shift[:, None])
        alpha = tl.exp2(m_i - shift)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    seen = l_i > 0
    out = acc / tl.where(seen, l_i, 1.0)[:, None]
    tl.store(OUT + q_base + rows[:, None] * D + dims[None, :], out.to(OUT.dtype.element_ty),
             mask=row_ok[:, None])
    lse = tl.where(seen, (m_i + tl.log2(tl.where(seen, l_i, 1.0))) * 0.6931471805599453,
                   float("-inf"))
    tl.store(LSE + bh.to(tl.int64) * T + rows, lse, mask=row_ok)


@triton.jit(do_not_specialize=["T"])
def retention_bwd_delta(OUT, DOUT, DELTA, T, D: tl.constexpr, BLOCK_M: tl.constexpr):
    """delta_i = sum_d dO_id O_id, the softmax backward's row term, fp32."""
    bh = tl.program_id(1)
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, D)
    row_ok = rows < T
    offsets = bh.to(tl.int64) * T * D + rows[:, None] * D + dims[None, :]
    o = tl.load(OUT + offsets, mask=row_ok[:, None], other=0.0).to(tl.float32)
    do = tl.load(DOUT + offsets, mask=row_ok[:, None], other=0.0).to(tl.float32)
    tl.store(DELTA + bh.to(tl.int64) * T + rows, tl.sum(o * do, 1), mask=row_ok)


@triton.jit(do_not_specialize=["T", "H", "HK", "NKT"])
def retention_bwd_dkdv(Q, K, V, A, POS, SEG, Q_END, DOUT, LSE, DELTA, DK, DV, DA, scale, T, H,
                       HK, NKT, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program per (key tile, KV head, row): dK, dV and d a of the tile, summed in registers
    over the G query heads of the group and every query tile that sees it (no atomics)."""
    kt = tl.program_id(0)
    bhk = tl.program_id(1)
    b = bhk // HK
    group = H // HK
    dims = tl.arange(0, D)
    kv_base = bhk.to(tl.int64) * T
    cols, k, v, a, pos_k, seg_k = _load_key_tile(K, V, A, POS, SEG, kv_base, b, T, kt, D, BLOCK_N)
    col_ok = cols < T
    qt_start = (kt * BLOCK_N) // BLOCK_M  # query tiles before the key tile's first key: masked
    qt_end = tl.load(Q_END + b * NKT + kt)
    scale_log2 = scale * 1.4426950408889634

    dk = tl.zeros([BLOCK_N, D], tl.float32)
    dv = tl.zeros([BLOCK_N, D], tl.float32)
    da = tl.zeros([BLOCK_N], tl.float32)
    for g in range(0, group):
        bh = b * H + (bhk % HK) * group + g
        q_base = bh.to(tl.int64) * T
        for qt in range(qt_start, qt_end):
            rows, q, do, lse_log2, delta, pos_q, seg_q = _load_query_rows(
                Q, DOUT, LSE, DELTA, POS, SEG, q_base, b, T, qt, D, BLOCK_M)
            s, distance = _scores_log2(q, k, a, pos_q, pos_k, seg_q, seg_k, rows, cols, T,
                                       scale_log2)
            p = tl.exp2(s - lse_log2[:, None])
            dv += tl.dot(tl.trans(p.to(do.dtype)), do)
            dp = tl.dot(do, tl.trans(v))
            ds = p * (dp - delta[:, None])
            dk += tl.dot(tl.trans(ds.to(q.dtype)), q)
            da += tl.sum(ds * distance, 0)
    tl.store(DK + (kv_base + cols[:, None]) * D + dims[None, :], (dk * scale).to(DK.dtype.element_ty),
             mask=col_ok[:, None])
    tl.store(DV + (kv_base + cols[:, None]) * D + dims[None, :], dv.to(DV.dtype.element_ty),
             mask=col_ok[:, None])
    tl.store(DA + kv_base + cols, da, mask=col_ok)


@triton.jit(do_not_specialize=["T", "H", "HK", "NQT"])
def retention_bwd_dq(Q, K, V, A, POS, SEG, KV_START, DOUT, LSE, DELTA, DQ, scale, T, H, HK, NQT,
                     D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """One program per (query tile, query head, row): dQ of the tile over the key tiles it sees."""
    qt = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // H
    hk = (bh % H) // (H // HK)
    q_base = bh.to(tl.int64) * T
    kv_base = (b * HK + hk).to(tl.int64) * T
    rows, q, do, lse_log2, delta, pos_q, seg_q = _load_query_rows(
        Q, DOUT, LSE, DELTA, POS, SEG, q_base, b, T, qt, D, BLOCK_M)
    dims = tl.arange(0, D)
    row_ok = rows < T
    kt_start = tl.load(KV_START + b * NQT + qt)
    kt_end = (tl.minimum(qt * BLOCK_M + BLOCK_M, T) - 1) // BLOCK_N + 1
    scale_log2 = scale * 1.4426950408889634

    dq = tl.zeros([BLOCK_M, D], tl.float32)
    for kt in range(kt_start, kt_end):
        cols, k, v, a, pos_k, seg_k = _load_key_tile(K, V, A, POS, SEG, kv_base, b, T, kt, D,
                                                     BLOCK_N)
        s, _ = _scores_log2(q, k, a, pos_q, pos_k, seg_q, seg_k, rows, cols, T, scale_log2)
        p = tl.exp2(s - lse_log2[:, None])
        dp = tl.dot(do, tl.trans(v))
        ds = p * (dp - delta[:, None])
        dq += tl.dot(ds.to(k.dtype), k)
    tl.store(DQ + (q_base + rows[:, None]) * D + dims[None, :], (dq * scale).to(DQ.dtype.element_ty),
             mask=row_ok[:, None])


@triton.jit(do_not_specialize=["T", "HK", "NT"])
def retention_sum_fwd(A, POS, SEG, START, S, T, HK, NT, BLOCK: tl.constexpr):
    """S_t = sum over i <= t in t's document of exp((pos_t - pos_i) a_i): one program per
    (tile of t, KV head, row), looping over the tiles of i that t's tile can see."""
    tt = tl.program_id(0)
    bhk = tl.program_id(1)
    b = bhk // HK
    rows = tt * BLOCK + tl.arange(0, BLOCK)
    row_ok = rows < T
    base = bhk.to(tl.int64) * T
    pos_t = tl.load(POS + b * T + rows, mask=row_ok, other=0)
    seg_t = tl.load(SEG + b * T + rows, mask=row_ok, other=-1)
    total = tl.zeros([BLOCK], tl.float32)
    for it in range(tl.load(START + b * NT + tt), tt + 1):
        cols = it * BLOCK + tl.arange(0, BLOCK)
        col_ok = cols < T
        a = tl.load(A + base + cols, mask=col_ok, other=0.0)
        pos_i = tl.load(POS + b * T + cols, mask=col_ok, other=0)
        seg_i = tl.load(SEG + b * T + cols, mask=col_ok, other=-2)
        e, _ = _retention_terms(a, pos_t, pos_i, seg_t, seg_i, rows, cols, T)
        total += tl.sum(e, 1)
    tl.store(S + base + rows, total, mask=row_ok)


@triton.jit(do_not_specialize=["T", "HK", "NT"])
def retention_sum_bwd(A, POS, SEG, END, DS, DA, T, HK, NT, BLOCK: tl.constexpr):
    """d a_i = sum over the t that count i of dS_t (pos_t - pos_i) exp((pos_t - pos_i) a_i): one
    program per (tile of i, KV head, row), looping over the tiles of t at or after it."""
    it = tl.program_id(0)
    bhk = tl.program_id(1)
    b = bhk // HK
    cols = it * BLOCK + tl.arange(0, BLOCK)
    col_ok = cols < T
    base = bhk.to(tl.int64) * T
    a = tl.load(A + base + cols, mask=col_ok, other=0.0)
    pos_i = tl.load(POS + b * T + cols, mask=col_ok, other=0)
    seg_i = tl.load(SEG + b * T + cols, mask=col_ok, other=-2)
    da = tl.zeros([BLOCK], tl.float32)
    for tt in range(it, tl.load(END + b * NT + it)):
        rows = tt * BLOCK + tl.arange(0, BLOCK)
        row_ok = rows < T
        pos_t = tl.load(POS + b * T + rows, mask=row_ok, other=0)
        seg_t = tl.load(SEG + b * T + rows, mask=row_ok, other=-1)
        ds = tl.load(DS + base + rows, mask=row_ok, other=0.0)
        e, distance = _retention_terms(a, pos_t, pos_i, seg_t, seg_i, rows, cols, T)
        da += tl.sum(e * distance * ds[:, None], 0)
    tl.store(DA + base + cols, da, mask=col_ok)


@triton.jit
def _retention_terms(a, pos_t, pos_i, seg_t, seg_i, rows, cols, T):
    """exp((pos_t - pos_i) a_i) for the (t, i) of two tiles where i counts for t, else 0."""
    distance = (pos_t[:, None] - pos_i[None, :]).to(tl.float32)
    visible = (seg_t[:, None] == seg_i[None, :]) & (seg_t[:, None] >= 0)
    visible = visible & (cols[None, :] <= rows[:, None]) & (cols[None, :] < T)
    # Masked pairs (i after t) would overflow exp2: their distance goes to 0 first.
    distance = tl.where(visible, distance, 0.0)
    e = tl.exp2(distance * (a * 1.4426950408889634)[None, :])
    return tl.where(visible, e, 0.0), distance
