// Loading models and tokenizers: bad model directories give clear errors; SentencePiece ids equal
// the Python sentencepiece library's; init-model writes loadable, deterministic models.
#include <c10/core/InferenceMode.h>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <atomic>
#include <fstream>
#include <string_view>

#include "core/json.h"
#include "core/safetensors.h"
#include "model/decoder.h"
#include "model/init_model.h"
#include "model/tokenizers/sentencepiece_tokenizer.h"
#include "test_util.h"

namespace retain {
namespace {

using testing::TempDir;

fs::path hf_case(const std::string& name) { return testing::fixture_dir("hf") / name; }

// A copy of a fixture model dir that a test may corrupt.
fs::path copy_model(const TempDir& dir, const std::string& name) {
  fs::path out = dir / name;
  fs::create_directories(out);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(hf_case(name) / f, out / f);
  return out;
}

void edit_config(const fs::path& model_dir, const std::function<void(Json&)>& edit) {
  Json j = read_json_file(model_dir / "config.json");
  edit(j);
  write_json_file_atomic(model_dir / "config.json", j);
}

TEST(ModelLoad, MissingTensor) {
  TempDir dir;
  fs::path m = copy_model(dir, "llama_tied_mha");
  auto file = SafetensorsFile::open(m / "model.safetensors");
  SafetensorsWriter writer;
  for (const auto& name : file->names())
    if (name != "model.layers.1.mlp.up_proj.weight") writer.add(name, file->tensor(name).clone());
  file.reset();
  writer.write(m / "model.safetensors");
  EXPECT_ERROR_CONTAINS(Decoder::load(m, {}), "missing tensor 'model.layers.1.mlp.up_proj.weight'");
}

TEST(ModelLoad, WrongShapeForConfig) {
  TempDir dir;
  fs::path m = copy_model(dir, "llama_tied_mha");
  edit_config(m, [](Json& j) { j["intermediate_size"] = 100; });
  EXPECT_ERROR_CONTAINS(Decoder::load(m, {}),
                        "has shape [128, 64] but config.json implies [100, 64]");
}

TEST(ModelLoad, UnknownArchitectureAndUnsupportedKeys) {
  TempDir dir;
  fs::path m = copy_model(dir, "llama_tied_mha");
  edit_config(m, [](Json& j) { j["model_type"] = "gpt2"; });
  EXPECT_ERROR_CONTAINS(Decoder::load(m, {}), "model_type 'gpt2' is not supported");
  edit_config(m, [](Json& j) {
    j["model_type"] = "llama";
    j["rope_parameters"] = {{"rope_type", "longrope"}, {"rope_theta", 10000.0}};
  });
  EXPECT_ERROR_CONTAINS(Decoder::load(m, {}), "rope_type 'longrope' is not supported");
  edit_config(m, [](Json& j) {
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}};
    j["hidden_act"] = "mish";
  });
  EXPECT_ERROR_CONTAINS(Decoder::load(m, {}), "hidden_act 'mish' is not supported");
  edit_config(m, [](Json& j) {
    j["hidden_act"] = "silu";
    j["quantization_config"] = {{"quant_method", "gptq"}};
  });
  EXPECT_ERROR_CONTAINS(Decoder::load(m, {}), "'quantization_config' is not supported");
  edit_config(m, [](Json& j) {
    j.erase("quantization_config");
    j["num_key_value_heads"] = 3;
  });
  EXPECT_ERROR_CONTAINS(Decoder::load(m, {}), "not a multiple of num_key_value_heads 3");
  // Found by the config fuzzer: a huge layer count allocated gigabytes; a float outside int64's
  // range was cast (undefined behaviour).
  edit_config(m, [](Json& j) {
    j["num_key_value_heads"] = j["num_attention_heads"];
    j["num_hidden_layers"] = 400000000;
  });
  EXPECT_ERROR_CONTAINS(Decoder::load(m, {}), "num_hidden_layers 400000000 is more than 4096");
  edit_config(m, [](Json& j) {
    j["num_hidden_layers"] = 2;
    j["num_attention_heads"] = 1e30;
  });
  EXPECT_ERROR_CONTAINS(Decoder::load(m, {}), "key 'num_attention_heads' must be a whole number");
}

TEST(ModelLoad, MissingConfigAndTokenizer) {
  TempDir dir;
  EXPECT_ERROR_CONTAINS(Decoder::load(dir.path(), {}), "no config.json");
  fs::path m = copy_model(dir, "llama_tied_mha");
  EXPECT_ERROR_CONTAINS(load_tokenizer(m), "no tokenizer found");
  std::ofstream(m / "tokenizer.model") << "not a model";
  EXPECT_ERROR_CONTAINS(load_tokenizer(m), "not a valid SentencePiece model");
}

TEST(ModelLoad, ReadsTransformers4RopeScalingToo) {
  // Checkpoints saved by transformers 4.x carry rope_scaling + top-level rope_theta.
  Json j = read_json_file(hf_case("llama_gqa4_llama3") / "config.json");
  Json v4 = j;
  v4.erase("rope_parameters");
  v4["rope_theta"] = j["rope_parameters"]["rope_theta"];
  v4["rope_scaling"] = j["rope_parameters"];
  v4["rope_scaling"].erase("rope_theta");
  auto a = ModelConfig::from_json(j, "v5");
  auto b = ModelConfig::from_json(v4, "v4");
  EXPECT_EQ(a.fingerprint(), b.fingerprint());
  EXPECT_EQ(b.rope.type, RopeType::kLlama3);
  EXPECT_DOUBLE_EQ(b.rope.theta, 500000.0);
}

TEST(ModelLoad, LoadsInBf16AndFp16) {
  c10::InferenceMode guard;
  auto ref = SafetensorsFile::open(hf_case("qwen3_qknorm") / "reference.safetensors");
  auto ids = ref->tensor("input_ids").clone();
  auto positions = at::arange(ids.size(1)).view({1, -1});
  auto expected = ref->tensor("logits");
  for (auto dtype : {at::kBFloat16, at::kHalf}) {
    Decoder m = Decoder::load(hf_case("qwen3_qknorm"), {dtype, at::kCPU});
    for (const auto& [name, p] : m.named_parameters()) ASSERT_EQ(p.scalar_type(), dtype) << name;
    auto logits = m.forward(ids, positions, nullptr);
    // Half precision: agreement of the distribution, not of every bit.
    double diff = (logits - expected).abs().max().item<double>();
    EXPECT_LE(diff, 0.15) << c10::toString(dtype);
  }
}

// aten::linear calls while `f` runs: the number of products (at one thread project() is
// at::linear), the proxy for the kernels a layer launches.
int64_t linear_calls(const std::function<void()>& f) {
  static std::atomic<int64_t> calls{0};
  calls = 0;
  auto handle = at::addGlobalCallback(at::RecordFunctionCallback(
      [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        if (std::string_view(fn.name()) == "aten::linear") ++calls;
        return nullptr;
      }));
  f();
  at::removeCallback(handle);
  return calls;
}

TEST(ModelLoad, FusedProjectionsGiveTheSeparateProducts) {
  c10::InferenceMode guard;
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  // Biased q/k/v (qwen2), q/k norms (qwen3), a plain llama.
  for (const char* name : {"qwen2_bias_yarn", "qwen3_qknorm", "llama_gqa4_llama3"}) {
    SCOPED_TRACE(name);
    LoadOptions separate_options;
    separate_options.fuse_projections = false;
    Decoder fused = Decoder::load(hf_case(name), {});
    Decoder separate = Decoder::load(hf_case(name), separate_options);
    ASSERT_TRUE(fused.projections_fused());
    ASSERT_FALSE(separate.projections_fused());
    auto ids = at::randint(0, fused.config().vocab_size, {2, 9}, at::kLong);
    auto positions = at::arange(9).view({1, -1}).expand({2, 9});
    at::Tensor a, b;
    const int64_t fused_calls = linear_calls([&] { a = fused.forward(ids, positions, nullptr); });
    const int64_t separate_calls =
        linear_calls([&] { b = separate.forward(ids, positions, nullptr); });
    // Seven products per layer become four (qkv, o, gate-up, down); the LM head is one more.
    const int64_t layers = fused.config().num_layers;
    EXPECT_EQ(separate_calls, 7 * layers + 1);
    EXPECT_EQ(fused_calls, 4 * layers + 1);
    EXPECT_LE((a - b).abs().max().item<double>(), 1e-5);
    // The same names, shapes and values, held once: the separate names are views of the fused.
    ASSERT_EQ(fused.named_parameters().size(), separate.named_parameters().size());
    for (size_t i = 0; i < fused.named_parameters().size(); ++i) {
      const auto& [n1, t1] = fused.named_parameters()[i];
      const auto& [n2, t2] = separate.named_parameters()[i];
      EXPECT_EQ(n1, n2);
      EXPECT_TRUE(at::equal(t1, t2)) << n1;
    }
    EXPECT_EQ(fused.weight_bytes(), separate.weight_bytes());
  }
  at::set_num_threads(threads);
}

TEST(ModelLoad, ParametersAreFrozen) {
  Decoder m = Decoder::load(hf_case("qwen2_bias_yarn"), {});
  EXPECT_FALSE(m.named_parameters().empty());
  for (const auto& [name, p] : m.named_parameters()) EXPECT_FALSE(p.requires_grad()) << name;
}

TEST(SentencePiece, IdsEqualPythonSentencepiece) {
  fs::path dir = testing::fixture_dir("sp");
  SentencePieceTokenizer tok(dir / "tokenizer.model");
  Json cases = read_json_file(dir / "sp_cases.json");
  ASSERT_GE(cases.size(), 100u);
  size_t round_trips = 0;
  for (const auto& c : cases) {
    auto text = c["text"].get<std::string>();
    auto ids = tok.encode(text);
    EXPECT_EQ(ids, c["ids"].get<std::vector<int64_t>>()) << "text: " << text;
    // Text already holding the SentencePiece space marker cannot round-trip by construction.
    if (text.find("\xe2\x96\x81") == std::string::npos) {
      EXPECT_EQ(tok.decode(ids), text);
      ++round_trips;
    }
  }
  EXPECT_GE(round_trips, cases.size() - 2);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_ERROR_CONTAINS(tok.encode("bad \xff byte"), "not valid UTF-8 (byte offset 4)");
  EXPECT_ERROR_CONTAINS(tok.decode({100000}), "cannot decode id 100000");
}

TEST(InitModel, TinyPresetsLoadAndAreDeterministic) {
  TempDir dir;
  c10::InferenceMode guard;
  for (const char* arch : {"llama", "mistral", "qwen2", "qwen3"}) {
    InitModelOptions o;
    o.arch = arch;
    o.preset = "tiny";
    o.seed = 7;
    o.out = (dir / arch).string();
    init_model(o);
    Decoder m = Decoder::load(o.out, {});
    auto tok = load_tokenizer(o.out);
    EXPECT_EQ(tok->vocab_size(), m.config().vocab_size) << arch;
    auto ids = tok->encode_prompt("The value of alpha is 42.");
    auto t = static_cast<int64_t>(ids.size());
    auto logits = m.forward(at::tensor(ids).view({1, t}), at::arange(t).view({1, t}), nullptr);
    EXPECT_TRUE(logits.isfinite().all().item<bool>());
    EXPECT_ERROR_CONTAINS(init_model(o), "already exists");
    o.force = true;
    init_model(o);  // same seed: same bytes
    Decoder again = Decoder::load(o.out, {});
    EXPECT_TRUE(at::equal(again.named_parameters()[1].second, m.named_parameters()[1].second));
  }
}

TEST(InitModel, SmallPresetTokenizerMatchesItsVocabulary) {
  TempDir dir;
  InitModelOptions o;
  o.arch = "mistral";
  o.preset = "small";
  o.out = (dir / "small").string();
  init_model(o);
  Decoder m = Decoder::load(o.out, {});
  EXPECT_EQ(load_tokenizer(o.out)->vocab_size(), m.config().vocab_size);
  EXPECT_EQ(m.config().num_layers, 4);
}

TEST(InitModel, BadOptionsWriteNothing) {
  TempDir dir;
  InitModelOptions o;
  o.arch = "llama";
  o.preset = "huge";
  o.out = (dir / "m").string();
  EXPECT_ERROR_CONTAINS(init_model(o), "unknown --preset 'huge'");
  o.preset = "qwen3-4b";
  EXPECT_ERROR_CONTAINS(init_model(o), "preset qwen3-4b is a qwen3 model but --arch llama");
  o.preset = "tiny";
  o.sets = {"num_hidden_layerz=3"};
  EXPECT_ERROR_CONTAINS(init_model(o), "config.json has no key 'num_hidden_layerz'");
  o.sets = {"num_key_value_heads=3"};
  EXPECT_ERROR_CONTAINS(init_model(o), "not a multiple of num_key_value_heads 3");
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(InitModel, PresetShapesMatchThePublicModels) {
  auto q = ModelConfig::from_json(preset_config("", "qwen3-4b"), "qwen3-4b");
  EXPECT_EQ(q.num_layers, 36);
  EXPECT_EQ(q.num_kv_heads, 8);
  EXPECT_EQ(q.head_dim, 128);
  EXPECT_TRUE(q.tie_word_embeddings);
  auto l = ModelConfig::from_json(preset_config("llama", "llama3-8b"), "llama3-8b");
  EXPECT_EQ(l.rope.type, RopeType::kLlama3);
  EXPECT_EQ(l.vocab_size, 128256);
  int64_t params = 0;
  for (const auto& s : decoder_param_specs(l)) {
    int64_t n = 1;
    for (int64_t d : s.shape) n *= d;
    params += n;
  }
  EXPECT_EQ(params, 8030261248);  // Llama-3-8B's published parameter count
}

}  // namespace
}  // namespace retain
