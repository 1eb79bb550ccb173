#include "model/init_model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <map>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "core/safetensors.h"
#include "model/decoder.h"
#include "model/model_config.h"
#include "model/sentencepiece_tokenizer.h"
#include "model/tiny_corpus.h"

namespace retain {

namespace {

struct Shape {
  int64_t hidden, layers, heads, kv_heads, head_dim, intermediate, vocab, max_positions;
};

// Family defaults shared by every preset of an architecture.
Json family_config(const std::string& arch) {
  static const std::map<std::string, std::string> kClasses = {{"llama", "LlamaForCausalLM"},
                                                              {"mistral", "MistralForCausalLM"},
                                                              {"qwen2", "Qwen2ForCausalLM"},
                                                              {"qwen3", "Qwen3ForCausalLM"}};
  auto it = kClasses.find(arch);
  RETAIN_CHECK(it != kClasses.end(), "init-model: unknown --arch '", arch,
               "' (expected llama, mistral, qwen2 or qwen3)");
  Json j = {
      {"architectures", {it->second}}, {"model_type", arch},           {"hidden_act", "silu"},
      {"initializer_range", 0.02},     {"rms_norm_eps", 1e-6},         {"rope_theta", 10000.0},
      {"rope_scaling", nullptr},       {"tie_word_embeddings", false}, {"attention_dropout", 0.0}};
  if (arch == "llama" || arch == "qwen3") j["attention_bias"] = false;
  if (arch == "llama") j["mlp_bias"] = false;
  if (arch == "mistral") j["sliding_window"] = nullptr;
  if (arch == "qwen2" || arch == "qwen3") {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
  }
  return j;
}

void apply_shape(Json& j, const Shape& s) {
  j["hidden_size"] = s.hidden;
  j["num_hidden_layers"] = s.layers;
  j["num_attention_heads"] = s.heads;
  j["num_key_value_heads"] = s.kv_heads;
  j["head_dim"] = s.head_dim;
  j["intermediate_size"] = s.intermediate;
  j["vocab_size"] = s.vocab;
  j["max_position_embeddings"] = s.max_positions;
}

// Named presets: the public architectures' shapes (weights random). The arch they belong to.
struct NamedPreset {
  const char* arch;
  Shape shape;
  Json extra;
};

const std::map<std::string, NamedPreset>& named_presets() {
  static const std::map<std::string, NamedPreset> kPresets = {
      {"llama2-7b",
       {"llama",
        {4096, 32, 32, 32, 128, 11008, 32000, 4096},
        {{"rms_norm_eps", 1e-5}, {"bos_token_id", 1}, {"eos_token_id", 2}}}},
      {"llama3-8b",
       {"llama",
        {4096, 32, 32, 8, 128, 14336, 128256, 131072},
        {{"rms_norm_eps", 1e-5},
         {"rope_theta", 500000.0},
         {"bos_token_id", 128000},
         {"eos_token_id", 128001},
         {"rope_scaling",
          {{"rope_type", "llama3"},
           {"factor", 8.0},
           {"low_freq_factor", 1.0},
           {"high_freq_factor", 4.0},
           {"original_max_position_embeddings", 8192}}}}}},
      {"llama3-70b",
       {"llama",
        {8192, 80, 64, 8, 128, 28672, 128256, 131072},
        {{"rms_norm_eps", 1e-5},
         {"rope_theta", 500000.0},
         {"bos_token_id", 128000},
         {"eos_token_id", 128001},
         {"rope_scaling",
          {{"rope_type", "llama3"},
           {"factor", 8.0},
           {"low_freq_factor", 1.0},
           {"high_freq_factor", 4.0},
           {"original_max_position_embeddings", 8192}}}}}},
      {"mistral-7b",
       {"mistral",
        {4096, 32, 32, 8, 128, 14336, 32768, 32768},
        {{"rms_norm_eps", 1e-5},
         {"rope_theta", 1000000.0},
         {"bos_token_id", 1},
         {"eos_token_id", 2}}}},
      {"qwen2-7b",
       {"qwen2",
        {3584, 28, 28, 4, 128, 18944, 152064, 32768},
        {{"rope_theta", 1000000.0}, {"eos_token_id", 151643}, {"max_window_layers", 28}}}},
      {"qwen3-4b",
       {"qwen3",
        {2560, 36, 32, 8, 128, 9728, 151936, 40960},
        {{"rope_theta", 1000000.0}, {"tie_word_embeddings", true}, {"eos_token_id", 151645}}}},
      {"qwen3-8b",
       {"qwen3",
        {4096, 36, 32, 8, 128, 12288, 151936, 40960},
        {{"rope_theta", 1000000.0}, {"eos_token_id", 151645}}}},
  };
  return kPresets;
}

bool is_small_preset(const std::string& preset) { return preset == "tiny" || preset == "small"; }

// Tiny/small vocabularies come from the tokenizer trained for them.
constexpr int kTinyVocab = 512;
constexpr int kSmallVocab = 768;  // the project corpus yields at most 885 BPE pieces

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names = {"tiny", "small"};
  for (const auto& [name, _] : named_presets()) names.push_back(name);
  return names;
}

Json preset_config(const std::string& arch, const std::string& preset) {
  if (is_small_preset(preset)) {
    RETAIN_CHECK(!arch.empty(), "init-model: --preset ", preset,
                 " needs --arch (llama, mistral, qwen2 or qwen3)");
    Json j = family_config(arch);
    Shape s = preset == "tiny" ? Shape{64, 2, 4, 2, 16, 192, kTinyVocab, 8192}
                               : Shape{256, 4, 8, 2, 32, 768, kSmallVocab, 8192};
    apply_shape(j, s);
    j["bos_token_id"] = 1;
    j["eos_token_id"] = 2;
    j["tie_word_embeddings"] = preset == "tiny";
    if (arch == "qwen2" || arch == "qwen3") j["tie_word_embeddings"] = true;
    j["torch_dtype"] = "float32";
    return j;
  }
  auto it = named_presets().find(preset);
  if (it == named_presets().end()) {
    std::string names;
    for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
    fail("init-model: unknown --preset '", preset, "' (expected one of ", names, ")");
  }
  const NamedPreset& p = it->second;
  RETAIN_CHECK(arch.empty() || arch == p.arch, "init-model: preset ", preset, " is a ", p.arch,
               " model but --arch ", arch, " was given");
  Json j = family_config(p.arch);
  apply_shape(j, p.shape);
  j.update(p.extra);
  j["torch_dtype"] = "bfloat16";
  return j;
}

void init_model(const InitModelOptions& options) {
  RETAIN_CHECK(!options.out.empty(), "init-model: --out is required");
  fs::path out(options.out);
  RETAIN_CHECK(!fs::exists(out) || options.force, "init-model: ", out.string(),
               " already exists (pass --force to replace it)");
  Json config = preset_config(options.arch, options.preset);
  for (const auto& set : options.sets) {
    auto eq = set.find('=');
    RETAIN_CHECK(eq != std::string::npos && eq > 0, "init-model: --set '", set,
                 "': expected key=value");
    std::string key = set.substr(0, eq);
    std::string value = set.substr(eq + 1);
    RETAIN_CHECK(config.contains(key), "init-model: --set '", set, "': config.json has no key '",
                 key, "'");
    Json parsed;
    try {
      parsed = Json::parse(value);
    } catch (const nlohmann::json::parse_error&) {
      parsed = value;  // a bare word is a string
    }
    config[key] = parsed;
  }
  std::optional<SentencePieceTokenizer> tokenizer;
  if (!options.tokenizer.empty()) {
    RETAIN_CHECK(fs::is_regular_file(options.tokenizer), "init-model: --tokenizer ",
                 options.tokenizer, " is not a file (expected a SentencePiece tokenizer.model)");
    tokenizer.emplace(options.tokenizer);
    config["vocab_size"] = tokenizer->vocab_size();
    if (auto bos = tokenizer->bos_id()) config["bos_token_id"] = *bos;
    if (auto eos = tokenizer->eos_id()) config["eos_token_id"] = *eos;
  }
  if (options.dtype) {
    at::ScalarType requested = parse_dtype_name(*options.dtype, "init-model --dtype");
    config["torch_dtype"] = requested == at::kFloat      ? "float32"
                            : requested == at::kBFloat16 ? "bfloat16"
                                                         : "float16";
  }
  // Validate through the same parser the loader uses, so a bad --set fails before any writing.
  ModelConfig parsed = ModelConfig::from_json(config, "init-model config");
  at::ScalarType dtype =
      parse_dtype_name(config["torch_dtype"].get<std::string>(), "init-model --dtype");

  write_dir_atomic(out, [&](const fs::path& tmp) {
    if (tokenizer) {
      fs::copy_file(options.tokenizer, tmp / "tokenizer.model");
    } else if (is_small_preset(options.preset)) {
      SentencePieceTrainOptions sp;
      sp.vocab_size = static_cast<int>(parsed.vocab_size);
      train_sentencepiece(tiny_corpus(4000, 1234), sp, tmp / "tokenizer.model");
    }
    write_json_file_atomic(tmp / "config.json", config);

    double std = config.value("initializer_range", 0.02);
    SafetensorsWriter writer;
    writer.set_metadata("format", "pt");
    int64_t total = 0;
    for (const auto& spec : decoder_param_specs(parsed)) {
      int64_t numel = 1;
      for (int64_t d : spec.shape) numel *= d;
      total += numel;
      // A per-tensor seed makes each tensor independent of the order tensors are written in.
      uint64_t tensor_seed = options.seed;
      for (unsigned char c : spec.name) tensor_seed = tensor_seed * 1099511628211ull + c;
      writer.add_lazy(spec.name, dtype, spec.shape, [spec, dtype, std, tensor_seed] {
        switch (spec.kind) {
          case ParamSpec::Kind::kNorm:
            return at::ones(spec.shape, at::TensorOptions().dtype(dtype));
          case ParamSpec::Kind::kBias:
            return at::zeros(spec.shape, at::TensorOptions().dtype(dtype));
          default: {
            auto gen = at::make_generator<at::CPUGeneratorImpl>(tensor_seed);
            return at::normal(0.0, std, spec.shape, gen).to(dtype);
          }
        }
      });
    }
    log_info("init-model: ", options.preset, " ", parsed.model_type, ", ", total / 1e6,
             "M parameters, ", c10::toString(dtype), " -> ", out.string());
    writer.write(tmp / "model.safetensors");
  });
}

}  // namespace retain
