#include "kernels/bench_kernels.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "kernels/decode_attention.h"
#include "kernels/retention_attention.h"

namespace retain {

namespace {

// Mean milliseconds of fn over `iters` calls after `warmup` calls, device synchronised.
template <typename Fn>
double time_ms(Fn&& fn, int warmup, int iters, c10::Device device = at::kCUDA) {
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize(device.index());
  };
  for (int i = 0; i < warmup; ++i) fn();
  sync();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) fn();
  sync();
  const std::chrono::duration<double, std::milli> elapsed =
      std::chrono::steady_clock::now() - start;
  return elapsed.count() / iters;
}

void bench_attention(const BenchKernelsOptions& o, int64_t t) {
  const int64_t b = o.batch, h = o.heads, hk = o.kv_heads, d = o.head_dim;
  auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  auto q = at::randn({b, h, t, d}, opts), k = at::randn({b, hk, t, d}, opts),
       v = at::randn({b, hk, t, d}, opts);
  auto log_beta = -0.01 * at::rand({b, hk, t}, opts.dtype(at::kFloat));
  auto positions = at::arange(t, opts.dtype(at::kLong)).expand({b, t}).contiguous();
  auto segments = at::zeros({b, t}, opts.dtype(at::kLong));
  auto d_out = at::randn({b, h, t, d}, opts);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  // Causal FLOPs: two T x T x D products over half the matrix; the backward counts 2.5 x.
  const double fwd_flops = 4.0 * b * h * static_cast<double>(t) * t * d / 2.0;
  const double total_flops = 3.5 * fwd_flops;

  const char* path = retention_attention_uses_kernel(q, k, log_beta) ? "kernel" : "ATen reference";
  double ret_fwd = 0, ret_all = 0;
  {
    torch::NoGradGuard no_grad;
    ret_fwd = time_ms([&] { retention_attention(q, k, v, log_beta, positions, segments); },
                      o.warmup, o.iters);
  }
  {
    auto qg = q.clone().requires_grad_(), kg = k.clone().requires_grad_(),
         vg = v.clone().requires_grad_(), lg = log_beta.clone().requires_grad_();
    ret_all = time_ms(
        [&] {
          auto out = retention_attention(qg, kg, vg, lg, positions, segments);
          torch::autograd::grad({out}, {qg, kg, vg, lg}, {d_out});
        },
        o.warmup, o.iters);
  }
  // The flash backend needs as many KV heads as query heads: K/V are expanded outside the timing.
  auto ke = k.repeat_interleave(h / hk, 1), ve = v.repeat_interleave(h / hk, 1);
  double sdpa_fwd = 0, sdpa_all = 0;
  {
    torch::NoGradGuard no_grad;
    sdpa_fwd = time_ms(
        [&] { at::_scaled_dot_product_flash_attention(q, ke, ve, 0.0, true, false, scale); },
        o.warmup, o.iters);
  }
  {
    auto qg = q.clone().requires_grad_(), kg = ke.clone().requires_grad_(),
         vg = ve.clone().requires_grad_();
    sdpa_all = time_ms(
        [&] {
          auto out = std::get<0>(
              at::_scaled_dot_product_flash_attention(qg, kg, vg, 0.0, true, false, scale));
          torch::autograd::grad({out}, {qg, kg, vg}, {d_out});
        },
        o.warmup, o.iters);
  }
  auto tflops = [](double flops, double ms) { return flops / (ms * 1e-3) / 1e12; };
  std::printf(
      "retention_attention  T=%-6lld fwd     %9.3f ms %7.1f TFLOP/s | sdpa-flash %9.3f ms "
      "%7.1f TFLOP/s | throughput ratio %.2f (%s)\n",
      static_cast<long long>(t), ret_fwd, tflops(fwd_flops, ret_fwd), sdpa_fwd,
      tflops(fwd_flops, sdpa_fwd), sdpa_fwd / ret_fwd, path);
  std::printf(
      "retention_attention  T=%-6lld fwd+bwd %9.3f ms %7.1f TFLOP/s | sdpa-flash %9.3f ms "
      "%7.1f TFLOP/s | throughput ratio %.2f (target >= 0.50)\n",
      static_cast<long long>(t), ret_all, tflops(total_flops, ret_all), sdpa_all,
      tflops(total_flops, sdpa_all), sdpa_all / ret_all);

  auto lg = log_beta.clone().requires_grad_();
  const double sum_ms = time_ms(
      [&] {
        auto s = retention_sum(lg, positions, segments);
        torch::autograd::grad({s}, {lg}, {at::ones_like(s)});
      },
      o.warmup, o.iters);
  std::printf("retention_sum        T=%-6lld fwd+bwd %9.3f ms (B=%lld, Hk=%lld)\n",
              static_cast<long long>(t), sum_ms, static_cast<long long>(b),
              static_cast<long long>(hk));
}

void bench_decode(const BenchKernelsOptions& o, double bandwidth) {
  const int64_t b = o.decode_batch, h = o.heads, hk = o.kv_heads, d = o.head_dim, c = o.decode_len;
  auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  auto keys = at::randn({b, hk, c, d}, opts), values = at::randn({b, hk, c, d}, opts);
  auto lengths = at::randint(c / 2, c + 1, {b, hk}, opts.dtype(at::kLong));
  auto slot = at::arange(c, opts.dtype(at::kLong)).view({1, 1, c});
  auto positions = at::where(slot < lengths.unsqueeze(-1), slot, at::full_like(slot, -1));
  auto q = at::randn({b, h, 1, d}, opts);
  auto q_positions = at::full({b, 1}, c, opts.dtype(at::kLong));
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const double live = static_cast<double>(lengths.sum().item<int64_t>());
  // Bytes that must be read: the live keys, values and positions.
  const double bytes = live * (2.0 * d * keys.element_size() + sizeof(int64_t));
  const double ms =
      time_ms([&] { decode_attention(q, keys, values, positions, lengths, q_positions, scale); },
              o.warmup, o.iters);
  const double ideal_ms = bytes / bandwidth * 1e3;
  std::printf(
      "decode_attention     B=%lld S<=%lld %9.3f ms %7.1f GB/s | ideal %.3f ms at %.0f GB/s "
      "| time / ideal %.2f (target <= 1.50) (%s)\n",
      static_cast<long long>(b), static_cast<long long>(c), ms, bytes / (ms * 1e-3) / 1e9, ideal_ms,
      bandwidth / 1e9, ms / ideal_ms,
      decode_attention_uses_kernel(q, keys, values, positions) ? "kernel" : "ATen reference");

  auto stat = at::randn({b, hk, c}, opts.dtype(at::kFloat));
  auto keep = at::rand({b, hk, c}, opts.dtype(at::kFloat)) < 0.5;
  const double compact_ms =
      time_ms([&] { compact_cache(keys, values, positions, stat, keep); }, o.warmup, o.iters);
  std::printf(
      "compact_cache        B=%lld S=%lld    %9.3f ms (%s)\n", static_cast<long long>(b),
      static_cast<long long>(c), compact_ms,
      compact_cache_uses_kernel(keys, values, positions, stat) ? "kernel" : "ATen reference");
}

}  // namespace

double device_copy_bandwidth(c10::Device device) {
  const int64_t bytes = device.is_cuda() ? int64_t{1} << 30 : int64_t{256} << 20;
  auto opts = at::TensorOptions().device(device).dtype(at::kByte);
  auto src = at::ones({bytes}, opts), dst = at::empty({bytes}, opts);
  const double ms = time_ms([&] { dst.copy_(src); }, 2, 10, device);
  return 2.0 * static_cast<double>(bytes) / (ms * 1e-3);
}

double device_matmul_rate(c10::Device device, at::ScalarType dtype) {
  const int64_t n = device.is_cuda() ? 8192 : 2048;
  auto opts = at::TensorOptions().device(device).dtype(dtype);
  auto a = at::randn({n, n}, opts), b = at::randn({n, n}, opts);
  const double ms = time_ms([&] { at::mm(a, b); }, 2, device.is_cuda() ? 10 : 3, device);
  return 2.0 * static_cast<double>(n) * n * n / (ms * 1e-3);
}

int run_bench_kernels_command(const BenchKernelsOptions& o) {
  if (!torch::cuda::is_available()) throw Error("bench kernels needs a CUDA device; found none");
  RETAIN_CHECK(o.heads % o.kv_heads == 0 && o.iters > 0 && o.warmup >= 0,
               "bench kernels: heads must be a multiple of kv heads, iters positive");
  std::printf("bf16, B=%lld H=%lld Hk=%lld D=%lld, %d iterations after %d warm-up\n",
              static_cast<long long>(o.batch), static_cast<long long>(o.heads),
              static_cast<long long>(o.kv_heads), static_cast<long long>(o.head_dim), o.iters,
              o.warmup);
  for (int64_t t : o.seqs) bench_attention(o, t);
  const double bandwidth = device_copy_bandwidth(at::kCUDA);
  std::printf("device copy bandwidth %.0f GB/s (1 GiB copy_, read + write)\n", bandwidth / 1e9);
  bench_decode(o, bandwidth);
  return 0;
}

}  // namespace retain
