#include "trainer/train_settings.h"

#include "core/error.h"

namespace retain {

TrainSettings read_settings(const Config& r) {
  TrainSettings s;
  RETAIN_CHECK(r.has("model.path"), r.where(), ": model.path is required");
  RETAIN_CHECK(r.has("data.shards"), r.where(), ": data.shards is required");
  s.run_dir = r.get<std::string>("run.dir");
  s.seed = r.get<uint64_t>("run.seed");
  s.model_dir = r.get<std::string>("model.path");
  s.device = r.get<std::string>("model.device");
  s.dtype = r.get<std::string>("model.dtype");
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

}  // namespace retain
