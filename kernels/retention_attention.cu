// CUDA kernels of retention attention (forward, backward) and retention sum (forward, backward):
// the fused versions of the ATen reference in retention_attention.cpp, with the same masking
// (key j is visible to query i iff seg_j == seg_i >= 0 and j <= i, indices in the packed row) and
// the same bias (pos_i - pos_j) * log_beta_j, computed in the tile.
//
// Design (FlashAttention-2 structure, written for clarity first):
// - Forward: one block per (query tile, query head, batch row); loops over key tiles left to
//   right with an online softmax; saves the logsumexp per row. Key tiles after the query tile's
//   last row, and tiles whose segment ids cannot meet the query tile's, are skipped.
// - Backward: one block per (key tile, KV head, batch row); loops over the G query heads of the
//   group and the query tiles at or after the key tile, recomputing P from the saved logsumexp.
//   dK, dV and d log beta accumulate in the block (no atomics: the block owns its keys for every
//   head of the group); dQ accumulates in an fp32 buffer with atomicAdd.
// - Matrix products go through smem_gemm: shared-memory operands and an fp32 shared-memory
//   result. bf16/fp16 use the tensor cores through WMMA (16x16x16, fp32 accumulation); fp32
//   inputs use plain FMA (exact fp32, used by tests and small runs). A Hopper-tuned version
//   would load tiles with TMA (cp.async.bulk.tensor) into a multi-stage mbarrier pipeline and
//   keep S / O in wgmma register accumulators; load_rows and smem_gemm are where that goes.
// - Softmax statistics and everything after the products are fp32; P and dS are rounded to the
//   input dtype only as tensor-core operands.
//
// Shapes: B batch, H query heads, Hk KV heads, G = H / Hk, T tokens, D head dim (64 or 128).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kernels/cuda_common.cuh"
#include "kernels/cuda_launchers.h"

namespace retain {

namespace {

using namespace nvcuda;

constexpr int kFwdThreads = 128;
constexpr int kBwdThreads = 256;
constexpr int kSumThreads = 128;  // retention sum: one token per thread, tiles of 128 tokens

// Tile shapes per (dtype, head dim). Query and key tiles have the same length so one table of
// per-tile segment ranges serves both.
template <typename T, int D>
struct AttnTile {
  static constexpr bool kTensorCores = !std::is_same_v<T, float>;
  static constexpr int kRows = kTensorCores ? 64 : 32;  // BQ = BK
  static constexpr int kPad = 16 / static_cast<int>(sizeof(T));
  static constexpr int kLdT = D + kPad;      // Q, K, V, dO tiles (T)
  static constexpr int kLdS = kRows + 4;     // scores, dP (fp32)
  static constexpr int kLdP = kRows + kPad;  // P, dS as tensor-core operands (T)
  static constexpr int kLdO = D + 4;         // O, dK, dV, dQ (fp32)
  static_assert(kLdP * sizeof(T) <= kLdS * sizeof(float), "P must fit over the scores it replaces");
};

// Shared memory carve-up: each buffer starts on a 128-byte boundary (WMMA needs 32).
struct SmemCursor {
  unsigned char* base;
  size_t offset = 0;
  template <typename U>
  __device__ U* take(size_t count) {
    U* p = reinterpret_cast<U*>(base + offset);
    offset += (count * sizeof(U) + 127) / 128 * 128;
    return p;
  }
};
constexpr size_t smem_bytes(size_t count, size_t size) { return (count * size + 127) / 128 * 128; }

// Copies rows [row0, row0 + kRows) of a (len, D) row-major matrix into shared memory with leading
// dimension ld, 16 bytes per access; rows past len are zero.
template <typename T, int D, int kRows, int kThreads>
__device__ __forceinline__ void load_rows(T* dst, int ld, const T* src, int row0, int len) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kChunks = D / kVec;
  for (int idx = threadIdx.x; idx < kRows * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = (idx % kChunks) * kVec;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (row0 + r < len)
      val = *reinterpret_cast<const uint4*>(src + static_cast<int64_t>(row0 + r) * D + c);
    *reinterpret_cast<uint4*>(dst + r * ld + c) = val;
  }
}

// C (M x N, fp32) = or += A (M x K) * B (K x N), everything in shared memory. kTransA: A is stored
// as K x M (its transpose is read); kTransB: B is stored as N x K. Ends without a barrier.
template <typename T, int M, int N, int K, bool kTransA, bool kTransB, int kThreads>
__device__ __forceinline__ void smem_gemm(const T* a, int lda, const T* b, int ldb, float* c,
                                          int ldc, bool accumulate) {
  if constexpr (std::is_same_v<T, float>) {
    for (int idx = threadIdx.x; idx < M * N; idx += kThreads) {
      const int m = idx / N, n = idx % N;
      float sum = accumulate ? c[m * ldc + n] : 0.f;
#pragma unroll 8
      for (int k = 0; k < K; ++k) {
        const float x = kTransA ? a[k * lda + m] : a[m * lda + k];
        const float y = kTransB ? b[n * ldb + k] : b[k * ldb + n];
        sum = fmaf(x, y, sum);
      }
      c[m * ldc + n] = sum;
    }
  } else {
    using LayoutA = std::conditional_t<kTransA, wmma::col_major, wmma::row_major>;
    using LayoutB = std::conditional_t<kTransB, wmma::col_major, wmma::row_major>;
    constexpr int kTilesN = N / 16, kTiles = (M / 16) * kTilesN;
    static_assert(M % 16 == 0 && N % 16 == 0 && K % 16 == 0, "WMMA tiles are 16 x 16 x 16");
    for (int tile = threadIdx.x / 32; tile < kTiles; tile += kThreads / 32) {
      const int m0 = (tile / kTilesN) * 16, n0 = (tile % kTilesN) * 16;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      if (accumulate)
        wmma::load_matrix_sync(acc, c + m0 * ldc + n0, ldc, wmma::mem_row_major);
      else
        wmma::fill_fragment(acc, 0.f);
#pragma unroll
      for (int k0 = 0; k0 < K; k0 += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LayoutA> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LayoutB> fb;
        wmma::load_matrix_sync(fa, kTransA ? a + k0 * lda + m0 : a + m0 * lda + k0, lda);
        wmma::load_matrix_sync(fb, kTransB ? b + n0 * ldb + k0 : b + k0 * ldb + n0, ldb);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(c + m0 * ldc + n0, acc, ldc, wmma::mem_row_major);
    }
  }
}

// Segment id of keys past T: equal to no query's segment (queries past T get -1 and see nothing).
constexpr int64_t kNoSegment = std::numeric_limits<int64_t>::min();

// Whether a query tile and a key tile can share a document: their segment ranges overlap.
__device__ __forceinline__ bool tiles_meet(const int64_t* seg_lo, const int64_t* seg_hi, int a,
                                           int b) {
  return !(seg_hi[a] < seg_lo[b] || seg_lo[a] > seg_hi[b]);
}

struct AttnParams {
  const void* q;
  const void* k;
  const void* v;
  const float* log_beta;
  const int64_t* positions;
  const int64_t* segments;
  const int64_t* seg_lo;  // (B, tiles) smallest segment id of each tile of kRows tokens
  const int64_t* seg_hi;  // (B, tiles) largest
  const void* out;        // forward: written; backward: read only through delta
  const float* delta;     // (B, H, T) rowsum(dO * O), backward only
  const void* d_out;      // (B, H, T, D), backward only
  float* lse;             // (B, H, T)
  void* out_mut;          // forward output
  float* dq;              // (B, H, T, D) fp32 accumulation buffer
  void* dk;               // (B, Hk, T, D)
  void* dv;
  float* dlb;  // (B, Hk, T)
  int heads, kv_heads, len, tiles;
  float scale;
};

template <typename T, int D>
size_t forward_smem_bytes() {
  using Tile = AttnTile<T, D>;
  constexpr int R = Tile::kRows;
  return 3 * smem_bytes(R * Tile::kLdT, sizeof(T)) + smem_bytes(R * Tile::kLdS, sizeof(float)) +
         smem_bytes(R * Tile::kLdO, sizeof(float)) + 2 * smem_bytes(R, sizeof(int64_t)) +
         smem_bytes(R, sizeof(float));
}

template <typename T, int D>
__global__ void __launch_bounds__(kFwdThreads) retention_forward_kernel(AttnParams p) {
  using Tile = AttnTile<T, D>;
  constexpr int R = Tile::kRows;
  constexpr int kLanes = kFwdThreads / R;  // threads per query row in the softmax
  constexpr int kCols = R / kLanes;        // key columns per thread
  constexpr int kDCols = D / kLanes;       // output columns per thread
  constexpr float kNegInf = -INFINITY;

  extern __shared__ __align__(128) unsigned char smem[];
  SmemCursor cur{smem};
  T* s_q = cur.take<T>(R * Tile::kLdT);
  T* s_k = cur.take<T>(R * Tile::kLdT);
  T* s_v = cur.take<T>(R * Tile::kLdT);
  float* s_s = cur.take<float>(R * Tile::kLdS);
  T* s_p = reinterpret_cast<T*>(s_s);  // P replaces the scores it came from
  float* s_o = cur.take<float>(R * Tile::kLdO);
  int64_t* s_pos_k = cur.take<int64_t>(R);
  int64_t* s_seg_k = cur.take<int64_t>(R);
  float* s_lb_k = cur.take<float>(R);

  const int qt = gridDim.x - 1 - blockIdx.x;  // the longest rows start first
  const int h = blockIdx.y, b = blockIdx.z;
  const int group = p.heads / p.kv_heads, hk = h / group;
  const int len = p.len, qs = qt * R;
  const T* q = static_cast<const T*>(p.q) + (static_cast<int64_t>(b) * p.heads + h) * len * D;
  const int64_t kv_off = (static_cast<int64_t>(b) * p.kv_heads + hk) * len;
  const T* k = static_cast<const T*>(p.k) + kv_off * D;
  const T* v = static_cast<const T*>(p.v) + kv_off * D;
  const float* lb = p.log_beta + kv_off;
  const int64_t* pos = p.positions + static_cast<int64_t>(b) * len;
  const int64_t* seg = p.segments + static_cast<int64_t>(b) * len;
  const int64_t* seg_lo = p.seg_lo + static_cast<int64_t>(b) * p.tiles;
  const int64_t* seg_hi = p.seg_hi + static_cast<int64_t>(b) * p.tiles;

  load_rows<T, D, R, kFwdThreads>(s_q, Tile::kLdT, q, qs, len);
  for (int idx = threadIdx.x; idx < R * Tile::kLdO; idx += kFwdThreads) s_o[idx] = 0.f;

  const int row = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const int i = qs + row;
  const bool row_valid = i < len;
  const int64_t seg_i = row_valid ? seg[i] : -1;
  const int64_t pos_i = row_valid ? pos[i] : 0;
  float m = kNegInf, l = 0.f;

  const int last_kt = (min(qs + R, len) - 1) / R;  // keys after the tile's last row are masked
  for (int kt = 0; kt <= last_kt; ++kt) {
    if (!tiles_meet(seg_lo, seg_hi, qt, kt)) continue;  // no shared document: all masked
    const int ks = kt * R;
    load_rows<T, D, R, kFwdThreads>(s_k, Tile::kLdT, k, ks, len);
    load_rows<T, D, R, kFwdThreads>(s_v, Tile::kLdT, v, ks, len);
    for (int j = threadIdx.x; j < R; j += kFwdThreads) {
      const bool valid = ks + j < len;
      s_pos_k[j] = valid ? pos[ks + j] : 0;
      s_seg_k[j] = valid ? seg[ks + j] : kNoSegment;
      s_lb_k[j] = valid ? lb[ks + j] : 0.f;
    }
    __syncthreads();
    smem_gemm<T, R, R, D, false, true, kFwdThreads>(s_q, Tile::kLdT, s_k, Tile::kLdT, s_s,
                                                    Tile::kLdS, false);
    __syncthreads();

    // Biased, masked scores of this thread's columns (j = c * kLanes + lane), online softmax.
    float s[kCols];
    float tile_max = kNegInf;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int j = c * kLanes + lane;
      const bool visible = seg_i >= 0 && s_seg_k[j] == seg_i && ks + j <= i;
      s[c] = visible ? s_s[row * Tile::kLdS + j] * p.scale +
                           static_cast<float>(pos_i - s_pos_k[j]) * s_lb_k[j]
                     : kNegInf;
      tile_max = fmaxf(tile_max, s[c]);
    }
    tile_max = group_max<kLanes>(tile_max);
    const float m_new = fmaxf(m, tile_max);
    // A row that has seen nothing yet keeps m = -inf; shifting by 0 gives exp(-inf) = 0, not NaN.
    const float shift = m_new == kNegInf ? 0.f : m_new;
    const float alpha = __expf(m - shift);
    float sum = 0.f;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      s[c] = __expf(s[c] - shift);
      sum += s[c];
    }
    l = l * alpha + group_sum<kLanes>(sum);
    m = m_new;
    __syncthreads();  // every score is read before P overwrites it
#pragma unroll
    for (int c = 0; c < kCols; ++c) s_p[row * Tile::kLdP + c * kLanes + lane] = from_float<T>(s[c]);
#pragma unroll
    for (int c = 0; c < kDCols; ++c) s_o[row * Tile::kLdO + c * kLanes + lane] *= alpha;
    __syncthreads();
    smem_gemm<T, R, D, R, false, false, kFwdThreads>(s_p, Tile::kLdP, s_v, Tile::kLdT, s_o,
                                                     Tile::kLdO, true);
    __syncthreads();
  }
  __syncthreads();  // s_o's zeros reach every thread even if no key tile ran

  if (row_valid) {
    // Padding rows (l == 0) get zeros and lse = -inf, as the reference.
    const float inv = l > 0.f ? 1.f / l : 0.f;
    T* out = static_cast<T*>(p.out_mut) + (static_cast<int64_t>(b) * p.heads + h) * len * D;
#pragma unroll
    for (int c = 0; c < kDCols; ++c) {
      const int d = c * kLanes + lane;
      out[static_cast<int64_t>(i) * D + d] = from_float<T>(s_o[row * Tile::kLdO + d] * inv);
    }
    if (lane == 0)
      p.lse[(static_cast<int64_t>(b) * p.heads + h) * len + i] = l > 0.f ? m + logf(l) : kNegInf;
  }
}

template <typename T, int D>
struct BwdLayout {
  using Tile = AttnTile<T, D>;
  static constexpr int R = Tile::kRows;
  // dQ's fp32 staging tile reuses the scores + dP buffers when it fits in them.
  static constexpr bool kScratchAliases = 2 * Tile::kLdS >= Tile::kLdO;
  static size_t bytes() {
    return 4 * smem_bytes(R * Tile::kLdT, sizeof(T)) +
           2 * smem_bytes(R * Tile::kLdO, sizeof(float)) +
           2 * smem_bytes(R * Tile::kLdS, sizeof(float)) + smem_bytes(R * Tile::kLdP, sizeof(T)) +
           (kScratchAliases ? 0 : smem_bytes(R * Tile::kLdO, sizeof(float))) +
           3 * smem_bytes(R, sizeof(int64_t)) + smem_bytes(R, sizeof(float));
  }
};

template <typename T, int D>
__global__ void __launch_bounds__(kBwdThreads) retention_backward_kernel(AttnParams p) {
  using Tile = AttnTile<T, D>;
  using Layout = BwdLayout<T, D>;
  constexpr int R = Tile::kRows;
  constexpr int kLanes = kBwdThreads / R;     // threads per query row
  constexpr int kCols = R / kLanes;           // key columns per thread
  constexpr int kColLanes = kBwdThreads / R;  // threads per key column in the d log beta sum
  constexpr float kNegInf = -INFINITY;

  extern __shared__ __align__(128) unsigned char smem[];
  SmemCursor cur{smem};
  T* s_k = cur.take<T>(R * Tile::kLdT);
  T* s_v = cur.take<T>(R * Tile::kLdT);
  T* s_q = cur.take<T>(R * Tile::kLdT);
  T* s_do = cur.take<T>(R * Tile::kLdT);
  float* s_dk = cur.take<float>(R * Tile::kLdO);
  float* s_dv = cur.take<float>(R * Tile::kLdO);
  float* s_s = cur.take<float>(R * Tile::kLdS);   // scores, then P (as T) in place
  float* s_dp = cur.take<float>(R * Tile::kLdS);  // dP, then dS (fp32) in place
  T* s_p = reinterpret_cast<T*>(s_s);
  T* s_ds = cur.take<T>(R * Tile::kLdP);  // dS * scale as a tensor-core operand
  float* s_dq = Layout::kScratchAliases ? s_s : cur.take<float>(R * Tile::kLdO);
  int64_t* s_pos_q = cur.take<int64_t>(R);
  int64_t* s_pos_k = cur.take<int64_t>(R);
  int64_t* s_seg_k = cur.take<int64_t>(R);
  float* s_lb_k = cur.take<float>(R);

  const int kt = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int group = p.heads / p.kv_heads;
  const int len = p.len, ks = kt * R;
  const int64_t kv_off = (static_cast<int64_t>(b) * p.kv_heads + hk) * len;
  const int64_t* pos = p.positions + static_cast<int64_t>(b) * len;
  const int64_t* seg = p.segments + static_cast<int64_t>(b) * len;
  const int64_t* seg_lo = p.seg_lo + static_cast<int64_t>(b) * p.tiles;
  const int64_t* seg_hi = p.seg_hi + static_cast<int64_t>(b) * p.tiles;

  load_rows<T, D, R, kBwdThreads>(s_k, Tile::kLdT, static_cast<const T*>(p.k) + kv_off * D, ks,
                                  len);
  load_rows<T, D, R, kBwdThreads>(s_v, Tile::kLdT, static_cast<const T*>(p.v) + kv_off * D, ks,
                                  len);
  for (int idx = threadIdx.x; idx < R * Tile::kLdO; idx += kBwdThreads) {
    s_dk[idx] = 0.f;
    s_dv[idx] = 0.f;
  }
  for (int j = threadIdx.x; j < R; j += kBwdThreads) {
    const bool valid = ks + j < len;
    s_pos_k[j] = valid ? pos[ks + j] : 0;
    s_seg_k[j] = valid ? seg[ks + j] : kNoSegment;
    s_lb_k[j] = valid ? p.log_beta[kv_off + ks + j] : 0.f;
  }

  const int row = threadIdx.x / kLanes, lane = threadIdx.x % kLanes;
  const int col = threadIdx.x / kColLanes, col_lane = threadIdx.x % kColLanes;
  float dlb_acc = 0.f;  // d log beta of key ks + col, summed over heads and query rows
  const int tiles_q = (len + R - 1) / R;

  for (int g = 0; g < group; ++g) {
    const int h = hk * group + g;
    const int64_t q_off = (static_cast<int64_t>(b) * p.heads + h) * len;
    const T* q = static_cast<const T*>(p.q) + q_off * D;
    const T* d_out = static_cast<const T*>(p.d_out) + q_off * D;
    for (int qt = kt; qt < tiles_q; ++qt) {  // query tiles before the key tile see none of it
      if (!tiles_meet(seg_lo, seg_hi, qt, kt)) continue;
      const int qs = qt * R;
      load_rows<T, D, R, kBwdThreads>(s_q, Tile::kLdT, q, qs, len);
      load_rows<T, D, R, kBwdThreads>(s_do, Tile::kLdT, d_out, qs, len);
      for (int r = threadIdx.x; r < R; r += kBwdThreads)
        s_pos_q[r] = qs + r < len ? pos[qs + r] : 0;
      const int i = qs + row;
      const bool row_valid = i < len;
      const int64_t seg_i = row_valid ? seg[i] : -1;
      const int64_t pos_i = row_valid ? pos[i] : 0;
      float lse_i = row_valid ? p.lse[q_off + i] : 0.f;
      if (lse_i == kNegInf) lse_i = 0.f;  // a row that sees nothing: every P is 0 anyway
      const float delta_i = row_valid ? p.delta[q_off + i] : 0.f;
      __syncthreads();

      smem_gemm<T, R, R, D, false, true, kBwdThreads>(s_q, Tile::kLdT, s_k, Tile::kLdT, s_s,
                                                      Tile::kLdS, false);
      __syncthreads();
      float pr[kCols];
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const int j = c * kLanes + lane;
        const bool visible = seg_i >= 0 && s_seg_k[j] == seg_i && ks + j <= i;
        pr[c] = visible ? __expf(s_s[row * Tile::kLdS + j] * p.scale +
                                 static_cast<float>(pos_i - s_pos_k[j]) * s_lb_k[j] - lse_i)
                        : 0.f;
      }
      __syncthreads();  // scores read before P overwrites them
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        s_p[row * Tile::kLdP + c * kLanes + lane] = from_float<T>(pr[c]);
      __syncthreads();
      // dP = dO V^T and dV += P^T dO read different buffers and write different ones.
      smem_gemm<T, R, R, D, false, true, kBwdThreads>(s_do, Tile::kLdT, s_v, Tile::kLdT, s_dp,
                                                      Tile::kLdS, false);
      smem_gemm<T, R, D, R, true, false, kBwdThreads>(s_p, Tile::kLdP, s_do, Tile::kLdT, s_dv,
                                                      Tile::kLdO, true);
      __syncthreads();
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const int j = c * kLanes + lane;
        const float ds = pr[c] * (s_dp[row * Tile::kLdS + j] - delta_i);  // d of the biased score
        s_dp[row * Tile::kLdS + j] = ds;
        s_ds[row * Tile::kLdP + j] = from_float<T>(ds * p.scale);
      }
      __syncthreads();
      // d log beta_j += sum_i dS_ij (pos_i - pos_j).
      float part = 0.f;
      for (int r = col_lane; r < R; r += kColLanes)
        part += s_dp[r * Tile::kLdS + col] * static_cast<float>(s_pos_q[r] - s_pos_k[col]);
      dlb_acc += group_sum<kColLanes>(part);
      smem_gemm<T, R, D, R, true, false, kBwdThreads>(s_ds, Tile::kLdP, s_q, Tile::kLdT, s_dk,
                                                      Tile::kLdO, true);
      __syncthreads();  // dP / dS (fp32) read before dQ's staging tile overwrites them
      smem_gemm<T, R, D, R, false, false, kBwdThreads>(s_ds, Tile::kLdP, s_k, Tile::kLdT, s_dq,
                                                       Tile::kLdO, false);
      __syncthreads();
      for (int idx = threadIdx.x; idx < R * D; idx += kBwdThreads) {
        const int r = idx / D, d = idx % D;
        if (qs + r < len) atomicAdd(p.dq + (q_off + qs + r) * D + d, s_dq[r * Tile::kLdO + d]);
      }
      // The next tile's loads touch Q, dO and their positions only; the barrier after them
      // orders this tile's reads of the dQ staging tile before the next scores overwrite it.
    }
  }

  __syncthreads();
  T* dk = static_cast<T*>(p.dk) + kv_off * D;
  T* dv = static_cast<T*>(p.dv) + kv_off * D;
  for (int idx = threadIdx.x; idx < R * D; idx += kBwdThreads) {
    const int r = idx / D, d = idx % D;
    if (ks + r < len) {
      dk[static_cast<int64_t>(ks + r) * D + d] = from_float<T>(s_dk[r * Tile::kLdO + d]);
      dv[static_cast<int64_t>(ks + r) * D + d] = from_float<T>(s_dv[r * Tile::kLdO + d]);
    }
  }
  if (col_lane == 0 && ks + col < len) p.dlb[kv_off + ks + col] = dlb_acc;
}

// S_t = sum over i <= t in t's document of exp((pos_t - pos_i) log_beta_i). One thread per t.
__global__ void __launch_bounds__(kSumThreads)
    retention_sum_forward_kernel(const float* log_beta, const int64_t* positions,
                                 const int64_t* segments, const int64_t* seg_lo_all,
                                 const int64_t* seg_hi_all, float* out, int kv_heads, int len,
                                 int tiles) {
  __shared__ float s_lb[kSumThreads];
  __shared__ int64_t s_pos[kSumThreads];
  __shared__ int64_t s_seg[kSumThreads];
  const int tile = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int t = tile * kSumThreads + threadIdx.x;
  const int64_t off = (static_cast<int64_t>(b) * kv_heads + hk) * len;
  const int64_t* pos = positions + static_cast<int64_t>(b) * len;
  const int64_t* seg = segments + static_cast<int64_t>(b) * len;
  const int64_t* seg_lo = seg_lo_all + static_cast<int64_t>(b) * tiles;
  const int64_t* seg_hi = seg_hi_all + static_cast<int64_t>(b) * tiles;
  const bool valid = t < len;
  const int64_t seg_t = valid ? seg[t] : -1, pos_t = valid ? pos[t] : 0;
  float acc = 0.f;
  for (int it = 0; it <= tile; ++it) {
    if (!tiles_meet(seg_lo, seg_hi, tile, it)) continue;
    const int i0 = it * kSumThreads, i = i0 + threadIdx.x;
    __syncthreads();
    s_lb[threadIdx.x] = i < len ? log_beta[off + i] : 0.f;
    s_pos[threadIdx.x] = i < len ? pos[i] : 0;
    s_seg[threadIdx.x] = i < len ? seg[i] : kNoSegment;
    __syncthreads();
    for (int jj = 0; jj < kSumThreads; ++jj)
      if (seg_t >= 0 && s_seg[jj] == seg_t && i0 + jj <= t)
        acc += expf(static_cast<float>(pos_t - s_pos[jj]) * s_lb[jj]);
  }
  if (valid) out[off + t] = acc;
}

// d log_beta_i = sum over t >= i in i's document of dS_t (pos_t - pos_i) exp((pos_t - pos_i)
// log_beta_i). One thread per i.
__global__ void __launch_bounds__(kSumThreads)
    retention_sum_backward_kernel(const float* log_beta, const int64_t* positions,
                                  const int64_t* segments, const int64_t* seg_lo_all,
                                  const int64_t* seg_hi_all, const float* d_sum, float* d_lb,
                                  int kv_heads, int len, int tiles) {
  __shared__ float s_ds[kSumThreads];
  __shared__ int64_t s_pos[kSumThreads];
  __shared__ int64_t s_seg[kSumThreads];
  const int tile = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int i = tile * kSumThreads + threadIdx.x;
  const int64_t off = (static_cast<int64_t>(b) * kv_heads + hk) * len;
  const int64_t* pos = positions + static_cast<int64_t>(b) * len;
  const int64_t* seg = segments + static_cast<int64_t>(b) * len;
  const int64_t* seg_lo = seg_lo_all + static_cast<int64_t>(b) * tiles;
  const int64_t* seg_hi = seg_hi_all + static_cast<int64_t>(b) * tiles;
  const bool valid = i < len;
  const int64_t seg_i = valid ? seg[i] : kNoSegment, pos_i = valid ? pos[i] : 0;
  const float lb_i = valid ? log_beta[off + i] : 0.f;
  float acc = 0.f;
  for (int tt = tile; tt < tiles; ++tt) {
    if (!tiles_meet(seg_lo, seg_hi, tt, tile)) continue;
    const int t0 = tt * kSumThreads, t = t0 + threadIdx.x;
    __syncthreads();
    s_ds[threadIdx.x] = t < len ? d_sum[off + t] : 0.f;
    s_pos[threadIdx.x] = t < len ? pos[t] : 0;
    s_seg[threadIdx.x] = t < len ? seg[t] : -1;
    __syncthreads();
    for (int jj = 0; jj < kSumThreads; ++jj)
      if (s_seg[jj] >= 0 && s_seg[jj] == seg_i && t0 + jj >= i) {
        const float dist = static_cast<float>(s_pos[jj] - pos_i);
        acc += s_ds[jj] * dist * expf(dist * lb_i);
      }
  }
  if (valid) d_lb[off + i] = acc;
}

// ---- Host side -------------------------------------------------------------------------------

// Per tile of `tile` tokens, the smallest and largest segment id: (B, tiles) each.
std::pair<at::Tensor, at::Tensor> segment_ranges(const at::Tensor& segments, int64_t tile) {
  const int64_t len = segments.size(1), tiles = (len + tile - 1) / tile, pad = tiles * tile - len;
  auto lo = at::constant_pad_nd(segments, {0, pad}, std::numeric_limits<int64_t>::max());
  auto hi = at::constant_pad_nd(segments, {0, pad}, std::numeric_limits<int64_t>::min());
  return {std::get<0>(lo.view({segments.size(0), tiles, tile}).min(-1)).contiguous(),
          std::get<0>(hi.view({segments.size(0), tiles, tile}).max(-1)).contiguous()};
}

void check_attention_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& log_beta, const at::Tensor& positions,
                            const at::Tensor& segments) {
  TORCH_CHECK(q.is_cuda() && k.device() == q.device() && v.device() == q.device() &&
                  log_beta.device() == q.device() && positions.device() == q.device() &&
                  segments.device() == q.device(),
              "retention_attention (CUDA): every input must be on ", q.device());
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
              "retention_attention (CUDA): q, k, v must share a dtype");
  TORCH_CHECK(q.size(3) == 64 || q.size(3) == 128,
              "retention_attention (CUDA): head dim must be 64 or 128, found ", q.size(3));
  TORCH_CHECK(log_beta.scalar_type() == at::kFloat && positions.scalar_type() == at::kLong &&
                  segments.scalar_type() == at::kLong,
              "retention_attention (CUDA): log_beta fp32, positions and segments int64");
  TORCH_CHECK(q.size(2) < (1LL << 30), "retention_attention (CUDA): sequence too long");
  for (const auto* t : {&q, &k, &v})
    TORCH_CHECK(t->is_contiguous() && reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 == 0,
                "retention_attention (CUDA): q, k, v must be contiguous and 16-byte aligned");
}

template <typename Fn>
void dispatch_attention(at::ScalarType dtype, int64_t d, Fn&& fn) {
  auto by_dim = [&](auto tag) {
    using T = decltype(tag);
    if (d == 64)
      fn(T{}, std::integral_constant<int, 64>{});
    else
      fn(T{}, std::integral_constant<int, 128>{});
  };
  dispatch_storage_type(dtype, "retention_attention", by_dim);
}

AttnParams make_params(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const at::Tensor& log_beta, const at::Tensor& positions,
                       const at::Tensor& segments, const at::Tensor& seg_lo,
                       const at::Tensor& seg_hi, double scale) {
  AttnParams p{};
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.log_beta = log_beta.data_ptr<float>();
  p.positions = positions.data_ptr<int64_t>();
  p.segments = segments.data_ptr<int64_t>();
  p.seg_lo = seg_lo.data_ptr<int64_t>();
  p.seg_hi = seg_hi.data_ptr<int64_t>();
  p.heads = static_cast<int>(q.size(1));
  p.kv_heads = static_cast<int>(k.size(1));
  p.len = static_cast<int>(q.size(2));
  p.tiles = static_cast<int>(seg_lo.size(1));
  p.scale = static_cast<float>(scale);
  return p;
}

}  // namespace

std::vector<at::Tensor> retention_attention_cuda_forward(
    const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
    const at::Tensor& log_beta_in, const at::Tensor& positions_in, const at::Tensor& segments_in,
    double scale) {
  auto q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  auto log_beta = log_beta_in.contiguous();
  auto positions = positions_in.contiguous(), segments = segments_in.contiguous();
  check_attention_inputs(q, k, v, log_beta, positions, segments);
  const c10::cuda::CUDAGuard guard(q.device());
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), d = q.size(3);
  auto out = at::empty_like(q);
  auto lse = at::empty({b, h, t}, q.options().dtype(at::kFloat));
  if (q.numel() == 0) return {out, lse};
  auto stream = c10::cuda::getCurrentCUDAStream();
  dispatch_attention(q.scalar_type(), d, [&](auto tag, auto dim) {
    using T = decltype(tag);
    constexpr int D = decltype(dim)::value;
    using Tile = AttnTile<T, D>;
    auto [seg_lo, seg_hi] = segment_ranges(segments, Tile::kRows);
    AttnParams p = make_params(q, k, v, log_beta, positions, segments, seg_lo, seg_hi, scale);
    p.out_mut = out.data_ptr();
    p.lse = lse.data_ptr<float>();
    const size_t bytes = forward_smem_bytes<T, D>();
    C10_CUDA_CHECK(cudaFuncSetAttribute(retention_forward_kernel<T, D>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
    const dim3 grid(static_cast<unsigned>(p.tiles), static_cast<unsigned>(h),
                    static_cast<unsigned>(b));
    retention_forward_kernel<T, D><<<grid, kFwdThreads, bytes, stream>>>(p);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {out, lse};
}

std::vector<at::Tensor> retention_attention_cuda_backward(
    const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
    const at::Tensor& log_beta_in, const at::Tensor& positions_in, const at::Tensor& segments_in,
    const at::Tensor& out, const at::Tensor& lse_in, const at::Tensor& d_out_in, double scale) {
  auto q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  auto log_beta = log_beta_in.contiguous();
  auto positions = positions_in.contiguous(), segments = segments_in.contiguous();
  auto lse = lse_in.contiguous();
  auto d_out = d_out_in.to(q.scalar_type()).contiguous();
  check_attention_inputs(q, k, v, log_beta, positions, segments);
  TORCH_CHECK(reinterpret_cast<uintptr_t>(d_out.data_ptr()) % 16 == 0,
              "retention_attention (CUDA): dO must be 16-byte aligned");
  const c10::cuda::CUDAGuard guard(q.device());
  const int64_t b = q.size(0), h = q.size(1), t = q.size(2), d = q.size(3), hk = k.size(1);
  // D_i = rowsum(dO * O), the softmax backward's row term, from the output as returned.
  auto delta = (d_out.to(at::kFloat) * out.to(at::kFloat)).sum(-1).contiguous();  // (B, H, T)
  auto dq = at::zeros({b, h, t, d}, q.options().dtype(at::kFloat));
  auto dk = at::empty_like(k), dv = at::empty_like(v);
  auto dlb = at::empty({b, hk, t}, log_beta.options());
  if (q.numel() == 0) return {dq.to(q.scalar_type()), dk.zero_(), dv.zero_(), dlb.zero_()};
  auto stream = c10::cuda::getCurrentCUDAStream();
  dispatch_attention(q.scalar_type(), d, [&](auto tag, auto dim) {
    using T = decltype(tag);
    constexpr int D = decltype(dim)::value;
    using Tile = AttnTile<T, D>;
    auto [seg_lo, seg_hi] = segment_ranges(segments, Tile::kRows);
    AttnParams p = make_params(q, k, v, log_beta, positions, segments, seg_lo, seg_hi, scale);
    p.lse = lse.data_ptr<float>();
    p.delta = delta.data_ptr<float>();
    p.d_out = d_out.data_ptr();
    p.dq = dq.data_ptr<float>();
    p.dk = dk.data_ptr();
    p.dv = dv.data_ptr();
    p.dlb = dlb.data_ptr<float>();
    const size_t bytes = BwdLayout<T, D>::bytes();
    C10_CUDA_CHECK(cudaFuncSetAttribute(retention_backward_kernel<T, D>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
    const dim3 grid(static_cast<unsigned>(p.tiles), static_cast<unsigned>(hk),
                    static_cast<unsigned>(b));
    retention_backward_kernel<T, D><<<grid, kBwdThreads, bytes, stream>>>(p);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return {dq.to(q.scalar_type()), dk, dv, dlb};
}

at::Tensor retention_sum_cuda_forward(const at::Tensor& log_beta_in, const at::Tensor& positions_in,
                                      const at::Tensor& segments_in) {
  auto log_beta = log_beta_in.contiguous();
  auto positions = positions_in.contiguous(), segments = segments_in.contiguous();
  TORCH_CHECK(log_beta.is_cuda() && log_beta.scalar_type() == at::kFloat &&
                  positions.device() == log_beta.device() && segments.device() == log_beta.device(),
              "retention_sum (CUDA): log_beta fp32 and positions, segments on its device");
  const c10::cuda::CUDAGuard guard(log_beta.device());
  auto out = at::empty_like(log_beta);
  if (log_beta.numel() == 0) return out;
  auto [seg_lo, seg_hi] = segment_ranges(segments, kSumThreads);
  const int tiles = static_cast<int>(seg_lo.size(1));
  const dim3 grid(tiles, static_cast<unsigned>(log_beta.size(1)),
                  static_cast<unsigned>(log_beta.size(0)));
  retention_sum_forward_kernel<<<grid, kSumThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      log_beta.data_ptr<float>(), positions.data_ptr<int64_t>(), segments.data_ptr<int64_t>(),
      seg_lo.data_ptr<int64_t>(), seg_hi.data_ptr<int64_t>(), out.data_ptr<float>(),
      static_cast<int>(log_beta.size(1)), static_cast<int>(log_beta.size(2)), tiles);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

at::Tensor retention_sum_cuda_backward(const at::Tensor& log_beta_in,
                                       const at::Tensor& positions_in,
                                       const at::Tensor& segments_in, const at::Tensor& d_sum_in) {
  auto log_beta = log_beta_in.contiguous();
  auto positions = positions_in.contiguous(), segments = segments_in.contiguous();
  auto d_sum = d_sum_in.to(at::kFloat).contiguous();
  const c10::cuda::CUDAGuard guard(log_beta.device());
  auto d_lb = at::empty_like(log_beta);
  if (log_beta.numel() == 0) return d_lb;
  auto [seg_lo, seg_hi] = segment_ranges(segments, kSumThreads);
  const int tiles = static_cast<int>(seg_lo.size(1));
  const dim3 grid(tiles, static_cast<unsigned>(log_beta.size(1)),
                  static_cast<unsigned>(log_beta.size(0)));
  retention_sum_backward_kernel<<<grid, kSumThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      log_beta.data_ptr<float>(), positions.data_ptr<int64_t>(), segments.data_ptr<int64_t>(),
      seg_lo.data_ptr<int64_t>(), seg_hi.data_ptr<int64_t>(), d_sum.data_ptr<float>(),
      d_lb.data_ptr<float>(), static_cast<int>(log_beta.size(1)),
      static_cast<int>(log_beta.size(2)), tiles);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return d_lb;
}

}  // namespace retain
