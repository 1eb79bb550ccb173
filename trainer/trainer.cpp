#include "trainer/trainer.h"

#include <ATen/core/grad_mode.h>
#include <torch/cuda.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adamw.h>
#include <torch/serialize.h>

#include <chrono>
#include <fstream>
#include <iostream>

#include "checkpoints/gate_file.h"
#include "checkpoints/step_dir.h"
#include "core/device.h"
#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/safetensors.h"
#include "core/sha256.h"
#include "data/packed_dataset.h"
#include "gates/gated_attention.h"
#include "gates/losses.h"
#include "kernels/retention_attention.h"
#include "model/decoder.h"
#include "model/tokenizer.h"
#include "trainer/collectives.h"
#include "trainer/dist_env.h"
#include "trainer/recipe.h"
#include "trainer/schedule.h"

namespace retain {

namespace {

struct TrainSettings {
  fs::path run_dir, model_dir, shards, heldout;
  uint64_t seed;
  bool train_base;
  GateConfig gates;
  std::string init_from;
  BaseLossTerms terms;
  CapacityMode capacity;
  double memory, capacity_weight;
  int64_t logit_block, seq_len, steps, batch_size, grad_accum, warmup, max_nonfinite, eval_every,
      eval_batches;
  int64_t checkpoint_every, keep_last_k, log_every;
  bool shuffle, activation_checkpointing;
  double lr, min_lr, weight_decay, eps, grad_clip, beta1, beta2;
  std::string resume;
  bool log_samples;
  int64_t timeout_s;
};

TrainSettings read_settings(const Config& r) {
  TrainSettings s;
  RETAIN_CHECK(r.has("model.path"), r.where(), ": model.path is required");
  RETAIN_CHECK(r.has("data.shards"), r.where(), ": data.shards is required");
  s.run_dir = r.get<std::string>("run.dir");
  s.seed = r.get<uint64_t>("run.seed");
  s.model_dir = r.get<std::string>("model.path");
  s.shards = r.get<std::string>("data.shards");
  s.heldout = r.get_or<std::string>("data.heldout", "");
  std::string trainable = r.get<std::string>("train.trainable");
  RETAIN_CHECK(trainable == "gates" || trainable == "base", r.where(), ": train.trainable '",
               trainable, "' is not supported (expected gates or base)");
  s.train_base = trainable == "base";
  s.gates.arch = r.get<std::string>("gates.arch");
  s.gates.width = r.get<int64_t>("gates.width");
  s.gates.tie_projection = r.get<bool>("gates.tie_projection");
  s.gates.bias_init = r.get<double>("gates.bias_init");
  s.gates.init_std = r.get<double>("gates.init_std");
  s.gates.validate(r.where());
  s.init_from = r.get_or<std::string>("gates.init_from", "");
  s.terms = s.train_base ? BaseLossTerms::parse({"ntp"}, r.where())
                         : BaseLossTerms::parse(r.get<std::vector<std::string>>("loss.base"),
                                                r.where() + ": loss.base");
  s.capacity =
      parse_capacity_mode(r.get<std::string>("loss.capacity"), r.where() + ": loss.capacity");
  s.memory = r.get<double>("loss.memory");
  s.capacity_weight = r.get<double>("loss.weight");
  s.logit_block = r.get<int64_t>("loss.logit_block_size");
  s.seq_len = r.get<int64_t>("data.seq_len");
  s.shuffle = r.get<bool>("data.shuffle");
  s.lr = r.get<double>("optim.lr");
  s.min_lr = r.get<double>("optim.min_lr");
  s.warmup = r.get<int64_t>("optim.warmup_steps");
  s.weight_decay = r.get<double>("optim.weight_decay");
  auto betas = r.get<std::vector<double>>("optim.betas");
  RETAIN_CHECK(betas.size() == 2, r.where(), ": optim.betas must have two values");
  s.beta1 = betas[0];
  s.beta2 = betas[1];
  s.eps = r.get<double>("optim.eps");
  s.grad_clip = r.get<double>("optim.grad_clip");
  s.steps = r.get<int64_t>("train.steps");
  s.batch_size = r.get<int64_t>("train.batch_size");
  s.grad_accum = r.get<int64_t>("train.grad_accum");
  s.activation_checkpointing = r.get<bool>("train.activation_checkpointing");
  s.max_nonfinite = r.get<int64_t>("train.max_nonfinite_steps");
  s.resume = r.get<std::string>("train.resume");
  s.eval_every = r.get<int64_t>("train.eval_every");
  s.eval_batches = r.get<int64_t>("train.eval_batches");
  s.checkpoint_every = r.get<int64_t>("checkpoint.every");
  s.keep_last_k = r.get<int64_t>("checkpoint.keep_last_k");
  s.log_every = r.get<int64_t>("log.every");
  s.log_samples = r.get<bool>("log.samples");
  s.timeout_s = r.get<int64_t>("dist.timeout_s");
  RETAIN_CHECK(s.steps > 0 && s.batch_size > 0 && s.grad_accum > 0 && s.log_every > 0, r.where(),
               ": train.steps, train.batch_size, train.grad_accum and log.every must be positive");
  RETAIN_CHECK(s.memory > 0, r.where(), ": loss.memory must be positive");
  return s;
}

// What one forward of a batch yields: the loss parts as sums with their token counts.
struct BatchLoss {
  at::Tensor base;      // averaged base loss, normalised by the step's token counts
  at::Tensor capacity;  // capacity loss of this micro-batch
  double kl = 0, ntp = 0, mean_beta = 1, live = 0;
};

class Trainer {
 public:
  Trainer(TrainSettings s, Config recipe) : s_(std::move(s)), recipe_(std::move(recipe)) {}

  int run();

 private:
  BatchLoss forward(const PackedBatch& batch, int64_t kl_tokens, int64_t ntp_tokens,
                    bool with_stats, Collectives& comm);
  void save_checkpoint(int64_t step);
  int64_t restore();
  double heldout_loss();
  std::vector<at::Tensor> trainable() const;

  TrainSettings s_;
  Config recipe_;
  std::string recipe_sha_;
  std::unique_ptr<Decoder> model_;
  std::unique_ptr<GateBank> gates_;
  std::unique_ptr<PackedDataset> data_, heldout_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  int64_t consecutive_nonfinite_ = 0, skipped_steps_ = 0;
  DistEnv env_;
  std::unique_ptr<Collectives> comm_;
  bool leader() const { return comm_->rank() == 0; }
};

std::vector<at::Tensor> Trainer::trainable() const {
  if (gates_) return gates_->parameters();
  std::vector<at::Tensor> out;
  for (const auto& [name, p] : model_->named_parameters()) out.push_back(p);
  return out;
}

BatchLoss Trainer::forward(const PackedBatch& batch, int64_t kl_tokens, int64_t ntp_tokens,
                           bool with_stats, Collectives& comm) {
  const auto device = model_->device();
  auto ids = batch.ids.to(device), positions = batch.positions.to(device),
       segments = batch.segments.to(device);
  GatedAttentionHook student(gates_.get(), segments);
  auto hidden = model_->forward_hidden(
      ids, positions, ForwardContext{nullptr, &student, s_.activation_checkpointing});
  at::Tensor teacher_hidden;
  if (s_.terms.fwkl || s_.terms.rvkl) {
    at::NoGradGuard no_grad;
    GatedAttentionHook teacher(nullptr, segments);
    teacher_hidden = model_->forward_hidden(ids, positions, ForwardContext{nullptr, &teacher});
  }
  LossSums sums = base_loss_sums(*model_, hidden, teacher_hidden, ids, segments,
                                 batch.loss_mask.to(device), s_.terms, s_.logit_block);
  BatchLoss out;
  // Each term is normalised by the step's (not the micro-batch's) token count, so accumulation
  // gives the same gradient as one big batch.
  auto kl_n = static_cast<double>(std::max<int64_t>(kl_tokens, 1)),
       ntp_n = static_cast<double>(std::max<int64_t>(ntp_tokens, 1));
  std::vector<at::Tensor> parts;
  if (sums.fwkl.defined()) parts.push_back(sums.fwkl / kl_n);
  if (sums.rvkl.defined()) parts.push_back(sums.rvkl / kl_n);
  if (sums.ntp.defined()) parts.push_back(sums.ntp / ntp_n);
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
    if (sums.fwkl.defined()) out.kl = sums.fwkl.item<double>() / kl_n;
    if (sums.ntp.defined()) out.ntp = sums.ntp.item<double>() / ntp_n;
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

double Trainer::heldout_loss() {
  at::NoGradGuard no_grad;
  double total = 0;
  int64_t n = std::min<int64_t>(s_.eval_batches, heldout_->size());
  for (int64_t i = 0; i < n; ++i) {
    PackedBatch b = heldout_->batch({i});
    auto keep = b.loss_mask.logical_and(b.segments >= 0);
    auto local = make_local_collectives();
    BatchLoss l = forward(b, keep.sum().item<int64_t>(), keep.sum().item<int64_t>(), false, *local);
    total += (l.base + s_.capacity_weight * l.capacity).item<double>();
  }
  return total / static_cast<double>(std::max<int64_t>(n, 1));
}

void Trainer::save_checkpoint(int64_t step) {
  // Rank 0 writes while the others wait, so nobody reads a half-written step directory.
  if (!leader()) {
    comm_->barrier();
    return;
  }
  Json extra = {
      {"kind", s_.train_base ? "base" : "gates"},
      {"recipe_sha256", recipe_sha_},
      {"sampler", {{"epoch", sampler_->state().epoch}, {"consumed", sampler_->state().consumed}}},
      {"nonfinite", {{"consecutive", consecutive_nonfinite_}, {"skipped", skipped_steps_}}}};
  write_step_dir(s_.run_dir, step, extra, [&](const fs::path& dir) {
    SafetensorsWriter params;
    if (gates_) {
      for (const auto& [name, t] : gates_->named_parameters())
        params.add(name, t.detach().to(at::kCPU));
    } else {
      for (const auto& [name, t] : model_->named_parameters())
        params.add(name, t.detach().to(at::kCPU));
    }
    params.add("rng.cpu", at::detail::getDefaultCPUGenerator().get_state());
    params.write(dir / "params.safetensors");
    torch::save(*optimizer_, (dir / "optimizer.pt").string());
    write_text_file_atomic(dir / "recipe.yaml", recipe_.dump());
    if (gates_) {
      GateFileInfo info{gates_->config(), base_fingerprint(model_->config()), s_.memory,
                        s_.capacity == CapacityMode::kLocal ? "local" : "global", recipe_sha_};
      write_gate_file(dir / "gates.safetensors", *gates_, info);
    }
  });
  prune_step_dirs(s_.run_dir, s_.keep_last_k);
  comm_->barrier();
}

int64_t Trainer::restore() {
  std::optional<fs::path> dir;
  if (s_.resume == "auto")
    dir = latest_step_dir(s_.run_dir);
  else if (s_.resume != "never")
    dir = fs::path(s_.resume);
  if (!dir) return 0;
  Json manifest = read_manifest(*dir);
  RETAIN_CHECK(manifest.value("kind", "") == (s_.train_base ? "base" : "gates"), dir->string(),
               ": checkpoint kind '", manifest.value("kind", ""),
               "' does not match train.trainable");
  auto params = SafetensorsFile::open(*dir / "params.safetensors");
  {
    at::NoGradGuard no_grad;
    const auto& named = gates_ ? gates_->named_parameters() : model_->named_parameters();
    for (const auto& [name, t] : named) {
      RETAIN_CHECK(params->contains(name), dir->string(), ": params.safetensors lacks '", name,
                   "' (was the run started with another gate or model config?)");
      RETAIN_CHECK(params->info(name).shape == t.sizes().vec(), dir->string(), ": '", name,
                   "' has another shape");
      const_cast<at::Tensor&>(t).copy_(params->tensor(name));
    }
    at::Generator cpu = at::detail::getDefaultCPUGenerator();
    cpu.set_state(params->tensor("rng.cpu").clone());
  }
  torch::load(*optimizer_, (*dir / "optimizer.pt").string());
  sampler_->restore({manifest["sampler"]["epoch"].get<int64_t>(),
                     manifest["sampler"]["consumed"].get<int64_t>()});
  consecutive_nonfinite_ = manifest["nonfinite"]["consecutive"].get<int64_t>();
  skipped_steps_ = manifest["nonfinite"]["skipped"].get<int64_t>();
  int64_t step = manifest["step"].get<int64_t>();
  log_info("resumed from ", dir->string(), " (step ", step, ")");
  return step;
}

int Trainer::run() {
  env_ = detect_dist_env();
  c10::Device device = resolve_device(recipe_.get<std::string>("model.device"));
  if (device.is_cuda() && env_.world > 1) {
    // One GPU per rank: local rank r trains on cuda:r, so a node needs as many GPUs as ranks.
    const int64_t gpus = static_cast<int64_t>(torch::cuda::device_count());
    RETAIN_CHECK(env_.local_rank < gpus, "rank ", env_.rank, " (local rank ", env_.local_rank,
                 ") needs cuda:", env_.local_rank, " but this node has ", gpus,
                 " visible GPU(s): start at most ", gpus,
                 " ranks per node, or set model.device=cpu to train on the CPU");
    device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env_.local_rank));
  }
  comm_ = make_collectives(env_, device, std::chrono::seconds(s_.timeout_s));
  const std::string resolved = recipe_.dump();
  recipe_sha_ = recipe_hash(recipe_);
  if (leader()) {
    std::cerr << "resolved recipe (" << recipe_.where() << "):\n" << resolved;
    fs::create_directories(s_.run_dir);
    write_text_file_atomic(s_.run_dir / "recipe.yaml", resolved);
  }
  // Per-rank RNG streams (the data order comes from the sampler, identical on every rank).
  at::manual_seed(s_.seed * 1000003ull + static_cast<uint64_t>(env_.rank));
  ModelConfig model_config = ModelConfig::load(s_.model_dir);
  LoadOptions load{
      resolve_dtype(recipe_.get<std::string>("model.dtype"), device, model_config.dtype), device};
  model_ = std::make_unique<Decoder>(Decoder::load(s_.model_dir, load));
  if (s_.train_base) {
    model_->set_trainable(true);
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
      gates_ = std::make_unique<GateBank>(s_.gates, model_config, device, s_.seed);
    }
  }
  const std::string sha = tokenizer_sha256(s_.model_dir);
  data_ = std::make_unique<PackedDataset>(list_shards(s_.shards), s_.seq_len, sha,
                                          model_config.vocab_size);
  if (!s_.heldout.empty())
    heldout_ = std::make_unique<PackedDataset>(list_shards(s_.heldout), s_.seq_len, sha,
                                               model_config.vocab_size);
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
    log_info("training ", params, " parameters (", s_.train_base ? "the whole model" : "gates only",
             ") on ", data_->size(), " sequences of ", s_.seq_len, " tokens (", data_->num_tokens(),
             " tokens) on ", device.str(), ", ", comm_->name(), ", global batch ",
             s_.batch_size * s_.grad_accum * comm_->world(), " sequences");

  int64_t step = restore();
  std::ofstream metrics;
  std::optional<ProgressBar> bar;
  if (leader()) {
    metrics.open(s_.run_dir / "metrics.jsonl", std::ios::app);
    bar.emplace("train", s_.steps, "step");
    bar->update(step);
  }
  std::ofstream samples;
  if (s_.log_samples)
    samples.open(s_.run_dir / str_cat("samples.rank", comm_->rank(), ".txt"), std::ios::app);
  using Clock = std::chrono::steady_clock;
  auto last_log = Clock::now();
  int64_t tokens_since_log = 0;
  for (; step < s_.steps; ++step) {
    const double lr = learning_rate(step, s_.lr, s_.min_lr, s_.warmup, s_.steps);
    for (auto& group : optimizer_->param_groups())
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    // Fetch the step's micro-batches first: their token counts normalise the losses.
    std::vector<PackedBatch> micro;
    int64_t kl_tokens = 0, ntp_tokens = 0, step_tokens = 0;
    for (int64_t m = 0; m < s_.grad_accum; ++m) {
      std::vector<int64_t> epochs;
      auto ids =
          sampler_->next(s_.batch_size * comm_->world(), comm_->rank(), comm_->world(), &epochs);
      if (samples.is_open())
        for (size_t i = 0; i < ids.size(); ++i)
          samples << step + 1 << " " << epochs[i] << " " << ids[i] << "\n";
      micro.push_back(data_->batch(ids));
      const auto& b = micro.back();
      auto keep = b.loss_mask.logical_and(b.segments >= 0);
      kl_tokens += keep.sum().item<int64_t>();
      auto next_same = keep.narrow(1, 1, s_.seq_len - 1)
                           .logical_and(b.segments.narrow(1, 1, s_.seq_len - 1) ==
                                        b.segments.narrow(1, 0, s_.seq_len - 1));
      ntp_tokens += next_same.sum().item<int64_t>();
      step_tokens += (b.segments >= 0).sum().item<int64_t>();
    }
    {
      // Losses are normalised by the token counts of the whole global batch.
      auto counts = at::tensor({static_cast<double>(kl_tokens), static_cast<double>(ntp_tokens)},
                               at::kDouble);
      comm_->all_reduce_sum(counts);
      kl_tokens = static_cast<int64_t>(counts[0].item<double>());
      ntp_tokens = static_cast<int64_t>(counts[1].item<double>());
    }
    optimizer_->zero_grad();
    double loss_value = 0, cap_value = 0, kl = 0, ntp = 0, beta = 1, live = 0;
    const bool log_now = (step + 1) % s_.log_every == 0 || step + 1 == s_.steps;
    for (int64_t m = 0; m < s_.grad_accum; ++m) {
      BatchLoss l =
          forward(micro[static_cast<size_t>(m)], kl_tokens, ntp_tokens, log_now && m == 0, *comm_);
      auto loss = l.base + s_.capacity_weight * l.capacity / static_cast<double>(s_.grad_accum);
      // A non-finite loss still goes backward: its NaN gradients reach every rank through the
      // all-reduce, so all ranks skip the step together.
      loss.backward();
      loss_value += loss.item<double>();
      cap_value += l.capacity.item<double>() / static_cast<double>(s_.grad_accum);
      if (m == 0) {
        kl = l.kl * static_cast<double>(s_.grad_accum);
        ntp = l.ntp * static_cast<double>(s_.grad_accum);
        beta = l.mean_beta;
        live = l.live;
      }
    }
    auto params = trainable();
    for (auto& p : params)
      if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    std::vector<at::Tensor> grads;
    for (auto& p : params) grads.push_back(p.grad());
    all_reduce_flat(*comm_, grads);  // one flat all-reduce of every gradient per optimizer step
    {
      auto values =
          at::tensor({loss_value, cap_value, kl, ntp, beta, live, static_cast<double>(step_tokens)},
                     at::kDouble);
      comm_->all_reduce_sum(values);
      const double w = static_cast<double>(comm_->world());
      loss_value = values[0].item<double>();  // rank-local shares of a globally normalised loss
      cap_value = values[1].item<double>();
      kl = values[2].item<double>();
      ntp = values[3].item<double>();
      beta = values[4].item<double>() / w;
      live = values[5].item<double>() / w;
      tokens_since_log += static_cast<int64_t>(values[6].item<double>());
    }
    bool finite = std::isfinite(loss_value);
    double grad_norm = 0;
    if (finite) {
      grad_norm = s_.grad_clip > 0 ? torch::nn::utils::clip_grad_norm_(params, s_.grad_clip)
                                   : torch::nn::utils::clip_grad_norm_(params, 1e30);
      finite = std::isfinite(grad_norm);
    }
    if (!finite) {
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

    if (bar) bar->update(1);
    if (log_now && leader()) {
      double seconds = std::chrono::duration<double>(Clock::now() - last_log).count();
      double rate = seconds > 0 ? static_cast<double>(tokens_since_log) / seconds : 0;
      last_log = Clock::now();
      tokens_since_log = 0;
      Json line = {
          {"step", step + 1},       {"loss", loss_value},   {"lr", lr},
          {"grad_norm", grad_norm}, {"tokens_per_s", rate}, {"skipped_steps", skipped_steps_}};
      if (s_.terms.fwkl) line["kl"] = kl;
      if (s_.terms.ntp) line["ntp"] = ntp;
      if (gates_) {
        line["capacity"] = cap_value;
        line["mean_beta"] = beta;
        line["live_per_head"] = live;
        line["memory"] = s_.memory;
      }
      char postfix[256];
      std::snprintf(postfix, sizeof(postfix),
                    "loss=%.4f kl=%.4f ntp=%.4f cap=%.4f beta=%.4f live=%.0f/%.0f tok/s=%.0f",
                    loss_value, kl, ntp, cap_value, beta, live, s_.memory, rate);
      bar->set_postfix(postfix);
      if (heldout_ && s_.eval_every > 0 && (step + 1) % s_.eval_every == 0)
        line["heldout_loss"] = heldout_loss();
      metrics << line.dump() << std::endl;
    } else if (leader() && heldout_ && s_.eval_every > 0 && (step + 1) % s_.eval_every == 0) {
      metrics << Json({{"step", step + 1}, {"heldout_loss", heldout_loss()}}).dump() << std::endl;
    }
    if ((s_.checkpoint_every > 0 && (step + 1) % s_.checkpoint_every == 0) || step + 1 == s_.steps)
      save_checkpoint(step + 1);
  }
  if (bar) bar->finish();
  comm_->shutdown();
  if (leader())
    log_info("done: ", s_.steps, " steps, ", skipped_steps_, " skipped; checkpoints in ",
             s_.run_dir.string());
  return 0;
}

}  // namespace

int run_train(const std::string& recipe_path, const std::vector<std::string>& overrides) {
  Config recipe = resolve_recipe(recipe_path, overrides);
  TrainSettings settings = read_settings(recipe);
  Trainer trainer(std::move(settings), std::move(recipe));
  return trainer.run();
}

}  // namespace retain
