#include "kernels/bench_kernels.h"

#include <torch/csrc/autograd/autograd.h>
#include <torch/cuda.h>
#include <torch/utils.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/error.h"
#include "core/json.h"
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

// Milliseconds of the forward pass and of forward + backward of one attention implementation,
// or {-1, -1} with why in *error when it cannot run these shapes.
struct AttentionTimes {
  double fwd = -1, all = -1;
  std::string error;
};

template <typename Forward>
AttentionTimes time_attention(const BenchKernelsOptions& o, const std::vector<at::Tensor>& inputs,
                              const at::Tensor& d_out, Forward&& forward) {
  AttentionTimes r;
  try {
    {
      torch::NoGradGuard no_grad;
      r.fwd = time_ms([&] { forward(inputs); }, o.warmup, o.iters);
    }
    std::vector<at::Tensor> grads_of;
    for (const auto& x : inputs)
      grads_of.push_back(x.is_floating_point() ? x.clone().requires_grad_() : x);
    std::vector<at::Tensor> wrt;
    for (const auto& x : grads_of)
      if (x.requires_grad()) wrt.push_back(x);
    r.all = time_ms([&] { torch::autograd::grad({forward(grads_of)}, wrt, {d_out}); }, o.warmup,
                    o.iters);
  } catch (const std::exception& e) {
    r = AttentionTimes{};
    r.error = std::string(e.what()).substr(0, std::string(e.what()).find('\n'));
  }
  return r;
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
  auto tflops = [](double flops, double ms) { return ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0; };

  // The peers: bias-free causal SDPA, flash and cuDNN backends; their K/V heads expanded to the
  // query heads outside the timing (neither takes GQA through this entry point).
  auto ke = k.repeat_interleave(h / hk, 1), ve = v.repeat_interleave(h / hk, 1);
  const AttentionTimes flash = time_attention(o, {q, ke, ve}, d_out, [&](const auto& x) {
    return std::get<0>(
        at::_scaled_dot_product_flash_attention(x[0], x[1], x[2], 0.0, true, false, scale));
  });
  const AttentionTimes cudnn = time_attention(o, {q, ke, ve}, d_out, [&](const auto& x) {
    return std::get<0>(at::_scaled_dot_product_cudnn_attention(x[0], x[1], x[2], std::nullopt, true,
                                                               0.0, true, false, scale));
  });
  auto peer_line = [&](const char* name, const AttentionTimes& r) {
    if (r.fwd < 0)
      std::printf("%-12s T=%-6lld unavailable: %s\n", name, static_cast<long long>(t),
                  r.error.c_str());
    else
      std::printf("%-12s T=%-6lld fwd %9.3f ms %6.1f TFLOP/s | fwd+bwd %9.3f ms %6.1f TFLOP/s\n",
                  name, static_cast<long long>(t), r.fwd, tflops(fwd_flops, r.fwd), r.all,
                  tflops(total_flops, r.all));
  };
  peer_line("sdpa-flash", flash);
  peer_line("sdpa-cudnn", cudnn);

  const RetentionKernels chosen = retention_kernels();
  for (RetentionKernels kernels : o.kernels) {
    set_retention_kernels(kernels);
    const RetentionKernels path = retention_attention_path(q, k, v, log_beta);
    const std::string name = std::string("retention/") + retention_kernels_name(kernels);
    if (path != kernels) {
      std::printf("%-12s T=%-6lld not run: these inputs take %s\n", name.c_str(),
                  static_cast<long long>(t), retention_kernels_name(path));
      continue;
    }
    const AttentionTimes r =
        time_attention(o, {q, k, v, log_beta}, d_out, [&](const std::vector<at::Tensor>& x) {
          return retention_attention(x[0], x[1], x[2], x[3], positions, segments);
        });
    auto lg = log_beta.clone().requires_grad_();
    const double sum_ms = time_ms(
        [&] {
          auto s = retention_sum(lg, positions, segments);
          torch::autograd::grad({s}, {lg}, {at::ones_like(s)});
        },
        o.warmup, o.iters);
    auto ratio = [](const AttentionTimes& peer, double ms, bool all) {
      const double p = all ? peer.all : peer.fwd;
      return p > 0 && ms > 0 ? p / ms : 0.0;
    };
    std::printf(
        "%-12s T=%-6lld fwd %9.3f ms %6.1f TFLOP/s | fwd+bwd %9.3f ms %6.1f TFLOP/s | "
        "vs flash %.2f / %.2f, vs cudnn %.2f / %.2f (fwd / fwd+bwd; targets fwd+bwd >= 1.0 / "
        ">= 0.6) | retention_sum fwd+bwd %.3f ms\n",
        name.c_str(), static_cast<long long>(t), r.fwd, tflops(fwd_flops, r.fwd), r.all,
        tflops(total_flops, r.all), ratio(flash, r.fwd, false), ratio(flash, r.all, true),
        ratio(cudnn, r.fwd, false), ratio(cudnn, r.all, true), sum_ms);
    if (o.json) {
      Json line = {{"bench", "kernels"},
                   {"kernels", retention_kernels_name(kernels)},
                   {"seq", t},
                   {"batch", b},
                   {"heads", h},
                   {"kv_heads", hk},
                   {"head_dim", d},
                   {"fwd_ms", r.fwd},
                   {"fwd_bwd_ms", r.all},
                   {"sum_fwd_bwd_ms", sum_ms},
                   {"flash_fwd_ms", flash.fwd},
                   {"flash_fwd_bwd_ms", flash.all},
                   {"cudnn_fwd_ms", cudnn.fwd},
                   {"cudnn_fwd_bwd_ms", cudnn.all},
                   {"fwd_bwd_vs_flash", ratio(flash, r.all, true)},
                   {"fwd_bwd_vs_cudnn", ratio(cudnn, r.all, true)}};
      std::printf("%s\n", line.dump().c_str());
    }
  }
  set_retention_kernels(chosen);
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
