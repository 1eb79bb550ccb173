// The gate trainer end to end on a tiny model it makes itself: losses fall, checkpoints and gate
// files round-trip, the official TrimKV names import, and bad input fails clearly.
#include <fstream>

#include <torch/serialize.h>

#include "checkpoints/export.h"
#include "checkpoints/gate_file.h"
#include "checkpoints/scorer_file.h"
#include "core/json.h"
#include "core/safetensors.h"
#include "data/packed_dataset.h"
#include "data/prep.h"
#include "data/shards.h"
#include "gates/gated_attention.h"
#include "gates/losses.h"
#include "model/decoder.h"
#include "model/init_model.h"
#include "model/tokenizers/tokenizer.h"
#include "test_util.h"
#include "trainer/recipe.h"
#include "trainer/trainer.h"

namespace retain {
namespace {

using testing::TempDir;

// A tiny qwen3 model and token shards of random word documents, in `dir`.
void make_model_and_shards(const TempDir& dir, const std::string& arch = "qwen3") {
  InitModelOptions init;
  init.arch = arch;
  init.preset = "tiny";
  init.seed = 2;
  init.out = (dir / "model").string();
  init_model(init);
  std::ofstream docs(dir / "docs.jsonl");
  const char* words[] = {"alpha", "beta", "gamma", "the",   "key",
                         "value", "is",   "door",  "cache", "reads"};
  uint64_t x = 7;
  for (int d = 0; d < 120; ++d) {
    std::string text;
    for (int w = 0; w < 20 + d % 60; ++w) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      text += std::string(words[(x >> 33) % 10]) + " ";
    }
    docs << Json({{"text", text}}).dump() << "\n";
  }
  docs.close();
  PrepOptions prep;
  prep.tokenizer_dir = (dir / "model").string();
  prep.inputs = {(dir / "docs.jsonl").string()};
  prep.format = "jsonl";
  prep.out = (dir / "shards").string();
  run_prep(prep);
}

std::vector<std::string> base_overrides(const TempDir& dir, const std::string& run) {
  return {"run.dir=" + (dir / run).string(),
          "model.path=" + (dir / "model").string(),
          "data.shards=" + (dir / "shards").string(),
          "data.seq_len=128",
          "gates.width=16",
          "loss.memory=8",
          "loss.logit_block_size=64",
          "optim.warmup_steps=2",
          "checkpoint.every=0",
          "train.eval_every=0"};
}

std::vector<Json> read_metrics(const fs::path& run) {
  std::vector<Json> out;
  std::ifstream in(run / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) out.push_back(Json::parse(line));
  return out;
}

double mean(const std::vector<Json>& lines, size_t from, size_t to, const char* key) {
  double s = 0;
  for (size_t i = from; i < to; ++i) s += lines[i][key].get<double>();
  return s / static_cast<double>(to - from);
}

TEST(Trainer, TinyRunLowersTotalAndCapacityLoss) {
  TempDir dir;
  make_model_and_shards(dir);
  auto o = base_overrides(dir, "run");
  o.insert(o.end(), {"train.steps=40", "optim.lr=1.0e-2", "gates.bias_init=6.0"});
  ASSERT_EQ(run_train("", o), 0);
  auto m = read_metrics(dir / "run");
  ASSERT_EQ(m.size(), 40u);
  EXPECT_LT(mean(m, 30, 40, "capacity"), 0.5 * mean(m, 0, 5, "capacity"));
  EXPECT_LT(mean(m, 30, 40, "loss"), mean(m, 0, 5, "loss"));
  EXPECT_LT(mean(m, 30, 40, "live_per_head"), mean(m, 0, 5, "live_per_head"));
  EXPECT_TRUE(
      fs::exists(dir / "run" / "step-40" / "manifest.json"));  // the final step is always saved
  EXPECT_TRUE(fs::exists(dir / "run" / "recipe.yaml"));
}

// Activation checkpointing re-runs each layer in the backward pass through the student's hook:
// the run must equal the one that keeps the activations (it crashed once: the hook was a local of
// the forward pass and was gone by the backward).
TEST(Trainer, ActivationCheckpointingTrainsTheSameGates) {
  TempDir dir;
  make_model_and_shards(dir);
  for (const char* run : {"plain", "checkpointed"}) {
    auto o = base_overrides(dir, run);
    o.insert(o.end(), {"train.steps=3", "checkpoint.every=3",
                       std::string("train.activation_checkpointing=") +
                           (std::string(run) == "checkpointed" ? "true" : "false")});
    ASSERT_EQ(run_train("", o), 0) << run;
  }
  const auto plain = read_metrics(dir / "plain"), checkpointed = read_metrics(dir / "checkpointed");
  ASSERT_EQ(plain.size(), 3u);
  ASSERT_EQ(checkpointed.size(), 3u);
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_NEAR(plain[i]["loss"].get<double>(), checkpointed[i]["loss"].get<double>(), 1e-6) << i;
}

// The learned competitors train on the same data as the gates: each scorer's loss falls, a run
// killed after a checkpoint and resumed ends with the uninterrupted run's weights bit for bit, and
// the exported scorer loads onto its model and no other kind or file.
TEST(Trainer, LearnedScorersTrainResumeAndExport) {
  TempDir dir;
  make_model_and_shards(dir);
  for (const std::string kind : {"locret", "kvzap"}) {
    auto o = base_overrides(dir, kind);
    o.insert(o.end(), {"train.trainable=" + kind, "train.steps=30", "scorer.width=16",
                       "optim.lr=1.0e-2", "checkpoint.every=15"});
    ASSERT_EQ(run_train("", o), 0);
    auto m = read_metrics(dir / kind);
    ASSERT_EQ(m.size(), 30u);
    EXPECT_EQ(m[0]["scorer"], kind);
    EXPECT_LT(mean(m, 20, 30, "loss"), 0.8 * mean(m, 0, 5, "loss")) << kind;
    // Resumed from its step-15 checkpoint in a fresh run directory: the same weights at step 30
    // as the uninterrupted run (parameters, optimizer, RNG and data position all restored).
    fs::create_directories(dir / (kind + "-resumed"));
    fs::copy(dir / kind / "step-15", dir / (kind + "-resumed") / "step-15",
             fs::copy_options::recursive);
    auto resumed = base_overrides(dir, kind + "-resumed");
    resumed.insert(resumed.end(), {"train.trainable=" + kind, "train.steps=30", "scorer.width=16",
                                   "optim.lr=1.0e-2", "checkpoint.every=15"});
    ASSERT_EQ(run_train("", resumed), 0);
    auto a = SafetensorsFile::open(dir / kind / "step-30" / "scorer.safetensors");
    auto b = SafetensorsFile::open(dir / (kind + "-resumed") / "step-30" / "scorer.safetensors");
    for (const auto& name : a->names())
      EXPECT_TRUE(at::equal(a->tensor(name), b->tensor(name))) << kind << " " << name;
    export_checkpoint(dir / kind, dir / (kind + ".safetensors"));
    const ModelConfig config = ModelConfig::load(dir / "model");
    auto scorer = load_scorer_file(dir / (kind + ".safetensors"), config, at::kCPU, kind);
    EXPECT_EQ(scorer_kind_name(scorer->config().kind), kind);
    EXPECT_EQ(scorer->config().width, 16);
    EXPECT_ERROR_CONTAINS(load_scorer_file(dir / (kind + ".safetensors"), config, at::kCPU,
                                           kind == "locret" ? "kvzap" : "locret"),
                          "a " + kind + " scorer, but the policy is");
  }
  // A gate file is not a scorer file, and a checkpoint of one kind does not resume another.
  auto gates = base_overrides(dir, "gates");
  gates.insert(gates.end(), {"train.steps=2"});
  ASSERT_EQ(run_train("", gates), 0);
  EXPECT_ERROR_CONTAINS(read_scorer_file_info(dir / "gates" / "step-2" / "gates.safetensors"),
                        "it is a gate file");
  auto wrong = base_overrides(dir, "gates");
  wrong.insert(wrong.end(), {"train.trainable=kvzap", "train.steps=4"});
  EXPECT_ERROR_CONTAINS(run_train("", wrong), "checkpoint kind 'gates' does not match");
  auto typo = base_overrides(dir, "x");
  typo.insert(typo.end(), {"train.trainable=locrte"});
  EXPECT_ERROR_CONTAINS(run_train("", typo), "expected gates, locret or kvzap");
}

// The held-out loss normalises by the count of targets (the predictions of labelled tokens inside
// a document, not every labelled token, which the next-token loss once was): the number
// base_loss_sums gives with its own count, on the same held-out sequences. The gates start at a
// bias of 40 (beta = 1 to fp32: the student is the model) and only the next-token term counts.
TEST(Trainer, HeldoutLossNormalisesByTheTargets) {
  TempDir dir;
  make_model_and_shards(dir, "llama");
  auto o = base_overrides(dir, "heldout");
  o.insert(o.end(), {"loss.base=[ntp]", "loss.weight=0", "gates.bias_init=40", "train.steps=1",
                     "train.eval_batches=2", "data.heldout=" + (dir / "shards").string()});
  Config recipe = resolve_recipe("", o);
  Trainer trainer(read_settings(recipe), recipe);
  trainer.setup();
  const double heldout = trainer.heldout_loss();

  Decoder model = Decoder::load(dir / "model", {});
  PackedDataset data(list_shards(dir / "shards"), 128, tokenizer_sha256(dir / "model"),
                     model.config().vocab_size);
  double expected = 0;
  for (int64_t i = 0; i < 2; ++i) {
    PackedBatch b = data.batch({i});
    GatedAttentionHook packed(nullptr, b.segments);  // attention within each packed document
    auto hidden = model.forward_hidden(b.ids, b.positions, ForwardContext{nullptr, &packed});
    LossSums sums = base_loss_sums(model, hidden, at::Tensor(), b.ids, b.segments, b.loss_mask,
                                   BaseLossTerms::parse({"ntp"}, "test"), 64);
    // Fewer targets than real tokens: the test tells the two normalisations apart.
    ASSERT_LT(sums.tokens, (b.segments >= 0).sum().item<int64_t>());
    expected += sums.ntp.item<double>() / static_cast<double>(sums.tokens);
  }
  EXPECT_NEAR(heldout, expected / 2, 1e-6 * expected);
}

TEST(Trainer, GateFilesRoundTripAndRefuseOtherModels) {
  TempDir dir;
  make_model_and_shards(dir);
  auto o = base_overrides(dir, "run");
  o.push_back("train.steps=3");
  ASSERT_EQ(run_train("", o), 0);
  export_checkpoint(dir / "run" / "step-3", dir / "g.safetensors");
  ModelConfig config = ModelConfig::load(dir / "model");
  GateFileInfo info;
  auto gates = load_gate_file(dir / "g.safetensors", config, at::kCPU, &info);
  EXPECT_EQ(info.config.width, 16);
  EXPECT_EQ(info.budget, 8.0);
  EXPECT_EQ(info.capacity, "global");
  write_gate_file(dir / "g2.safetensors", *gates, info);
  EXPECT_EQ(read_text_file(dir / "g.safetensors"), read_text_file(dir / "g2.safetensors"));

  // Another model (different width) refuses the file.
  InitModelOptions other;
  other.arch = "qwen3";
  other.preset = "tiny";
  other.sets = {"intermediate_size=96"};
  other.out = (dir / "other").string();
  init_model(other);
  EXPECT_ERROR_CONTAINS(
      load_gate_file(dir / "g.safetensors", ModelConfig::load(dir / "other"), at::kCPU),
      "trained for another base model");
  // A fine-tuning run must use the file's gate config.
  auto ft = base_overrides(dir, "ft");
  ft.insert(ft.end(), {"train.steps=1", "gates.init_from=" + (dir / "g.safetensors").string(),
                       "gates.width=32"});
  EXPECT_ERROR_CONTAINS(run_train("", ft), "differs from the recipe's");
}

TEST(Trainer, OfficialGateNamesImport) {
  TempDir dir;
  make_model_and_shards(dir);
  ModelConfig config = ModelConfig::load(dir / "model");
  for (bool mlp3 : {true, false}) {
    GateConfig gc;
    gc.arch = mlp3 ? GateArch::kMlp3 : GateArch::kMlp2;
    gc.width = 8;
    gc.tie_projection = mlp3;
    GateBank bank(gc, config, at::kCPU, 9);
    // The release layout: every layer's tensors under model.layers.{l}.self_attn.retention_gate,
    // tied ones repeated in every layer.
    SafetensorsWriter official;
    for (int64_t l = 0; l < config.num_layers; ++l) {
      for (const auto& [name, t] : bank.named_parameters()) {
        std::string local;
        if (name.rfind(str_cat("layers.", l, ".gate."), 0) == 0)
          local = name.substr(str_cat("layers.", l, ".gate.").size());
        else if (name.rfind("tied.gate.", 0) == 0)
          local = name.substr(10);
        else
          continue;
        official.add(str_cat("model.layers.", l, ".self_attn.retention_gate.", local),
                     t.detach().to(at::kBFloat16).to(at::kFloat));
      }
    }
    official.write(dir / "official.safetensors");
    // The vision-language releases: a torch.save'd dict (trimkv_weights.pth) with the language
    // model's layers under model.language_model.layers.{l}.
    c10::Dict<std::string, at::Tensor> pth;
    for (int64_t l = 0; l < config.num_layers; ++l)
      for (const auto& [name, t] : bank.named_parameters()) {
        const std::string own = str_cat("layers.", l, ".gate.");
        const std::string local = name.rfind(own, 0) == 0            ? name.substr(own.size())
                                  : name.rfind("tied.gate.", 0) == 0 ? name.substr(10)
                                                                     : "";
        if (!local.empty())
          pth.insert(
              str_cat("model.language_model.layers.", l, ".self_attn.retention_gate.", local),
              t.detach().clone());
      }
    const std::vector<char> bytes = torch::pickle_save(c10::IValue(pth));
    write_text_file_atomic(dir / "trimkv_weights.pth", std::string(bytes.begin(), bytes.end()));
    for (const char* file : {"official.safetensors", "trimkv_weights.pth"}) {
      import_official_gates(dir / file, dir / "model", dir / "imported.safetensors");
      GateFileInfo info;
      auto imported = load_gate_file(dir / "imported.safetensors", config, at::kCPU, &info);
      EXPECT_EQ(info.config.arch, gc.arch) << file;
      EXPECT_EQ(info.config.tie_projection, gc.tie_projection) << file;
      auto x = at::randn({1, 5, config.hidden_size});
      EXPECT_LE((imported->log_beta(1, x) - bank.log_beta(1, x)).abs().max().item<double>(),
                1e-2)
          << file;  // bf16 rounding (the .pth is exact)
    }
  }
  write_text_file_atomic(dir / "junk.pth", "not a zip");
  EXPECT_ERROR_CONTAINS(
      import_official_gates(dir / "junk.pth", dir / "model", dir / "x.safetensors"),
      "junk.pth: not a torch.save'd file");
  SafetensorsWriter junk;
  junk.add("something.else", at::ones({1}));
  junk.write(dir / "junk.safetensors");
  EXPECT_ERROR_CONTAINS(
      import_official_gates(dir / "junk.safetensors", dir / "model", dir / "x.safetensors"),
      "not an official TrimKV/DBTrimKV gate file");
}

TEST(Trainer, BadInputFailsClearly) {
  TempDir dir;
  make_model_and_shards(dir);
  write_text_file_atomic(dir / "bad.yaml", "optim:\n  lrr: 1.0\n");
  EXPECT_ERROR_CONTAINS(resolve_recipe((dir / "bad.yaml").string(), {}),
                        "unknown recipe key 'optim.lrr' (line 2); did you mean 'optim.lr'?");
  EXPECT_ERROR_CONTAINS(resolve_recipe("", {"train.stpes=3"}), "did you mean 'train.steps'?");

  // Shards tokenized by another tokenizer.
  PrepOptions prep;
  prep.tokenizer_dir = (testing::fixture_dir("tokenizers") / "bytelevel_qwen2").string();
  prep.inputs = {(dir / "docs.jsonl").string()};
  prep.format = "jsonl";
  prep.out = (dir / "other_shards").string();
  run_prep(prep);
  auto o = base_overrides(dir, "run");
  o.push_back("data.shards=" + (dir / "other_shards").string());
  EXPECT_ERROR_CONTAINS(run_train("", o), "was tokenized with a different tokenizer");

  // No documents, malformed lines, a corrupt shard.
  write_text_file_atomic(dir / "empty.jsonl", "\n\n");
  prep.tokenizer_dir = (dir / "model").string();
  prep.inputs = {(dir / "empty.jsonl").string()};
  prep.out = (dir / "empty_shards").string();
  EXPECT_ERROR_CONTAINS(run_prep(prep), "hold no document");
  EXPECT_FALSE(fs::exists(dir / "empty_shards"));
  write_text_file_atomic(dir / "broken.jsonl", "{\"text\": \"ok\"}\n{\"text\": \n");
  prep.inputs = {(dir / "broken.jsonl").string()};
  EXPECT_ERROR_CONTAINS(run_prep(prep), "broken.jsonl:2: invalid JSON");
  write_text_file_atomic(dir / "nofield.jsonl", "{\"body\": \"x\"}\n");
  prep.inputs = {(dir / "nofield.jsonl").string()};
  EXPECT_ERROR_CONTAINS(run_prep(prep), "nofield.jsonl:1: field 'text' is missing");
  write_text_file_atomic(dir / "shards" / "shard-00000.h5", "this is not hdf5");
  EXPECT_ERROR_CONTAINS(ShardReader(dir / "shards" / "shard-00000.h5"), "not a valid HDF5 file");
  write_shard(dir / "e.h5", ShardContents{}, {"sha", 10, kShardFormatVersion});  // no document
  EXPECT_ERROR_CONTAINS(ShardReader(dir / "e.h5"), "holds no document");
}

TEST(Trainer, NonFiniteStepsAreSkippedThenAbort) {
  TempDir dir;
  make_model_and_shards(dir);
  auto o = base_overrides(dir, "nan");
  // Gate weights of 1e30 overflow the gate MLP to inf - inf = NaN: every step is non-finite.
  o.insert(o.end(), {"train.steps=20", "gates.init_std=1.0e30", "train.max_nonfinite_steps=3"});
  EXPECT_ERROR_CONTAINS(run_train("", o),
                        "3 non-finite steps in a row (train.max_nonfinite_steps)");
}

TEST(Trainer, ChatDataGetsAnAssistantOnlyMask) {
  TempDir dir;
  fs::path tok = testing::fixture_dir("tokenizers") / "bytelevel_qwen2";
  write_text_file_atomic(
      dir / "chat.jsonl",
      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello there"}]})"
      "\n");
  PrepOptions prep;
  prep.tokenizer_dir = tok.string();
  prep.inputs = {(dir / "chat.jsonl").string()};
  prep.format = "chat";
  prep.out = (dir / "chat_shards").string();
  run_prep(prep);
  ShardReader reader(dir / "chat_shards" / "shard-00000.h5");
  ASSERT_TRUE(reader.has_loss_mask());
  std::vector<int32_t> ids(reader.num_tokens());
  std::vector<uint8_t> mask(reader.num_tokens());
  reader.read(0, reader.num_tokens(), ids.data(), mask.data());
  auto tokenizer = load_tokenizer(tok);
  std::string labelled;
  for (size_t i = 0; i < ids.size(); ++i)
    if (mask[i]) labelled += tokenizer->decode({ids[i]});
  // The assistant's reply (and the turn's closing tokens), nothing of the user turn.
  EXPECT_NE(labelled.find("Hello there"), std::string::npos) << labelled;
  EXPECT_EQ(labelled.find("Hi"), std::string::npos) << labelled;
}

// prep stores each document as the tokenizer's full encoding (what HF's tokenizer(text) gives:
// here BOS ... EOS from the post-processor) and ends it in exactly one EOS: the template's, or one
// appended when the template has none. With label spans the final EOS is labelled when the text
// ends in a span.
TEST(Prep, DocumentsAreTheFullEncodingEndingInOneEos) {
  TempDir dir;
  write_text_file_atomic(dir / "docs.jsonl",
                         "{\"text\": \"Hello world\", \"spans\": [[6, 11]]}\n"
                         "{\"text\": \" two  spaces\", \"spans\": [[0, 4]]}\n");
  for (const char* name : {"llama2_eos_template", "llama2_add_eos_true"}) {
    SCOPED_TRACE(name);
    const fs::path tok_dir = testing::fixture_dir("tokenizer_semantics") / name;
    auto tokenizer = load_tokenizer(tok_dir);
    const bool template_eos = std::string(name) == "llama2_eos_template";
    EXPECT_EQ(tokenizer->suffix_ids().size(), template_eos ? 1u : 0u);
    for (bool spans : {false, true}) {
      PrepOptions prep;
      prep.tokenizer_dir = tok_dir.string();
      prep.inputs = {(dir / "docs.jsonl").string()};
      prep.format = "jsonl";
      if (spans) prep.label_spans = "spans";
      prep.out = (dir / (std::string(name) + (spans ? "-spans" : ""))).string();
      run_prep(prep);
      ShardReader reader(fs::path(prep.out) / "shard-00000.h5");
      ASSERT_EQ(reader.num_docs(), 2);
      std::vector<int32_t> ids(reader.num_tokens());
      std::vector<uint8_t> mask(reader.num_tokens());
      reader.read(0, reader.num_tokens(), ids.data(), spans ? mask.data() : nullptr);
      const int64_t eos = *tokenizer->eos_id();
      for (int d = 0; d < 2; ++d) {
        const std::string text = d == 0 ? "Hello world" : " two  spaces";
        auto want = tokenizer->encode_with_special_tokens(text);
        if (want.back() != eos) want.push_back(eos);
        const auto begin = reader.doc_offsets()[d], end = reader.doc_offsets()[d + 1];
        EXPECT_EQ(std::vector<int64_t>(ids.begin() + begin, ids.begin() + end), want) << text;
        EXPECT_NE(ids[end - 2], eos) << "two EOS at the end of " << text;
        if (spans) {
          EXPECT_EQ(mask[end - 1], d == 0 ? 1 : 0) << "the final EOS of " << text;
        }
      }
    }
  }
}

}  // namespace
}  // namespace retain
