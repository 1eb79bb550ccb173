#include "trainer/trainer.h"

#include <ATen/core/grad_mode.h>
#include <torch/cuda.h>
#include <torch/nn/utils/clip_grad.h>

#include <chrono>
#include <iostream>

#include "checkpoints/gate_file.h"
#include "core/device.h"
#include "core/error.h"
#include "core/log.h"
#include "core/sha256.h"
#include "gates/gated_attention.h"
#include "gates/losses.h"
#include "gates/scorer_hook.h"
#include "kernels/retention_attention.h"
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

void StepStats::all_reduce(Collectives& comm) {
  auto values = at::tensor({loss, capacity, kl, ntp, mean_beta, live, tokens}, at::kDouble);
  comm.all_reduce_sum(values);
  const double w = static_cast<double>(comm.world());
  loss = values[0].item<double>();
  capacity = values[1].item<double>();
  kl = values[2].item<double>();
  ntp = values[3].item<double>();
  mean_beta = values[4].item<double>() / w;
  live = values[5].item<double>() / w;
  tokens = values[6].item<double>();
}

Trainer::Trainer(TrainSettings settings, Config recipe)
    : s_(std::move(settings)), recipe_(std::move(recipe)) {}

std::vector<at::Tensor> Trainer::trainable() const {
  if (gates_) return gates_->parameters();
  if (scorer_) return scorer_->parameters();
  std::vector<at::Tensor> out;
  for (const auto& [name, p] : model_->named_parameters()) out.push_back(p);
  return out;
}

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
  RETAIN_CHECK(tp_->world() == 1 || (!s_.train_base && !s_.train_scorer()), recipe_.where(),
               ": dist.tensor_parallel ", s_.tensor_parallel,
               " trains retention gates only (train.trainable: gates), not '", s_.trainable, "'");
  const std::string resolved = recipe_.dump();
  recipe_sha_ = recipe_hash(recipe_);
  // (A missing model.path is Decoder::load's error to report, with its own message.)
  if (fs::is_directory(s_.model_dir)) base_files_ = directory_stamps(s_.model_dir);
  if (leader()) {
    std::cerr << "resolved recipe (" << recipe_.where() << "):\n" << resolved;
    fs::create_directories(s_.run_dir);
    write_text_file_atomic(s_.run_dir / "recipe.yaml", resolved);
  }
  // Per-rank RNG streams (the data order comes from the sampler, identical on every rank).
  at::manual_seed(s_.seed * 1000003ull + static_cast<uint64_t>(env_.rank));
  ModelConfig model_config = ModelConfig::load(s_.model_dir);
  LoadOptions load{resolve_dtype(s_.dtype, device, model_config.dtype), device};
  if (tp_->world() > 1) load.tensor_parallel = tp_;
  model_ = std::make_unique<Decoder>(Decoder::load(s_.model_dir, load));
  if (s_.train_base) {
    model_->set_trainable(true);
  } else if (s_.train_scorer()) {
    scorer_ = std::make_unique<ScorerBank>(s_.scorer, model_config, device, s_.seed);
  } else {
    for (const auto& [name, p] : model_->named_parameters())
      RETAIN_CHECK(!p.requires_grad(), "internal: base parameter ", name, " is not frozen");
    if (!s_.init_from.empty()) {
      GateFileInfo info;
      gates_ = load_gate_file(s_.init_from, model_config, device, &info);
      RETAIN_CHECK(info.config.arch == s_.gates.arch && info.config.width == s_.gates.width &&
                       info.config.tie_projection == s_.gates.tie_projection,
                   s_.init_from, ": its gate config (", info.config.to_json().dump(),
                   ") differs from the recipe's (", s_.gates.to_json().dump(), ")");
      for (auto& p : gates_->parameters()) p.requires_grad_(true);
    } else {
      gates_ = std::make_unique<GateBank>(s_.gates, model_->config(), device, s_.seed);
    }
  }
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
    auto initial = trainable();
    at::NoGradGuard no_grad;
    comm_->broadcast(initial, 0);
  }
  optimizer_ =
      std::make_unique<torch::optim::AdamW>(trainable(), torch::optim::AdamWOptions(s_.lr)
                                                             .betas({s_.beta1, s_.beta2})
                                                             .eps(s_.eps)
                                                             .weight_decay(s_.weight_decay));
  int64_t params = 0;
  for (const auto& t : trainable()) params += t.numel();
  if (leader())
    log_info("training ", params, " parameters (",
             s_.train_base       ? "the whole model"
             : s_.train_scorer() ? s_.trainable + " scorer"
                                 : "gates only",
             ") on ", data_->size(), " sequences of ", s_.seq_len, " tokens (", data_->num_tokens(),
             " tokens) on ", device.str(), ", ", comm_->name(),
             tp_->world() > 1 ? str_cat(" (tensor parallel ", tp_->world(), " x data parallel ",
                                        dp_->world(), ")")
                              : std::string(),
             ", global batch ", s_.batch_size * s_.grad_accum * dp_->world(), " sequences");
}

Trainer::BatchLoss Trainer::forward(const PackedBatch& batch, int64_t targets, bool with_stats,
                                    Collectives& comm) {
  const auto device = model_->device();
  auto ids = batch.ids.to(device), positions = batch.positions.to(device),
       segments = batch.segments.to(device);
  // Vision-language documents: the frozen vision tower's features and 3-D rotary positions, the
  // same for the student and the teacher.
  std::optional<MultimodalInputs> images;
  if (!batch.images.empty()) images = packed_multimodal_inputs(*model_, batch, *processor_);
  const MultimodalInputs* mm = images ? &*images : nullptr;
  if (scorer_) return scorer_forward(ids, positions, segments, mm, comm);
  auto student_hook = std::make_shared<GatedAttentionHook>(gates_.get(), segments);
  GatedAttentionHook& student = *student_hook;
  ForwardContext student_context{nullptr, &student, s_.activation_checkpointing};
  student_context.multimodal = mm;
  auto hidden = model_->forward_hidden(ids, positions, student_context);
  at::Tensor teacher_hidden;
  if (s_.terms.fwkl || s_.terms.rvkl) {
    at::NoGradGuard no_grad;
    GatedAttentionHook teacher(nullptr, segments);
    ForwardContext teacher_context{nullptr, &teacher};
    teacher_context.multimodal = mm;
    teacher_hidden = model_->forward_hidden(ids, positions, teacher_context);
  }
  LossSums sums = base_loss_sums(*model_, hidden, teacher_hidden, ids, segments,
                                 batch.loss_mask.to(device), s_.terms, s_.logit_block);
  BatchLoss out;
  out.student_hook = student_hook;
  // Each term is normalised by the step's (not the micro-batch's) count of targets, so
  // accumulation gives the same gradient as one big batch.
  const auto n = static_cast<double>(std::max<int64_t>(targets, 1));
  std::vector<at::Tensor> parts;
  if (sums.fwkl.defined()) parts.push_back(sums.fwkl / n);
  if (sums.rvkl.defined()) parts.push_back(sums.rvkl / n);
  if (sums.ntp.defined()) parts.push_back(sums.ntp / n);
  out.base = at::stack(parts).sum() / static_cast<double>(parts.size());
  if (gates_) {
    // Mean over the positive entries of every rank's micro-batch: rank-local sums over the global
    // count, so the summed gradients equal a single process's on the whole batch.
    CapacitySums cap =
        capacity_sums(student.log_betas(), positions, segments, s_.memory, s_.capacity);
    auto positive = at::full({1}, static_cast<double>(cap.positive), at::kDouble);
    comm.all_reduce_sum(positive);
    out.capacity = cap.sum / std::max(positive.item<double>(), 1.0);
  } else {
    out.capacity = at::zeros({}, out.base.options());
  }
  if (with_stats) {
    at::NoGradGuard no_grad;
    if (sums.fwkl.defined()) out.kl = sums.fwkl.item<double>() / n;
    if (sums.ntp.defined()) out.ntp = sums.ntp.item<double>() / n;
    if (gates_) {
      auto valid = (segments >= 0).unsqueeze(1).to(at::kFloat);  // (B, 1, T)
      double beta = 0, live = 0;
      for (const auto& lb : student.log_betas()) {
        beta += (lb.detach().exp() * valid).sum().item<double>() /
                (valid.sum().item<double>() * lb.size(1));
        // Expected live entries per head at the last token of each row's longest document.
        auto S = retention_sum(lb.detach(), positions, segments);
        live += S.amax(-1).mean().item<double>();
      }
      out.mean_beta = beta / static_cast<double>(student.log_betas().size());
      out.live = live / static_cast<double>(student.log_betas().size());
    }
  }
  return out;
}

Trainer::BatchLoss Trainer::scorer_forward(const at::Tensor& ids, const at::Tensor& positions,
                                           const at::Tensor& segments,
                                           const MultimodalInputs* multimodal, Collectives& comm) {
  // The frozen model runs once without grad (no teacher, no LM head): the hook trains the scorer
  // on each layer's queries and keys on the way.
  ScorerTrainingHook hook(*scorer_, segments);
  {
    at::NoGradGuard no_grad;
    ForwardContext context{nullptr, &hook};
    context.multimodal = multimodal;
    model_->forward_hidden(ids, positions, context);
  }
  // Mean over the labelled entries of every rank's micro-batch (as the capacity loss): rank-local
  // sums over the global count, so the summed gradients equal one process's on the whole batch.
  auto count = at::full({1}, static_cast<double>(hook.count()), at::kDouble);
  comm.all_reduce_sum(count);
  BatchLoss out;
  out.base = hook.loss_sum() / std::max(count.item<double>(), 1.0);
  out.capacity = at::zeros({}, out.base.options());
  return out;
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
  // Fetch the step's micro-batches first: their token counts normalise the losses.
  std::vector<PackedBatch> micro;
  int64_t targets = 0;
  for (int64_t m = 0; m < s_.grad_accum; ++m) {
    std::vector<int64_t> epochs;
    // The ranks of a tensor-parallel group read the same sequences.
    auto ids = sampler_->next(s_.batch_size * dp_->world(), dp_->rank(), dp_->world(), &epochs);
    if (samples_.is_open())
      for (size_t i = 0; i < ids.size(); ++i)
        samples_ << step + 1 << " " << epochs[i] << " " << ids[i] << "\n";
    micro.push_back(data_->batch(ids));
    targets += count_loss_targets(micro.back().segments, micro.back().loss_mask);
    stats.tokens += static_cast<double>((micro.back().segments >= 0).sum().item<int64_t>());
  }
  {
    // Losses are normalised by the count of targets of the whole global batch.
    auto count = at::tensor({static_cast<double>(targets)}, at::kDouble);
    dp_->all_reduce_sum(count);
    targets = static_cast<int64_t>(count[0].item<double>());
  }
  optimizer_->zero_grad();
  const double accum = static_cast<double>(s_.grad_accum);
  for (int64_t m = 0; m < s_.grad_accum; ++m) {
    BatchLoss l = forward(micro[static_cast<size_t>(m)], targets, with_stats && m == 0, *dp_);
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
  auto params = trainable();
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
  if (!stats.finite) {
    ++skipped_steps_;
    ++consecutive_nonfinite_;
    optimizer_->zero_grad();
    log_warn("step ", step + 1, ": non-finite loss or gradient, step skipped (",
             consecutive_nonfinite_, " in a row)");
    RETAIN_CHECK(consecutive_nonfinite_ < s_.max_nonfinite, "train: ", consecutive_nonfinite_,
                 " non-finite steps in a row (train.max_nonfinite_steps); lower optim.lr or "
                 "check the data");
  } else {
    consecutive_nonfinite_ = 0;
    optimizer_->step();
  }
  return stats;
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
  if (s_.terms.fwkl && !scorer_) line["kl"] = stats.kl;
  if (s_.terms.ntp && !scorer_) line["ntp"] = stats.ntp;
  if (scorer_) line["scorer"] = s_.trainable;
  if (gates_) {
    line["capacity"] = stats.capacity;
    line["mean_beta"] = stats.mean_beta;
    line["live_per_head"] = stats.live;
    line["memory"] = s_.memory;
  }
  char postfix[256];
  if (scorer_)
    std::snprintf(postfix, sizeof(postfix), "%s loss=%.4f tok/s=%.0f", s_.trainable.c_str(),
                  stats.loss, rate);
  else
    std::snprintf(postfix, sizeof(postfix),
                  "loss=%.4f kl=%.4f ntp=%.4f cap=%.4f beta=%.4f live=%.0f/%.0f tok/s=%.0f",
                  stats.loss, stats.kl, stats.ntp, stats.capacity, stats.mean_beta, stats.live,
                  s_.memory, rate);
  bar_->set_postfix(postfix);
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
    bar_->update(step);
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
