#include "trainer/recipe.h"

#include <set>

#include "core/error.h"
#include "core/json.h"
#include "core/sha256.h"
#include "gates/gate_bank.h"

namespace retain {

const std::vector<RecipeKey>& recipe_schema() {
  static const GateConfig kGates;
  static const std::vector<RecipeKey> kSchema = {
      {"run.dir", "runs/default", "run directory: step-N checkpoints, metrics.jsonl, recipe.yaml"},
      {"run.seed", "0", "seed of gate init and data order"},
      {"model.path", "~", "HF model directory (config.json, *.safetensors, tokenizer)"},
      {"model.device", "auto", "auto | cpu | cuda | cuda:N"},
      {"model.dtype", "auto",
       "auto | fp32 | bf16 | fp16 (auto: checkpoint dtype on CUDA, fp32 on CPU)"},
      // The gate defaults are GateConfig's (gates/gate_bank.h), defined once there.
      {"gates.arch", kGates.arch, "mlp2 (TrimKV) | mlp3 (DBTrimKV)"},
      {"gates.width", Json(kGates.width).dump(), "hidden width r of the gate MLPs"},
      {"gates.tie_projection", Json(kGates.tie_projection).dump(),
       "share the last linear + bias across layers (DBTrimKV)"},
      {"gates.bias_init", Json(kGates.bias_init).dump(),
       "initial final bias (beta = sigmoid(18) ~ 1)"},
      {"gates.init_std", Json(kGates.init_std).dump(), "std of the normal init of gate weights"},
      {"gates.init_from", "~", "gate file (retain export / import-gates) to start from"},
      {"loss.base", "[fwkl, ntp]", "base loss terms, averaged: fwkl | rvkl | ntp"},
      {"loss.capacity", "global", "local (per layer and head, TrimKV) | global (DBTrimKV)"},
      {"loss.memory", "512", "budget M: KV entries per layer and KV head"},
      {"loss.weight", "1.0", "lambda, weight of the capacity loss"},
      {"loss.logit_block_size", "1024", "tokens per LM-head block"},
      {"data.shards", "~", "directory of shard-*.h5 (retain prep)"},
      {"data.seq_len", "4096", "tokens per packed training sequence"},
      {"data.shuffle", "true", "shuffle sequences each epoch"},
      {"data.heldout", "~", "shard directory for the held-out loss"},
      {"optim.lr", "2.0e-4", "peak learning rate"},
      {"optim.min_lr", "1.0e-6", "learning rate at the end of the cosine"},
      {"optim.warmup_steps", "100", "linear warmup steps (from 0)"},
      {"optim.weight_decay", "1.0e-6", "AdamW weight decay"},
      {"optim.betas", "[0.9, 0.999]", "AdamW betas"},
      {"optim.eps", "1.0e-8", "AdamW epsilon"},
      {"optim.grad_clip", "1.0", "max global grad norm (0: off)"},
      {"train.steps", "1000", "optimizer steps"},
      {"train.batch_size", "1", "sequences per micro-batch (per rank)"},
      {"train.grad_accum", "1", "micro-batches per optimizer step"},
      {"train.trainable", "gates",
       "gates | base (pretrain every parameter of a small model, ntp only)"},
      {"train.activation_checkpointing", "false", "recompute each layer in the backward pass"},
      {"train.max_nonfinite_steps", "10", "abort after this many non-finite steps in a row"},
      {"train.resume", "auto",
       "auto (newest complete step-N of run.dir) | never | a step directory"},
      {"train.eval_every", "0", "held-out loss every N steps (0: off)"},
      {"train.eval_batches", "4", "held-out batches per evaluation"},
      {"checkpoint.every", "100", "write RUN/step-N every N steps (and at the end)"},
      {"checkpoint.keep_last_k", "3", "step directories to keep (0: all)"},
      {"log.every", "1", "metrics.jsonl line every N steps"},
      {"log.samples", "false",
       "append each rank's sample ids to RUN/samples.rankR.txt (step epoch sample)"},
      {"dist.timeout_s", "600",
       "seconds a rank waits for the others in a collective before failing"},
  };
  return kSchema;
}

namespace {

std::vector<std::string> schema_keys() {
  std::vector<std::string> keys;
  for (const auto& k : recipe_schema()) keys.emplace_back(k.key);
  return keys;
}

// Every leaf of `node` (maps are walked, everything else is a leaf) must be a schema key.
void check_keys(const YAML::Node& node, const std::string& prefix,
                const std::set<std::string>& known, const std::string& where) {
  for (const auto& item : node) {
    std::string key =
        prefix.empty() ? item.first.as<std::string>() : prefix + "." + item.first.as<std::string>();
    if (known.count(key)) continue;
    bool is_section = false;
    for (const auto& k : known)
      if (k.rfind(key + ".", 0) == 0) is_section = true;
    if (is_section && item.second.IsMap()) {
      check_keys(item.second, key, known, where);
      continue;
    }
    fail(where, ": unknown recipe key '", key, "' (line ", item.first.Mark().line + 1,
         "); did you mean '", closest_name(key, schema_keys()), "'?");
  }
}

}  // namespace

Config resolve_recipe(const std::string& path, const std::vector<std::string>& overrides) {
  std::set<std::string> known;
  for (const auto& k : recipe_schema()) known.insert(k.key);
  Config user = path.empty() ? Config::parse("", "<defaults>") : Config::load(path);
  check_keys(user.root(), "", known, user.where());

  Config resolved = Config::parse("", user.where());
  for (const auto& k : recipe_schema())
    resolved.apply_override(std::string(k.key) + "=" + k.fallback);
  for (const auto& k : recipe_schema())
    if (user.has(k.key))
      resolved.apply_override(std::string(k.key) + "=" + YAML::Dump(user.get(k.key)));
  for (const auto& o : overrides) {
    auto eq = o.find('=');
    RETAIN_CHECK(eq != std::string::npos, "override '", o, "': expected key.sub=value");
    std::string key = o.substr(0, eq);
    RETAIN_CHECK(known.count(key), "override '", o, "': unknown recipe key '", key,
                 "'; did you mean '", closest_name(key, schema_keys()), "'?");
    resolved.apply_override(o);
  }
  return resolved;
}

std::string recipe_hash(const Config& resolved) {
  std::string canonical;
  for (const auto& k : recipe_schema()) {
    std::string key = k.key;
    if (key == "run.dir" || key == "train.resume" || key.rfind("checkpoint.", 0) == 0 ||
        key.rfind("log.", 0) == 0)
      continue;
    canonical += key + "=" + (resolved.has(key) ? YAML::Dump(resolved.get(key)) : "~") + "\n";
  }
  return sha256_hex(canonical);
}

}  // namespace retain
