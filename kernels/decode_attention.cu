// CUDA kernels over the budgeted KV cache: decode attention of one new token per sequence over
// per-(sequence, KV head) variable-length caches, and the compaction that packs the entries an
// eviction keeps to the front. The ATen references are in decode_attention.cpp.
//
// Decode (flash-decoding): the cache of each (b, KV head) is cut into splits of `chunk` entries;
// one block per (split, KV head, b) serves the G query heads of the group, so each key and value
// is read once. Pass 1 scores the split's entries (16 lanes per entry, fp32 dot products, query
// rows in registers), a per-head max and sum turn the scores into unnormalised probabilities in
// shared memory, pass 2 accumulates P V. A second kernel merges the splits with their (max, sum).
// Entries past the head's length, or with position < 0 or > the query's position, are masked;
// a head that sees nothing gets zeros.
//
// Compaction: one block per (b, head) computes each slot's destination (kept entries first in
// their order, then the dropped ones in theirs, exactly as the reference's argsort); a second
// kernel moves keys, values, positions and stat rows with 16-byte accesses into fresh buffers,
// copied back into the cache's views.
//
// Shapes: B sequences, H query heads, Hk KV heads, G = H / Hk, S cache slots, D head dim.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda_common.cuh"
#include "kernels/cuda_launchers.h"

namespace retain {

namespace {

constexpr int kDecodeThreads = 128;
constexpr int kEntryLanes = 16;                             // lanes per cache entry
constexpr int kEntryGroups = kDecodeThreads / kEntryLanes;  // entries in flight per block
constexpr int kMaxChunk = 512;                              // entries per split, at most
constexpr int kPlanThreads = 256;
constexpr int kMoveThreads = 256;
constexpr int kMoveEntries = 32;  // entries per block of the move kernel

struct DecodeParams {
  const void* q;  // (B, H, D) contiguous
  const void* keys;
  const void* values;
  const int64_t* positions;
  const int64_t* lengths;      // (B, Hk)
  const int64_t* q_positions;  // (B,)
  float* part_o;               // (B, H, splits, D)
  float* part_ml;              // (B, H, splits, 2): max and sum of each split
  int64_t k_stride_b, k_stride_h, v_stride_b, v_stride_h, p_stride_b, p_stride_h;
  int heads, kv_heads, group, splits, chunk;
  float scale;
};

template <int D, int kMaxG>
size_t decode_smem_bytes(int chunk) {
  return sizeof(float) * (static_cast<size_t>(kMaxG) * chunk + 2 * kMaxG +
                          static_cast<size_t>(kEntryGroups) * kMaxG * D);
}

template <typename T, int D, int kMaxG>
__global__ void __launch_bounds__(kDecodeThreads) decode_split_kernel(DecodeParams p) {
  constexpr int kE = D / kEntryLanes;  // elements of a row per lane
  constexpr float kNegInf = -INFINITY;
  extern __shared__ __align__(16) float smem[];
  float* s_acc = smem;                                // kEntryGroups x kMaxG x D
  float* s_score = s_acc + kEntryGroups * kMaxG * D;  // kMaxG x chunk
  float* s_max = s_score + kMaxG * p.chunk;           // kMaxG
  float* s_sum = s_max + kMaxG;                       // kMaxG

  const int split = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int group = p.group, chunk = p.chunk;
  const int64_t len = p.lengths[static_cast<int64_t>(b) * p.kv_heads + hk];
  const int64_t start = static_cast<int64_t>(split) * chunk;
  const int64_t rest = len - start;
  const int n = rest <= 0 ? 0 : static_cast<int>(rest < chunk ? rest : chunk);
  const int64_t q_pos = p.q_positions[b];
  const T* keys = static_cast<const T*>(p.keys) + b * p.k_stride_b + hk * p.k_stride_h;
  const T* values = static_cast<const T*>(p.values) + b * p.v_stride_b + hk * p.v_stride_h;
  const int64_t* positions = p.positions + b * p.p_stride_b + hk * p.p_stride_h;
  const int64_t head0 = static_cast<int64_t>(b) * p.heads + static_cast<int64_t>(hk) * group;

  const int entry_group = threadIdx.x / kEntryLanes, lane = threadIdx.x % kEntryLanes;

  // This lane's slice of each query row of the group, pre-scaled.
  float qr[kMaxG][kE];
#pragma unroll
  for (int g = 0; g < kMaxG; ++g) {
    if (g < group) {
      load_as_float<T, kE>(static_cast<const T*>(p.q) + (head0 + g) * D + lane * kE, qr[g]);
#pragma unroll
      for (int c = 0; c < kE; ++c) qr[g][c] *= p.scale;
    }
  }

  // Pass 1: scores. The trip count is the same for every thread (shuffles need the whole warp).
  for (int e0 = 0; e0 < n; e0 += kEntryGroups) {
    const int e = e0 + entry_group;
    const bool active = e < n;
    float kf[kE];
    bool visible = false;
    if (active) {
      const int64_t pos = positions[start + e];
      visible = pos >= 0 && pos <= q_pos;
      load_as_float<T, kE>(keys + (start + e) * D + lane * kE, kf);
    } else {
#pragma unroll
      for (int c = 0; c < kE; ++c) kf[c] = 0.f;
    }
#pragma unroll
    for (int g = 0; g < kMaxG; ++g) {
      if (g < group) {
        float dot = 0.f;
#pragma unroll
        for (int c = 0; c < kE; ++c) dot = fmaf(qr[g][c], kf[c], dot);
        dot = group_sum<kEntryLanes>(dot);
        if (active && lane == 0) s_score[g * chunk + e] = visible ? dot : kNegInf;
      }
    }
  }
  __syncthreads();

  // Per head: the split's max, probabilities relative to it, and their sum.
  const int warp = threadIdx.x / 32, lane32 = threadIdx.x % 32;
  for (int g = warp; g < group; g += kDecodeThreads / 32) {
    float mx = kNegInf;
    for (int e = lane32; e < n; e += 32) mx = fmaxf(mx, s_score[g * chunk + e]);
    mx = group_max<32>(mx);
    const float shift = mx == kNegInf ? 0.f : mx;
    float sum = 0.f;
    for (int e = lane32; e < n; e += 32) {
      const float pr = __expf(s_score[g * chunk + e] - shift);
      s_score[g * chunk + e] = pr;
      sum += pr;
    }
    sum = group_sum<32>(sum);
    if (lane32 == 0) {
      s_max[g] = mx;
      s_sum[g] = sum;
    }
  }
  __syncthreads();

  // Pass 2: P V, each entry group over its own entries.
  float acc[kMaxG][kE];
#pragma unroll
  for (int g = 0; g < kMaxG; ++g)
#pragma unroll
    for (int c = 0; c < kE; ++c) acc[g][c] = 0.f;
  for (int e = entry_group; e < n; e += kEntryGroups) {
    float vf[kE];
    load_as_float<T, kE>(values + (start + e) * D + lane * kE, vf);
#pragma unroll
    for (int g = 0; g < kMaxG; ++g) {
      if (g < group) {
        const float pr = s_score[g * chunk + e];
#pragma unroll
        for (int c = 0; c < kE; ++c) acc[g][c] = fmaf(pr, vf[c], acc[g][c]);
      }
    }
  }
#pragma unroll
  for (int g = 0; g < kMaxG; ++g)
    if (g < group)
#pragma unroll
      for (int c = 0; c < kE; ++c) s_acc[(entry_group * kMaxG + g) * D + lane * kE + c] = acc[g][c];
  __syncthreads();

  for (int idx = threadIdx.x; idx < group * D; idx += kDecodeThreads) {
    const int g = idx / D, d = idx % D;
    float o = 0.f;
#pragma unroll
    for (int eg = 0; eg < kEntryGroups; ++eg) o += s_acc[(eg * kMaxG + g) * D + d];
    p.part_o[((head0 + g) * p.splits + split) * D + d] = o;
  }
  if (threadIdx.x < group) {
    float* ml = p.part_ml + ((head0 + threadIdx.x) * p.splits + split) * 2;
    ml[0] = s_max[threadIdx.x];
    ml[1] = s_sum[threadIdx.x];
  }
}

// Merges the splits of one (b, query head): out = sum_s o_s e^(m_s - M) / sum_s l_s e^(m_s - M).
template <typename T, int D>
__global__ void __launch_bounds__(D)
    decode_reduce_kernel(const float* part_o, const float* part_ml, T* out, int splits) {
  const int64_t bh = blockIdx.x;
  const int d = threadIdx.x;
  const float* ml = part_ml + bh * splits * 2;
  float mx = -INFINITY;
  for (int s = 0; s < splits; ++s)
    if (ml[2 * s + 1] > 0.f) mx = fmaxf(mx, ml[2 * s]);
  float total = 0.f, o = 0.f;
  for (int s = 0; s < splits; ++s) {
    const float l = ml[2 * s + 1];
    if (l > 0.f) {  // empty splits wrote no meaningful output
      const float w = __expf(ml[2 * s] - mx);
      total += l * w;
      o += part_o[(bh * splits + s) * D + d] * w;
    }
  }
  out[bh * D + d] = from_float<T>(total > 0.f ? o / total : 0.f);
}

// Destination slot of every entry of one (b, head) row, and the row's new length.
__global__ void __launch_bounds__(kPlanThreads)
    compact_plan_kernel(const bool* keep, int slots, int* dest, int64_t* lengths) {
  __shared__ int s_warp[kPlanThreads / 32];
  __shared__ int s_total;
  const int64_t row = blockIdx.x;
  const bool* k = keep + row * slots;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int count = 0;
  for (int i = threadIdx.x; i < slots; i += kPlanThreads) count += k[i] ? 1 : 0;
  count = __reduce_add_sync(0xffffffffu, count);
  if (lane == 0) s_warp[warp] = count;
  __syncthreads();
  if (threadIdx.x == 0) {
    int total = 0;
    for (int w = 0; w < kPlanThreads / 32; ++w) total += s_warp[w];
    s_total = total;
    lengths[row] = total;
  }
  __syncthreads();
  const int kept_total = s_total;
  int running = 0;  // kept entries before this chunk
  for (int base = 0; base < slots; base += kPlanThreads) {
    const int i = base + threadIdx.x;
    const bool flag = i < slots && k[i];
    const unsigned ballot = __ballot_sync(0xffffffffu, flag);
    __syncthreads();  // the previous chunk's reads of s_warp are done
    if (lane == 0) s_warp[warp] = __popc(ballot);
    __syncthreads();
    int before = running + __popc(ballot & ((1u << lane) - 1u));
    int chunk_total = 0;
    for (int w = 0; w < kPlanThreads / 32; ++w) {
      if (w < warp) before += s_warp[w];
      chunk_total += s_warp[w];
    }
    if (i < slots) dest[row * slots + i] = flag ? before : kept_total + (i - before);
    running += chunk_total;
  }
}

struct MoveParams {
  const char* keys;
  const char* values;
  const int64_t* positions;
  const float* stat;
  int64_t k_stride_b, k_stride_h, v_stride_b, v_stride_h;  // in bytes
  int64_t p_stride_b, p_stride_h, s_stride_b, s_stride_h;  // in elements
  const int* dest;
  const int64_t* lengths;
  char* out_keys;  // (B, Hk, S, row_bytes) contiguous
  char* out_values;
  int64_t* out_positions;  // (B, Hk, S)
  float* out_stat;
  int kv_heads, slots, row_bytes;
};

__global__ void __launch_bounds__(kMoveThreads) compact_move_kernel(MoveParams p) {
  const int64_t row = blockIdx.y;
  const int64_t b = row / p.kv_heads, h = row % p.kv_heads;
  const int e0 = blockIdx.x * kMoveEntries;
  const int chunks = p.row_bytes / 16;
  const char* keys = p.keys + b * p.k_stride_b + h * p.k_stride_h;
  const char* values = p.values + b * p.v_stride_b + h * p.v_stride_h;
  const int* dest = p.dest + row * p.slots;
  for (int idx = threadIdx.x; idx < kMoveEntries * chunks; idx += kMoveThreads) {
    const int e = e0 + idx / chunks, c = (idx % chunks) * 16;
    if (e >= p.slots) continue;
    const int64_t to = (row * p.slots + dest[e]) * p.row_bytes + c;
    const int64_t from = static_cast<int64_t>(e) * p.row_bytes + c;
    *reinterpret_cast<uint4*>(p.out_keys + to) = *reinterpret_cast<const uint4*>(keys + from);
    *reinterpret_cast<uint4*>(p.out_values + to) = *reinterpret_cast<const uint4*>(values + from);
  }
  const int64_t kept = p.lengths[row];
  for (int e = e0 + threadIdx.x; e < min(e0 + kMoveEntries, p.slots); e += kMoveThreads) {
    const int to = dest[e];
    p.out_positions[row * p.slots + to] =
        to < kept ? p.positions[b * p.p_stride_b + h * p.p_stride_h + e] : -1;
    p.out_stat[row * p.slots + to] = p.stat[b * p.s_stride_b + h * p.s_stride_h + e];
  }
}

template <typename Fn>
void dispatch_decode(at::ScalarType dtype, int64_t d, int64_t group, Fn&& fn) {
  auto by_group = [&](auto tag, auto dim) {
    if (group <= 1)
      fn(tag, dim, std::integral_constant<int, 1>{});
    else if (group <= 2)
      fn(tag, dim, std::integral_constant<int, 2>{});
    else if (group <= 4)
      fn(tag, dim, std::integral_constant<int, 4>{});
    else if (group <= 8)
      fn(tag, dim, std::integral_constant<int, 8>{});
    else
      fn(tag, dim, std::integral_constant<int, 16>{});
  };
  auto by_dim = [&](auto tag) {
    if (d == 64)
      by_group(tag, std::integral_constant<int, 64>{});
    else
      by_group(tag, std::integral_constant<int, 128>{});
  };
  dispatch_storage_type(dtype, "decode_attention", by_dim);
}

}  // namespace

at::Tensor decode_attention_cuda(const at::Tensor& q_in, const at::Tensor& keys,
                                 const at::Tensor& values, const at::Tensor& positions,
                                 const at::Tensor& lengths_in, const at::Tensor& q_positions_in,
                                 double scale) {
  TORCH_CHECK(q_in.is_cuda() && q_in.dim() == 4 && q_in.size(2) == 1,
              "decode_attention (CUDA): expected q (B, H, 1, D) on a GPU, found ", q_in.sizes());
  const int64_t b = q_in.size(0), h = q_in.size(1), d = q_in.size(3);
  const int64_t hk = keys.size(1), slots = keys.size(2), group = h / hk;
  TORCH_CHECK(keys.sizes() == at::IntArrayRef({b, hk, slots, d}) &&
                  values.sizes() == keys.sizes() && h % hk == 0 && group <= 16,
              "decode_attention (CUDA): keys/values must be (B, Hk, S, D) with H / Hk <= 16");
  TORCH_CHECK(d == 64 || d == 128, "decode_attention (CUDA): head dim must be 64 or 128");
  TORCH_CHECK(
      keys.scalar_type() == q_in.scalar_type() && values.scalar_type() == q_in.scalar_type(),
      "decode_attention (CUDA): q, keys, values must share a dtype");
  TORCH_CHECK(keys.stride(3) == 1 && keys.stride(2) == d && values.stride(3) == 1 &&
                  values.stride(2) == d && positions.stride(2) == 1 &&
                  positions.scalar_type() == at::kLong,
              "decode_attention (CUDA): cache rows must be contiguous");
  const c10::cuda::CUDAGuard guard(q_in.device());
  auto q = q_in.contiguous();
  TORCH_CHECK(reinterpret_cast<uintptr_t>(q.data_ptr()) % 16 == 0 &&
                  reinterpret_cast<uintptr_t>(keys.data_ptr()) % 16 == 0 &&
                  reinterpret_cast<uintptr_t>(values.data_ptr()) % 16 == 0,
              "decode_attention (CUDA): q, keys, values must be 16-byte aligned");
  auto lengths = lengths_in.to(at::kLong).contiguous();
  auto q_positions = q_positions_in.to(at::kLong).reshape({b}).contiguous();
  auto out = at::empty_like(q);
  if (b == 0 || h == 0) return out;
  if (slots == 0) return out.zero_();

  int device = 0, sms = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // Enough splits for two blocks per SM, each split a multiple of 64 entries, at most kMaxChunk.
  const int64_t want = std::max<int64_t>(1, (2 * sms + b * hk - 1) / (b * hk));
  int64_t chunk = (slots + want - 1) / want;
  chunk = std::min<int64_t>(kMaxChunk, std::max<int64_t>(64, (chunk + 63) / 64 * 64));
  const int64_t splits = (slots + chunk - 1) / chunk;

  auto part_o = at::empty({b, h, splits, d}, q.options().dtype(at::kFloat));
  auto part_ml = at::empty({b, h, splits, 2}, q.options().dtype(at::kFloat));
  DecodeParams p{};
  p.q = q.data_ptr();
  p.keys = keys.data_ptr();
  p.values = values.data_ptr();
  p.positions = positions.data_ptr<int64_t>();
  p.lengths = lengths.data_ptr<int64_t>();
  p.q_positions = q_positions.data_ptr<int64_t>();
  p.part_o = part_o.data_ptr<float>();
  p.part_ml = part_ml.data_ptr<float>();
  p.k_stride_b = keys.stride(0);
  p.k_stride_h = keys.stride(1);
  p.v_stride_b = values.stride(0);
  p.v_stride_h = values.stride(1);
  p.p_stride_b = positions.stride(0);
  p.p_stride_h = positions.stride(1);
  p.heads = static_cast<int>(h);
  p.kv_heads = static_cast<int>(hk);
  p.group = static_cast<int>(group);
  p.splits = static_cast<int>(splits);
  p.chunk = static_cast<int>(chunk);
  p.scale = static_cast<float>(scale);
  auto stream = c10::cuda::getCurrentCUDAStream();
  dispatch_decode(q.scalar_type(), d, group, [&](auto tag, auto dim, auto max_group) {
    using T = decltype(tag);
    constexpr int D = decltype(dim)::value;
    constexpr int G = decltype(max_group)::value;
    const size_t bytes = decode_smem_bytes<D, G>(static_cast<int>(chunk));
    C10_CUDA_CHECK(cudaFuncSetAttribute(decode_split_kernel<T, D, G>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
    const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(hk),
                    static_cast<unsigned>(b));
    decode_split_kernel<T, D, G><<<grid, kDecodeThreads, bytes, stream>>>(p);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    decode_reduce_kernel<T, D><<<static_cast<unsigned>(b * h), D, 0, stream>>>(
        p.part_o, p.part_ml, static_cast<T*>(out.data_ptr()), p.splits);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

at::Tensor compact_cache_cuda(const at::Tensor& keys, const at::Tensor& values,
                              const at::Tensor& positions, const at::Tensor& stat,
                              const at::Tensor& keep_in) {
  const int64_t b = keys.size(0), hk = keys.size(1), slots = keys.size(2), d = keys.size(3);
  const int64_t row_bytes = d * static_cast<int64_t>(keys.element_size());
  TORCH_CHECK(keys.is_cuda() && values.sizes() == keys.sizes() &&
                  values.scalar_type() == keys.scalar_type() &&
                  positions.sizes() == at::IntArrayRef({b, hk, slots}) &&
                  stat.sizes() == positions.sizes() && keep_in.sizes() == positions.sizes(),
              "compact_cache (CUDA): expected keys/values (B, Hk, S, D), positions, stat, keep "
              "(B, Hk, S)");
  TORCH_CHECK(keys.stride(3) == 1 && keys.stride(2) == d && values.stride(3) == 1 &&
                  values.stride(2) == d && positions.stride(2) == 1 && stat.stride(2) == 1 &&
                  row_bytes % 16 == 0 && positions.scalar_type() == at::kLong &&
                  stat.scalar_type() == at::kFloat,
              "compact_cache (CUDA): cache rows must be contiguous, 16-byte multiples");
  TORCH_CHECK(reinterpret_cast<uintptr_t>(keys.data_ptr()) % 16 == 0 &&
                  reinterpret_cast<uintptr_t>(values.data_ptr()) % 16 == 0,
              "compact_cache (CUDA): keys, values must be 16-byte aligned");
  const c10::cuda::CUDAGuard guard(keys.device());
  auto keep = keep_in.to(at::kBool).contiguous();
  auto lengths = at::empty({b, hk}, positions.options());
  if (b * hk == 0) return lengths;
  if (slots == 0) return lengths.zero_();
  auto dest = at::empty({b, hk, slots}, positions.options().dtype(at::kInt));
  auto out_keys = at::empty({b, hk, slots, d}, keys.options());
  auto out_values = at::empty_like(out_keys);
  auto out_positions = at::empty({b, hk, slots}, positions.options());
  auto out_stat = at::empty({b, hk, slots}, stat.options());
  auto stream = c10::cuda::getCurrentCUDAStream();
  compact_plan_kernel<<<static_cast<unsigned>(b * hk), kPlanThreads, 0, stream>>>(
      keep.data_ptr<bool>(), static_cast<int>(slots), dest.data_ptr<int>(),
      lengths.data_ptr<int64_t>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const int64_t elt = keys.element_size();
  MoveParams p{};
  p.keys = static_cast<const char*>(keys.data_ptr());
  p.values = static_cast<const char*>(values.data_ptr());
  p.positions = positions.data_ptr<int64_t>();
  p.stat = stat.data_ptr<float>();
  p.k_stride_b = keys.stride(0) * elt;
  p.k_stride_h = keys.stride(1) * elt;
  p.v_stride_b = values.stride(0) * elt;
  p.v_stride_h = values.stride(1) * elt;
  p.p_stride_b = positions.stride(0);
  p.p_stride_h = positions.stride(1);
  p.s_stride_b = stat.stride(0);
  p.s_stride_h = stat.stride(1);
  p.dest = dest.data_ptr<int>();
  p.lengths = lengths.data_ptr<int64_t>();
  p.out_keys = static_cast<char*>(out_keys.data_ptr());
  p.out_values = static_cast<char*>(out_values.data_ptr());
  p.out_positions = out_positions.data_ptr<int64_t>();
  p.out_stat = out_stat.data_ptr<float>();
  p.kv_heads = static_cast<int>(hk);
  p.slots = static_cast<int>(slots);
  p.row_bytes = static_cast<int>(row_bytes);
  const dim3 grid(static_cast<unsigned>((slots + kMoveEntries - 1) / kMoveEntries),
                  static_cast<unsigned>(b * hk));
  compact_move_kernel<<<grid, kMoveThreads, 0, stream>>>(p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  keys.copy_(out_keys);
  values.copy_(out_values);
  positions.copy_(out_positions);
  stat.copy_(out_stat);
  return lengths;
}

}  // namespace retain
