#include "trainer/bench_train.h"

#include <torch/cuda.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include "core/device.h"
#include "core/error.h"
#include "core/json.h"
#include "dist/collectives.h"
#include "gates/gate_bank.h"
#include "gates/losses.h"
#include "kernels/bench_kernels.h"
#include "kernels/device_info.h"
#include "kernels/retention_attention.h"
#include "model/decoder.h"
#include "trainer/recipe.h"
#include "trainer/trainable.h"

namespace retain {
namespace {

void check_options(const BenchTrainOptions& o) {
  RETAIN_CHECK(o.seq >= 2, "bench train: --seq must be >= 2, found ", o.seq);
  RETAIN_CHECK(o.batch >= 1, "bench train: --batch must be >= 1, found ", o.batch);
  RETAIN_CHECK(o.iters >= 1 && o.warmup >= 0,
               "bench train: --iters must be >= 1 and --warmup >= 0");
  parse_retention_kernels(o.attention, "bench train --attention");
  parse_gate_arch(o.gates, "bench train --gates");
  RETAIN_CHECK(o.memory > 0, "bench train: --memory must be positive, found ", o.memory);
  RETAIN_CHECK(o.logit_block >= 1, "bench train: --logit-block must be >= 1");
}

// Model FLOPs of one step per token, the usual convention (recomputation not counted):
//   matrix products: teacher forward + student forward + backward through the activations only
//   (the base is frozen: no weight gradients) = 3 x 2 P, P = the multiply-accumulates per token
//   of every projection and the LM head; attention (causal, T/2 keys on average): 2 L H D T per
//   forward, the backward 2.5 x that.
double step_flops_per_token(const ModelConfig& c, int64_t t) {
  const double d = static_cast<double>(c.hidden_size),
               q = static_cast<double>(c.num_heads) * static_cast<double>(c.head_dim),
               kv = static_cast<double>(c.num_kv_heads) * static_cast<double>(c.head_dim),
               ff = static_cast<double>(c.intermediate_size);
  const double per_layer = d * q + 2 * d * kv + q * d + 3 * d * ff;
  const double macs =
      static_cast<double>(c.num_layers) * per_layer + d * static_cast<double>(c.vocab_size);
  const double attention = 2.0 * static_cast<double>(c.num_layers) * q * static_cast<double>(t);
  return 3.0 * 2.0 * macs + (1.0 + 1.0 + 2.5) * attention;
}

void sync(c10::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

// Peak resident memory of this process (VmHWM), for CPU runs.
int64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string key;
  while (in >> key) {
    if (key == "VmHWM:") {
      int64_t kib = 0;
      in >> kib;
      return kib * 1024;
    }
    std::getline(in, key);
  }
  return 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int run_bench_train_command(const BenchTrainOptions& o) {
  check_options(o);
  set_retention_kernels(parse_retention_kernels(o.attention, "bench train --attention"));
  std::shared_ptr<Collectives> world;
  auto model = load_bench_model(o.model, &world);
  const bool leader = !world || world->rank() == 0;
  // --tp: each rank's gate gradients hold its heads' share; they are summed over the group (the
  // all-reduce phase), and the capacity loss, which every rank computes whole, counts 1/tp.
  Collectives* tp = model->tensor_parallel();
  const double tp_size = tp != nullptr ? static_cast<double>(tp->world()) : 1.0;
  const c10::Device device = model->device();
  const ModelConfig& c = model->config();
  // The trainer's own settings and trainable: the step below is training's step, phase by phase.
  const TrainSettings settings = read_settings(resolve_recipe(
      "", {"model.path=bench-train-model", "data.shards=bench-train-random-tokens",
           str_cat("run.seed=", o.model.seed + 1), "gates.arch=" + o.gates,
           str_cat("gates.width=", o.gate_width), str_cat("loss.memory=", o.memory),
           str_cat("loss.logit_block_size=", o.logit_block), "loss.base=[fwkl]",
           "loss.capacity=global", "loss.weight=1",
           str_cat("train.activation_checkpointing=", o.checkpointing ? "true" : "false")}));
  auto trainable = make_trainable(settings, *model, "");
  torch::optim::AdamW optimizer(trainable->parameters(), torch::optim::AdamWOptions(1e-3));
  auto local = make_local_collectives();  // one data-parallel shard

  auto gen = at::make_generator<at::CPUGeneratorImpl>(o.model.seed);
  MicroBatch batch;
  batch.ids = at::randint(0, c.vocab_size, {o.batch, o.seq}, gen, at::kLong).to(device);
  batch.positions = at::arange(o.seq, at::kLong).expand({o.batch, o.seq}).contiguous().to(device);
  batch.segments = at::zeros({o.batch, o.seq}, at::kLong).to(device);
  batch.loss_mask = at::ones({o.batch, o.seq}, at::kBool).to(device);
  const int64_t targets = count_loss_targets(batch.segments, batch.loss_mask);

  Json resolved = {{"model", o.model.describe()},
                   {"model_type", c.model_type},
                   {"device", device.str()},
                   {"dtype", c10::toString(model->dtype())},
                   {"seq", o.seq},
                   {"batch", o.batch},
                   {"gates", settings.gates.to_json()},
                   {"memory", o.memory},
                   {"logit_block", o.logit_block},
                   {"activation_checkpointing", o.checkpointing},
                   {"attention", o.attention},
                   {"iters", o.iters},
                   {"warmup", o.warmup}};
  if (world) resolved["tensor_parallel"] = world->world();
  if (!o.json && leader) std::cerr << "bench train, resolved:\n" << resolved.dump(2) << "\n";

  // Phases, each closed by a device synchronisation so its time is its own.
  using Clock = std::chrono::steady_clock;
  auto seconds = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  std::map<std::string, std::vector<double>> phase_s;  // forward's phases, by name
  std::vector<double> backward_s, reduce_s, optim_s, step_s;
  std::map<std::string, double> phase_now;
  Clock::time_point last;
  trainable->set_phase_mark([&](const char* phase) {
    sync(device);
    const auto now = Clock::now();
    phase_now[phase] = seconds(last, now);
    last = now;
  });
  if (device.is_cuda()) cuda_reset_peak_allocated_bytes(device.index());
  double last_loss = 0;
  for (int it = 0; it < o.warmup + o.iters; ++it) {
    sync(device);
    const auto t0 = Clock::now();
    last = t0;
    BatchLoss l = trainable->forward(batch, targets, false, *local);
    // As the trainer's step (one micro-batch): under tensor parallelism each rank's capacity loss
    // counts 1/tp, the group's gradients are summed.
    auto loss = l.base + settings.capacity_weight * l.capacity / tp_size;
    sync(device);
    const auto t3 = Clock::now();
    optimizer.zero_grad();
    loss.backward();
    sync(device);
    const auto t4 = Clock::now();
    if (tp != nullptr) {
      std::vector<at::Tensor> grads;
      for (auto& p : trainable->parameters()) {
        if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
        grads.push_back(p.grad());
      }
      all_reduce_flat(*tp, grads);
    }
    sync(device);
    const auto t4b = Clock::now();
    optimizer.step();
    sync(device);
    const auto t5 = Clock::now();
    last_loss = loss.item<double>();
    RETAIN_CHECK(std::isfinite(last_loss), "bench train: the loss is not finite (", last_loss, ")");
    if (it < o.warmup) continue;
    for (const auto& [phase, t] : phase_now) phase_s[phase].push_back(t);
    backward_s.push_back(seconds(t3, t4));
    reduce_s.push_back(seconds(t4, t4b));
    optim_s.push_back(seconds(t4b, t5));
    step_s.push_back(seconds(t0, t5));
  }
  std::vector<double> teacher_s = phase_s["teacher_forward"],
                      student_s = phase_s["student_forward"], loss_s = phase_s["losses"];
  const double step = median(step_s);
  const double tokens = static_cast<double>(o.batch * o.seq);
  const double rate = tokens / step;
  const double flops = step_flops_per_token(c, o.seq) * tokens;
  const double peak_rate = device_matmul_rate(device, model->dtype());
  const int64_t peak_memory =
      device.is_cuda() ? cuda_peak_allocated_bytes(device.index()) : peak_rss_bytes();

  if (world) world->shutdown();  // rank 0 hosts the store: it waits for the others
  if (!leader) return 0;
  Json out = resolved;
  out["tokens_per_s"] = rate;
  out["step_ms"] = step * 1e3;
  out["model_tflops_per_step"] = flops / 1e12;
  out["achieved_tflops"] = flops / step / 1e12;
  out["matmul_tflops_measured"] = peak_rate / 1e12;
  out["mfu"] = flops / step / peak_rate;
  out["peak_memory_bytes"] = peak_memory;
  out["peak_memory_kind"] = device.is_cuda() ? "CUDA allocator peak" : "process peak RSS";
  out["time_ms"] = {{"teacher_forward", median(teacher_s) * 1e3},
                    {"student_forward", median(student_s) * 1e3},
                    {"losses", median(loss_s) * 1e3},
                    {"backward", median(backward_s) * 1e3},
                    {"optimizer", median(optim_s) * 1e3},
                    {"all_reduce", median(reduce_s) * 1e3}};
  out["loss"] = last_loss;
  if (o.json) {
    std::cout << out.dump() << std::endl;
    return 0;
  }
  std::printf("step         %10.1f tokens/s  (%lld x %lld tokens, median %.1f ms of %d steps)\n",
              rate, static_cast<long long>(o.batch), static_cast<long long>(o.seq), step * 1e3,
              o.iters);
  std::printf(
      "MFU          %9.1f%%  (%.3g TFLOP/s of model FLOPs; measured %s matmul %.3g TFLOP/s)\n",
      100.0 * flops / step / peak_rate, flops / step / 1e12, c10::toString(model->dtype()),
      peak_rate / 1e12);
  std::printf("memory       %.2f GB (%s)\n", static_cast<double>(peak_memory) / 1e9,
              device.is_cuda() ? "CUDA allocator peak" : "process peak RSS");
  std::printf(
      "time split   teacher %.1f ms, student %.1f ms, losses %.1f ms, backward %.1f ms, "
      "optimizer %.1f ms, all-reduce %.1f ms%s\n",
      median(teacher_s) * 1e3, median(student_s) * 1e3, median(loss_s) * 1e3,
      median(backward_s) * 1e3, median(optim_s) * 1e3, median(reduce_s) * 1e3,
      world ? str_cat(" (tensor parallel ", world->world(),
                      ": tokens/s, FLOPs, memory are one rank's; the layers' all-reduces are in "
                      "the forward and backward times)")
                  .c_str()
            : " (one process)");
  return 0;
}

}  // namespace retain
