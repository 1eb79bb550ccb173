#include "trainer/recipe.h"

#include <set>

#include "core/error.h"
#include "core/json.h"
#include "core/sha256.h"
#include "gates/gate_bank.h"
#include "trainer/train_settings.h"

namespace retain {

namespace {

using Reader = std::function<void(const Config&, const std::string&, TrainSettings&)>;

// Readers of a key's resolved value into its member, with the checks the value needs.
template <typename T>
Reader into(T TrainSettings::*member) {
  return [member](const Config& r, const std::string& key, TrainSettings& s) {
    s.*member = r.get<T>(key);
  };
}
Reader into_path(fs::path TrainSettings::*member) {
  return [member](const Config& r, const std::string& key, TrainSettings& s) {
    s.*member = r.get<std::string>(key);
  };
}
// A key without a default the run cannot do without.
Reader required_path(fs::path TrainSettings::*member) {
  return [member](const Config& r, const std::string& key, TrainSettings& s) {
    RETAIN_CHECK(r.has(key), r.where(), ": ", key, " is required");
    s.*member = r.get<std::string>(key);
  };
}
Reader optional_path(fs::path TrainSettings::*member) {
  return [member](const Config& r, const std::string& key, TrainSettings& s) {
    s.*member = r.get_or<std::string>(key, "");
  };
}
template <typename T>
Reader positive(T TrainSettings::*member) {
  return [member](const Config& r, const std::string& key, TrainSettings& s) {
    s.*member = r.get<T>(key);
    RETAIN_CHECK(s.*member > 0, r.where(), ": ", key, " must be positive, found ", s.*member);
  };
}
template <typename T>
Reader non_negative(T TrainSettings::*member) {
  return [member](const Config& r, const std::string& key, TrainSettings& s) {
    s.*member = r.get<T>(key);
    RETAIN_CHECK(s.*member >= 0, r.where(), ": ", key, " must be >= 0, found ", s.*member);
  };
}
template <typename T>
Reader into_gates(T GateConfig::*member) {
  return [member](const Config& r, const std::string& key, TrainSettings& s) {
    s.gates.*member = r.get<T>(key);
  };
}

}  // namespace

const std::vector<RecipeKey>& recipe_schema() {
  // The gate defaults are GateConfig's (gates/gate_bank.h), defined once there.
  static const GateConfig kGates;
  static const ScorerConfig kScorer;
  static const std::vector<RecipeKey> kSchema = {
      {"run.dir", "runs/default", "run directory: step-N checkpoints, metrics.jsonl, recipe.yaml",
       into_path(&TrainSettings::run_dir)},
      {"run.seed", "0", "seed of gate init and data order", into(&TrainSettings::seed)},
      {"model.path", "~", "HF model directory (config.json, *.safetensors, tokenizer)",
       required_path(&TrainSettings::model_dir)},
      {"model.device", "auto", "auto | cpu | cuda | cuda:N", into(&TrainSettings::device)},
      {"model.dtype", "auto",
       "auto | fp32 | bf16 | fp16 (auto: checkpoint dtype on CUDA, fp32 on CPU)",
       into(&TrainSettings::dtype)},
      {"gates.arch", gate_arch_name(kGates.arch), "mlp2 (TrimKV) | mlp3 (DBTrimKV)",
       [](const Config& r, const std::string& key, TrainSettings& s) {
         s.gates.arch = parse_gate_arch(r.get<std::string>(key), r.where());
       }},
      {"gates.width", Json(kGates.width).dump(), "hidden width r of the gate MLPs",
       into_gates(&GateConfig::width)},
      {"gates.tie_projection", Json(kGates.tie_projection).dump(),
       "share the last linear + bias across layers (DBTrimKV)",
       into_gates(&GateConfig::tie_projection)},
      {"gates.bias_init", Json(kGates.bias_init).dump(),
       "initial final bias (beta = sigmoid(18) ~ 1)", into_gates(&GateConfig::bias_init)},
      {"gates.init_std", Json(kGates.init_std).dump(), "std of the normal init of gate weights",
       [](const Config& r, const std::string& key, TrainSettings& s) {
         s.gates.init_std = r.get<double>(key);
         s.gates.validate(r.where());  // the last gates.* key: the whole gate config is read
       }},
      {"gates.init_from", "~", "gate file (retain export / import-gates) to start from",
       [](const Config& r, const std::string& key, TrainSettings& s) {
         s.init_from = r.get_or<std::string>(key, "");
       }},
      {"scorer.width", Json(kScorer.width).dump(),
       "train.trainable locret | kvzap: hidden width of each layer's scorer MLP",
       [](const Config& r, const std::string& key, TrainSettings& s) {
         s.scorer.width = r.get<int64_t>(key);
       }},
      {"scorer.init_std", Json(kScorer.init_std).dump(), "std of the normal init of scorer weights",
       [](const Config& r, const std::string& key, TrainSettings& s) {
         s.scorer.init_std = r.get<double>(key);
         s.scorer.validate(r.where());  // the last scorer.* key
       }},
      {"loss.base", "[fwkl, ntp]", "base loss terms, averaged: fwkl | rvkl | ntp",
       [](const Config& r, const std::string& key, TrainSettings& s) {
         s.terms =
             BaseLossTerms::parse(r.get<std::vector<std::string>>(key), r.where() + ": " + key);
       }},
      {"loss.capacity", "global", "local (per layer and head, TrimKV) | global (DBTrimKV)",
       [](const Config& r, const std::string& key, TrainSettings& s) {
         s.capacity = parse_capacity_mode(r.get<std::string>(key), r.where() + ": " + key);
       }},
      {"loss.memory", "512", "budget M: KV entries per layer and KV head",
       positive(&TrainSettings::memory)},
      {"loss.weight", "1.0", "lambda, weight of the capacity loss",
       non_negative(&TrainSettings::capacity_weight)},
      {"loss.logit_block_size", "1024", "tokens per LM-head block",
       positive(&TrainSettings::logit_block)},
      {"data.shards", "~", "directory of shard-*.h5 (retain prep)",
       required_path(&TrainSettings::shards)},
      {"data.seq_len", "4096", "tokens per packed training sequence",
       positive(&TrainSettings::seq_len)},
      {"data.shuffle", "true", "shuffle sequences each epoch", into(&TrainSettings::shuffle)},
      {"data.heldout", "~", "shard directory for the held-out loss",
       optional_path(&TrainSettings::heldout)},
      {"optim.lr", "2.0e-4", "peak learning rate", positive(&TrainSettings::lr)},
      {"optim.min_lr", "1.0e-6", "learning rate at the end of the cosine",
       non_negative(&TrainSettings::min_lr)},
      {"optim.warmup_steps", "100", "linear warmup steps (from 0)",
       non_negative(&TrainSettings::warmup)},
      {"optim.weight_decay", "1.0e-6", "AdamW weight decay",
       non_negative(&TrainSettings::weight_decay)},
      {"optim.betas", "[0.9, 0.999]", "AdamW betas",
       [](const Config& r, const std::string& key, TrainSettings& s) {
         auto betas = r.get<std::vector<double>>(key);
         RETAIN_CHECK(betas.size() == 2, r.where(), ": ", key, " must have two values");
         s.beta1 = betas[0];
         s.beta2 = betas[1];
       }},
      {"optim.eps", "1.0e-8", "AdamW epsilon", positive(&TrainSettings::eps)},
      {"optim.grad_clip", "1.0", "max global grad norm (0: off)",
       non_negative(&TrainSettings::grad_clip)},
      {"train.steps", "1000", "optimizer steps", positive(&TrainSettings::steps)},
      {"train.batch_size", "1", "sequences per micro-batch (per rank)",
       positive(&TrainSettings::batch_size)},
      {"train.grad_accum", "1", "micro-batches per optimizer step",
       positive(&TrainSettings::grad_accum)},
      {"train.trainable", "gates",
       "gates | locret | kvzap (a learned scorer on the frozen model: scorer.*)",
       [](const Config& r, const std::string& key, TrainSettings& s) {
         const std::string trainable = r.get<std::string>(key);
         bool known = false;
         for (auto kind : {TrainableKind::kGates, TrainableKind::kLocret, TrainableKind::kKvzap})
           if (trainable == trainable_name(kind)) {
             s.trainable = kind;
             known = true;
           }
         RETAIN_CHECK(known, r.where(), ": ", key, " '", trainable,
                      "' is not supported (expected gates, locret or kvzap)");
         if (s.train_scorer()) s.scorer.kind = parse_scorer_kind(trainable, r.where());
       }},
      {"train.activation_checkpointing", "false", "recompute each layer in the backward pass",
       into(&TrainSettings::activation_checkpointing)},
      {"train.max_nonfinite_steps", "10", "abort after this many non-finite steps in a row",
       positive(&TrainSettings::max_nonfinite)},
      {"train.resume", "auto",
       "auto (newest complete step-N of run.dir) | never | a step directory",
       into(&TrainSettings::resume)},
      {"train.eval_every", "0", "held-out loss every N steps (0: off)",
       non_negative(&TrainSettings::eval_every)},
      {"train.eval_batches", "4", "held-out batches per evaluation",
       positive(&TrainSettings::eval_batches)},
      {"checkpoint.every", "100", "write RUN/step-N every N steps (and at the end)",
       non_negative(&TrainSettings::checkpoint_every)},
      {"checkpoint.keep_last_k", "3", "step directories to keep (0: all)",
       non_negative(&TrainSettings::keep_last_k)},
      {"log.every", "1", "metrics.jsonl line every N steps", positive(&TrainSettings::log_every)},
      {"log.samples", "false",
       "append each rank's sample ids to RUN/samples.rankR.txt (step epoch sample)",
       into(&TrainSettings::log_samples)},
      {"dist.timeout_s", "600",
       "seconds a rank waits for the others in a collective before failing",
       positive(&TrainSettings::timeout_s)},
      {"dist.tensor_parallel", "1",
       "ranks sharing one copy of the frozen base (heads and MLP rows split over them; "
       "consecutive ranks, so one node); the world is tensor_parallel x data-parallel ranks",
       positive(&TrainSettings::tensor_parallel)},
  };
  return kSchema;
}

std::string recipe_keys_markdown() {
  std::string out = "| key | default | meaning |\n|---|---|---|\n";
  for (const auto& k : recipe_schema()) {
    std::string doc = k.doc;
    // A '|' inside a cell would split it.
    for (size_t at = doc.find('|'); at != std::string::npos; at = doc.find('|', at + 2))
      doc.replace(at, 1, "\\|");
    out += str_cat("| `", k.key, "` | `", k.fallback, "` | ", doc, " |\n");
  }
  return out;
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
    // A complex key (`? {a: b}: c`) is valid YAML but names no recipe key.
    RETAIN_CHECK(item.first.IsScalar(), where, ": line ", item.first.Mark().line + 1,
                 ": expected a key name, found a ", item.first.IsMap() ? "map" : "list");
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
