#include "trainer/trainer.h"

#include <ATen/core/grad_mode.h>
#include <torch/cuda.h>
#include <torch/nn/utils/clip_grad.h>

#include <chrono>
#include <iostream>

#include "core/cpu_isa.h"
#include "core/device.h"
#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"
#include "gates/losses.h"
#include "model/tokenizers/tokenizer.h"
#include "trainer/multimodal_batch.h"
#include "trainer/recipe.h"
#include "trainer/schedule.h"

namespace retain {

namespace {

// The global L2 norm of the gradients, as clip_grad_norm_ computes it, without clipping.
double gradient_norm(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> norms;
  for (const auto& p : params)
    if (p.grad().defined()) norms.push_back(p.grad().norm(2));
  if (norms.empty()) return 0.0;
  return (norms.size() == 1 ? norms[0] : at::stack(norms).norm(2)).item<double>();
}

}  // namespace

Trainer::Trainer(TrainSettings settings, Config recipe)
    : s_(std::move(settings)), recipe_(std::move(recipe)) {}

void Trainer::setup() {
  env_ = detect_dist_env();
  c10::Device device = resolve_device(s_.device);
  if (device.is_cuda() && env_.world > 1) {
    // One GPU per rank: local rank r trains on cuda:r, so a node needs as many GPUs as ranks.
    const int64_t gpus = static_cast<int64_t>(torch::cuda::device_count());
    RETAIN_CHECK(env_.local_rank < gpus, "rank ", env_.rank, " (local rank ", env_.local_rank,
                 ") needs cuda:", env_.local_rank, " but this node has ", gpus,
                 " visible GPU(s): start at most ", gpus,
                 " ranks per node, or set model.device=cpu to train on the CPU");
    device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env_.local_rank));
  }
  {
    ParallelGroups groups = make_parallel_groups(env_, device, std::chrono::seconds(s_.timeout_s),
                                                 static_cast<int>(s_.tensor_parallel));
    comm_ = groups.world;
    tp_ = groups.tp;
    dp_ = groups.dp;
  }
  // Tensor parallelism trains replicated gates: every rank's gradient holds its own heads' share,
  // and the world all-reduce adds them. A scorer reads every head's q/k/v, and a trained base's
  // shards would need their own optimizer shards: both are refused.
  RETAIN_CHECK(tp_->world() == 1 || s_.trainable == TrainableKind::kGates, recipe_.where(),
               ": dist.tensor_parallel ", s_.tensor_parallel,
               " trains retention gates only (train.trainable: gates), not '",
               trainable_name(s_.trainable), "'");
  const std::string resolved = recipe_.dump();
  recipe_sha_ = recipe_hash(recipe_);
  // (A missing model.path is Decoder::load's error to report, with its own message.)
  if (fs::is_directory(s_.model_dir)) base_files_ = directory_stamps(s_.model_dir);
  if (leader()) {
    std::cerr << "resolved recipe (" << recipe_.where() << "):\n" << resolved;
    ensure_writable_dir(s_.run_dir, "run.dir");
    run_dir_lock_.emplace(s_.run_dir, "train: run.dir");
    write_text_file_atomic(s_.run_dir / "recipe.yaml", resolved);
  }
  // Per-rank RNG streams (the data order comes from the sampler, identical on every rank).
  at::manual_seed(s_.seed * 1000003ull + static_cast<uint64_t>(env_.rank));
  ModelConfig model_config = ModelConfig::load(s_.model_dir);
  LoadOptions load{resolve_dtype(s_.dtype, device, model_config.dtype), device};
  if (tp_->world() > 1) load.tensor_parallel = tp_;
  model_ = std::make_unique<Decoder>(Decoder::load(s_.model_dir, load));
  trainable_ = make_trainable(s_, *model_, recipe_sha_);
  const std::string sha = tokenizer_sha256(s_.model_dir);
  data_ = std::make_unique<PackedDataset>(list_shards(s_.shards), s_.seq_len, sha,
                                          model_config.vocab_size);
  if (!s_.heldout.empty())
    heldout_ = std::make_unique<PackedDataset>(list_shards(s_.heldout), s_.seq_len, sha,
                                               model_config.vocab_size);
  // Vision-language shards: the images are preprocessed at every step exactly as at prep time.
  if (data_->whole_documents() || (heldout_ && heldout_->whole_documents())) {
    RETAIN_CHECK(model_config.multimodal != nullptr, s_.shards.string(),
                 ": the shards hold images but ", s_.model_dir.string(), " is a text-only ",
                 model_config.model_type, " model");
    processor_ = std::make_unique<ImageProcessorConfig>(ImageProcessorConfig::load(s_.model_dir));
  }
  sampler_ = std::make_unique<Sampler>(data_->size(), s_.seed, s_.shuffle);
  {
    // Every rank starts from rank 0's weights.
    auto initial = trainable_->parameters();
    at::NoGradGuard no_grad;
    comm_->broadcast(initial, 0);
  }
  optimizer_ = std::make_unique<torch::optim::AdamW>(trainable_->parameters(),
                                                     torch::optim::AdamWOptions(s_.lr)
                                                         .betas({s_.beta1, s_.beta2})
                                                         .eps(s_.eps)
                                                         .weight_decay(s_.weight_decay));
  int64_t params = 0;
  for (const auto& t : trainable_->parameters()) params += t.numel();
  if (leader())
    log_info(
        "training ", params, " parameters (", trainable_->description(), ") on ", data_->size(),
        " sequences of ", s_.seq_len, " tokens (", data_->num_tokens(), " tokens) on ",
        device.str(), ", ", comm_->name(),
        tp_->world() > 1
            ? str_cat(" (tensor parallel ", tp_->world(), " x data parallel ", dp_->world(), ")")
            : std::string(),
        ", global batch ", s_.batch_size * s_.grad_accum * dp_->world(), " sequences",
        device.is_cpu() ? str_cat("; CPU numerics ", cpu_numerics_description()) : std::string());
}

BatchLoss Trainer::forward(const PackedBatch& batch, int64_t targets, bool with_stats,
                           Collectives& comm) {
  const auto device = model_->device();
  MicroBatch micro{batch.ids.to(device), batch.positions.to(device), batch.segments.to(device),
                   batch.loss_mask.to(device)};
  // Vision-language documents: the frozen vision tower's features and 3-D rotary positions, the
  // same for the student and the teacher.
  std::optional<MultimodalInputs> images;
  if (!batch.images.empty()) images = packed_multimodal_inputs(*model_, batch, *processor_);
  micro.multimodal = images ? &*images : nullptr;
  return trainable_->forward(micro, targets, with_stats, comm);
}

double Trainer::heldout_loss() {
  RETAIN_CHECK(heldout_ != nullptr, "train: no held-out data (data.heldout)");
  at::NoGradGuard no_grad;
  double total = 0;
  int64_t n = std::min<int64_t>(s_.eval_batches, heldout_->size());
  auto local = make_local_collectives();
  for (int64_t i = 0; i < n; ++i) {
    PackedBatch b = heldout_->batch({i});
    BatchLoss l = forward(b, count_loss_targets(b.segments, b.loss_mask), false, *local);
    total += (l.base + s_.capacity_weight * l.capacity).item<double>();
  }
  return total / static_cast<double>(std::max<int64_t>(n, 1));
}

StepStats Trainer::train_step(int64_t step, bool with_stats) {
  StepStats stats;
  stats.lr = learning_rate(step, s_.lr, s_.min_lr, s_.warmup, s_.steps);
  for (auto& group : optimizer_->param_groups())
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(stats.lr);
  int64_t targets = 0;
  const std::vector<PackedBatch> micro = next_micro_batches(step, &targets, &stats.tokens);
  optimizer_->zero_grad();
  accumulate_gradients(micro, targets, with_stats, stats);
  apply_gradients(step, stats);
  return stats;
}

std::vector<PackedBatch> Trainer::next_micro_batches(int64_t step, int64_t* targets,
                                                     double* tokens) {
  // Fetched before any forward: their count of targets normalises every micro-batch's loss.
  std::vector<PackedBatch> micro;
  int64_t local_targets = 0;
  for (int64_t m = 0; m < s_.grad_accum; ++m) {
    std::vector<int64_t> epochs;
    // The ranks of a tensor-parallel group read the same sequences.
    auto ids = sampler_->next(s_.batch_size * dp_->world(), dp_->rank(), dp_->world(), &epochs);
    if (samples_.is_open())
      for (size_t i = 0; i < ids.size(); ++i)
        samples_ << step + 1 << " " << epochs[i] << " " << ids[i] << "\n";
    micro.push_back(data_->batch(ids));
    local_targets += count_loss_targets(micro.back().segments, micro.back().loss_mask);
    *tokens += static_cast<double>((micro.back().segments >= 0).sum().item<int64_t>());
  }
  // Losses are normalised by the count of targets of the whole global batch.
  auto count = at::tensor({static_cast<double>(local_targets)}, at::kDouble);
  dp_->all_reduce_sum(count);
  *targets = static_cast<int64_t>(count[0].item<double>());
  return micro;
}

void Trainer::accumulate_gradients(const std::vector<PackedBatch>& micro, int64_t targets,
                                   bool with_stats, StepStats& stats) {
  const double accum = static_cast<double>(s_.grad_accum);
  for (size_t m = 0; m < micro.size(); ++m) {
    BatchLoss l = forward(micro[m], targets, with_stats && m == 0, *dp_);
    auto loss = l.base + s_.capacity_weight * l.capacity / accum;
    // Under tensor parallelism every rank of the group computes the capacity loss from all heads'
    // log beta, and the world all-reduce adds the group's gradients: each rank takes its 1/tp
    // share (the base losses reach the gates only through each rank's own heads).
    auto backward_loss = tp_->world() > 1 ? l.base + s_.capacity_weight * l.capacity /
                                                         (accum * static_cast<double>(tp_->world()))
                                          : loss;
    // A non-finite loss still goes backward: its NaN gradients reach every rank through the
    // all-reduce, so all ranks skip the step together.
    backward_loss.backward();
    stats.loss += loss.item<double>();
    stats.capacity += l.capacity.item<double>() / accum;
    if (m == 0) {  // the first micro-batch stands for the step's KL / NTP and gate statistics
      stats.kl = l.kl * accum;
      stats.ntp = l.ntp * accum;
      stats.mean_beta = l.mean_beta;
      stats.live = l.live;
    }
  }
}

void Trainer::apply_gradients(int64_t step, StepStats& stats) {
  auto params = trainable_->parameters();
  for (auto& p : params)
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
  std::vector<at::Tensor> grads;
  for (auto& p : params) grads.push_back(p.grad());
  all_reduce_flat(*comm_, grads);  // one flat all-reduce of every gradient per optimizer step
  stats.all_reduce(*dp_);          // a tensor-parallel group's statistics are already whole

  stats.finite = std::isfinite(stats.loss);
  if (stats.finite) {
    stats.grad_norm = s_.grad_clip > 0 ? torch::nn::utils::clip_grad_norm_(params, s_.grad_clip)
                                       : gradient_norm(params);
    stats.finite = std::isfinite(stats.grad_norm);
  }
  if (stats.finite) {
    consecutive_nonfinite_ = 0;
    optimizer_->step();
    return;
  }
  ++skipped_steps_;
  ++consecutive_nonfinite_;
  optimizer_->zero_grad();
  log_warn("step ", step + 1, ": non-finite loss or gradient, step skipped (",
           consecutive_nonfinite_, " in a row)");
  RETAIN_CHECK(consecutive_nonfinite_ < s_.max_nonfinite, "train: ", consecutive_nonfinite_,
               " non-finite steps in a row (train.max_nonfinite_steps); lower optim.lr or "
               "check the data");
}

void Trainer::log_step(int64_t step, const StepStats& stats, bool log_now) {
  tokens_since_log_ += stats.tokens;
  const bool evaluate = heldout_ && s_.eval_every > 0 && (step + 1) % s_.eval_every == 0;
  // The leader evaluates; under tensor parallelism with the rest of its group, which holds the
  // other shards of its model.
  double heldout = 0;
  if (evaluate && dp_->rank() == 0 && (leader() || tp_->world() > 1)) heldout = heldout_loss();
  if (!leader()) return;
  bar_->update(1);
  if (!log_now) {
    if (evaluate)
      metrics_ << Json({{"step", step + 1}, {"heldout_loss", heldout}}).dump() << std::endl;
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - last_log_).count();
  const double rate = seconds > 0 ? tokens_since_log_ / seconds : 0;
  last_log_ = now;
  tokens_since_log_ = 0;
  Json line = {{"step", step + 1},     {"loss", stats.loss},
               {"lr", stats.lr},       {"grad_norm", stats.grad_norm},
               {"tokens_per_s", rate}, {"skipped_steps", skipped_steps_}};
  trainable_->add_metrics(stats, line);
  bar_->set_postfix(trainable_->postfix(stats, rate));
  if (evaluate) line["heldout_loss"] = heldout;
  metrics_ << line.dump() << std::endl;
}

int Trainer::run() {
  setup();
  int64_t step = restore();
  if (leader()) {
    metrics_.open(s_.run_dir / "metrics.jsonl", std::ios::app);
    // Named by its run directory: runs trained side by side (make demo) tell their lines apart.
    const fs::path dir = s_.run_dir.lexically_normal();
    const std::string name =
        (dir.has_filename() ? dir.filename() : dir.parent_path().filename()).string();
    bar_.emplace(name.empty() ? std::string("train") : str_cat("train ", name), s_.steps, "step");
    bar_->skip(step);
  }
  // One file per data-parallel shard: the ranks of a tensor-parallel group read the same samples.
  if (s_.log_samples && tp_->rank() == 0)
    samples_.open(s_.run_dir / str_cat("samples.rank", comm_->rank(), ".txt"), std::ios::app);
  last_log_ = std::chrono::steady_clock::now();
  for (; step < s_.steps; ++step) {
    const bool log_now = (step + 1) % s_.log_every == 0 || step + 1 == s_.steps;
    const StepStats stats = train_step(step, log_now);
    log_step(step, stats, log_now);
    if ((s_.checkpoint_every > 0 && (step + 1) % s_.checkpoint_every == 0) || step + 1 == s_.steps)
      save_checkpoint(step + 1);
  }
  if (bar_) bar_->finish();
  comm_->shutdown();
  if (leader())
    log_info("done: ", s_.steps, " steps, ", skipped_steps_, " skipped; checkpoints in ",
             s_.run_dir.string());
  return 0;
}

int run_train(const std::string& recipe_path, const std::vector<std::string>& overrides) {
  Config recipe = resolve_recipe(recipe_path, overrides);
  Trainer trainer(read_settings(recipe), std::move(recipe));
  return trainer.run();
}

}  // namespace retain
