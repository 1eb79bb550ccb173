#include "model/init_model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <map>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "core/safetensors.h"
#include "model/decoder.h"
#include "model/model_config.h"
#include "model/tiny_corpus.h"
#include "model/tokenizers/sentencepiece_tokenizer.h"
#include "model/vision/vision_config.h"
#include "model/vision/vision_tower.h"

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
      {"qwen3-32b",
       {"qwen3",
        {5120, 64, 64, 8, 128, 25600, 151936, 40960},
        {{"rope_theta", 1000000.0}, {"eos_token_id", 151645}}}},
  };
  return kPresets;
}

bool is_small_preset(const std::string& preset) { return preset == "tiny" || preset == "small"; }

bool is_vision_language(const std::string& arch) {
  return arch == "qwen2_5_vl" || arch == "qwen3_vl";
}

// The special tokens a tiny vision-language model's SentencePiece tokenizer is trained with:
// user-defined symbols take the ids right after unk/bos/eos (0, 1, 2), in this order.
const std::vector<std::string>& vision_language_symbols() {
  static const std::vector<std::string> kSymbols = {"<|im_start|>",     "<|im_end|>",
                                                    "<|vision_start|>", "<|vision_end|>",
                                                    "<|image_pad|>",    "<|video_pad|>"};
  return kSymbols;
}

struct VisionShape {
  int64_t depth, hidden, heads, intermediate, patch;
  std::vector<int64_t> blocks;  // Qwen2.5-VL: full-attention blocks; Qwen3-VL: DeepStack blocks
  int64_t position_embeddings;  // Qwen3-VL
};

// A vision-language config as transformers 5 writes it: the decoder's keys in text_config, the
// tower's in vision_config, the multimodal token ids at the top.
Json vision_language_config(const std::string& arch, const Shape& text, const VisionShape& vision,
                            double rope_theta, const std::vector<int64_t>& mrope, bool tied,
                            const Json& token_ids) {
  const bool qwen3 = arch == "qwen3_vl";
  Json t = family_config(qwen3 ? "qwen3" : "qwen2");
  t.erase("architectures");
  t.erase("rope_theta");
  t.erase("rope_scaling");
  apply_shape(t, text);
  t["model_type"] = arch + "_text";
  t["rope_parameters"] = {
      {"rope_type", "default"}, {"rope_theta", rope_theta}, {"mrope_section", mrope}};
  if (qwen3) t["rope_parameters"]["mrope_interleaved"] = true;
  t["tie_word_embeddings"] = tied;
  Json v = {{"depth", vision.depth},
            {"hidden_size", vision.hidden},
            {"num_heads", vision.heads},
            {"intermediate_size", vision.intermediate},
            {"in_channels", 3},
            {"patch_size", vision.patch},
            {"temporal_patch_size", 2},
            {"spatial_merge_size", 2},
            {"out_hidden_size", text.hidden},
            {"hidden_act", qwen3 ? "gelu_pytorch_tanh" : "silu"},
            {"initializer_range", 0.02},
            {"rope_parameters", {{"rope_type", "axial"}, {"rope_theta", 10000.0}}}};
  if (qwen3) {
    v["num_position_embeddings"] = vision.position_embeddings;
    v["deepstack_visual_indexes"] = vision.blocks;
  } else {
    v["window_size"] = 112;
    v["fullatt_block_indexes"] = vision.blocks;
    v["tokens_per_second"] = 2;
  }
  Json j = {{"architectures",
             {qwen3 ? "Qwen3VLForConditionalGeneration" : "Qwen2_5_VLForConditionalGeneration"}},
            {"model_type", arch},
            {"text_config", t},
            {"vision_config", v},
            {"tie_word_embeddings", tied}};
  j.update(token_ids);
  if (token_ids.contains("eos_token_id"))
    j["text_config"]["eos_token_id"] = token_ids["eos_token_id"];
  if (token_ids.contains("bos_token_id"))
    j["text_config"]["bos_token_id"] = token_ids["bos_token_id"];
  return j;
}

const Json& qwen_vision_token_ids() {
  static const Json kIds = {{"image_token_id", 151655},        {"video_token_id", 151656},
                            {"vision_start_token_id", 151652}, {"vision_end_token_id", 151653},
                            {"bos_token_id", 151643},          {"eos_token_id", 151645}};
  return kIds;
}

struct VisionLanguagePreset {
  const char* arch;
  Shape text;
  VisionShape vision;
  double rope_theta;
  std::vector<int64_t> mrope;
  bool tied;
};

// The public vision-language shapes (weights random), from the models' config.json files.
const std::map<std::string, VisionLanguagePreset>& vision_language_presets() {
  static const std::map<std::string, VisionLanguagePreset> kPresets = {
      {"qwen2.5-vl-7b",
       {"qwen2_5_vl",
        {3584, 28, 28, 4, 128, 18944, 152064, 128000},
        {32, 1280, 16, 3420, 14, {7, 15, 23, 31}, 0},
        1000000.0,
        {16, 24, 24},
        false}},
      {"qwen3-vl-4b",
       {"qwen3_vl",
        {2560, 36, 32, 8, 128, 9728, 151936, 262144},
        {24, 1024, 16, 4096, 16, {5, 11, 17}, 2304},
        5000000.0,
        {24, 20, 20},
        true}},
      {"qwen3-vl-8b",
       {"qwen3_vl",
        {4096, 36, 32, 8, 128, 12288, 151936, 262144},
        {27, 1152, 16, 4304, 16, {8, 16, 24}, 2304},
        5000000.0,
        {24, 20, 20},
        false}},
  };
  return kPresets;
}

// preprocessor_config.json as the models ship it (Qwen3-VL: patch 16, mean/std 0.5).
Json preprocessor_config(const ModelConfig& config) {
  const VisionConfig& v = config.multimodal->vision;
  const bool qwen3 = v.family == VisionFamily::kQwen3;
  Json j = {{"image_processor_type", "Qwen2VLImageProcessor"},
            {"patch_size", v.patch_size},
            {"temporal_patch_size", v.temporal_patch_size},
            {"merge_size", v.spatial_merge_size},
            {"do_resize", true},
            {"do_rescale", true},
            {"do_normalize", true},
            {"do_convert_rgb", true},
            {"resample", 3},
            {"rescale_factor", 1.0 / 255.0}};
  if (qwen3) {
    j["size"] = {{"shortest_edge", 65536}, {"longest_edge", 16777216}};
    j["image_mean"] = {0.5, 0.5, 0.5};
    j["image_std"] = {0.5, 0.5, 0.5};
  } else {
    j["size"] = {{"shortest_edge", 3136}, {"longest_edge", 12845056}};
    j["image_mean"] = {0.48145466, 0.4578275, 0.40821073};
    j["image_std"] = {0.26862954, 0.26130258, 0.27577711};
  }
  return j;
}

// video_preprocessor_config.json: transformers 5's video processor class of the family with its
// defaults (Qwen2VLVideoProcessor: every frame unless told an fps; Qwen3VLVideoProcessor: 2 fps),
// the patch layout of the model's vision tower.
Json video_preprocessor_config(const ModelConfig& config) {
  const VisionConfig& v = config.multimodal->vision;
  const bool qwen3 = v.family == VisionFamily::kQwen3;
  Json j = preprocessor_config(config);
  j.erase("image_processor_type");
  j["video_processor_type"] = qwen3 ? "Qwen3VLVideoProcessor" : "Qwen2VLVideoProcessor";
  j["do_sample_frames"] = qwen3;
  j["min_frames"] = 4;
  j["max_frames"] = 768;
  if (qwen3) {
    j["fps"] = 2;
    j["size"] = {{"shortest_edge", 128 * 32 * 32}, {"longest_edge", 32 * 32 * 768}};
  } else {
    j["size"] = {{"shortest_edge", 128 * 28 * 28}, {"longest_edge", 28 * 28 * 768}};
  }
  return j;
}

// Tiny/small vocabularies come from the tokenizer trained for them.
constexpr int kTinyVocab = 512;
constexpr int kSmallVocab = 768;  // the project corpus yields at most 885 BPE pieces

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names = {"tiny", "small"};
  for (const auto& [name, _] : named_presets()) names.push_back(name);
  for (const auto& [name, _] : vision_language_presets()) names.push_back(name);
  return names;
}

Json preset_config(const std::string& arch, const std::string& preset) {
  if (is_vision_language(arch) && is_small_preset(preset)) {
    RETAIN_CHECK(preset == "tiny", "init-model: ", arch, " has the tiny preset (not ", preset, ")");
    const bool qwen3 = arch == "qwen3_vl";
    // Ids of the tokenizer's user-defined symbols (vision_language_symbols): 3, 4, ...
    Json ids = {{"bos_token_id", 1},   {"eos_token_id", {2, 4}},     {"image_token_id", 7},
                {"video_token_id", 8}, {"vision_start_token_id", 5}, {"vision_end_token_id", 6}};
    Json j = vision_language_config(
        arch, Shape{64, 2, 4, 2, 16, 192, kTinyVocab, 8192},
        VisionShape{2, 32, 2, 64, 14, qwen3 ? std::vector<int64_t>{0} : std::vector<int64_t>{1},
                    64},
        1000000.0, qwen3 ? std::vector<int64_t>{4, 2, 2} : std::vector<int64_t>{2, 3, 3}, true,
        ids);
    j["torch_dtype"] = "float32";
    return j;
  }
  if (auto vl = vision_language_presets().find(preset); vl != vision_language_presets().end()) {
    const VisionLanguagePreset& p = vl->second;
    RETAIN_CHECK(arch.empty() || arch == p.arch, "init-model: preset ", preset, " is a ", p.arch,
                 " model but --arch ", arch, " was given");
    Json j = vision_language_config(p.arch, p.text, p.vision, p.rope_theta, p.mrope, p.tied,
                                    qwen_vision_token_ids());
    j["torch_dtype"] = "bfloat16";
    return j;
  }
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
    // "text_config.hidden_size": a key of a nested object (vision-language configs).
    Json* target = &config;
    for (size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.')) {
      const std::string outer = key.substr(0, dot);
      RETAIN_CHECK(target->contains(outer) && (*target)[outer].is_object(), "init-model: --set '",
                   set, "': config.json has no object '", outer, "'");
      target = &(*target)[outer];
      key = key.substr(dot + 1);
    }
    RETAIN_CHECK(target->contains(key), "init-model: --set '", set, "': config.json has no key '",
                 key, "'");
    Json parsed;
    try {
      parsed = Json::parse(value);
    } catch (const nlohmann::json::parse_error&) {
      parsed = value;  // a bare word is a string
    }
    (*target)[key] = parsed;
  }
  std::optional<SentencePieceTokenizer> tokenizer;
  const bool vision_language = config.contains("vision_config");
  if (!options.tokenizer.empty()) {
    RETAIN_CHECK(!vision_language,
                 "init-model: --tokenizer is for text models (a vision-language "
                 "model's tokenizer needs its vision tokens)");
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
      if (vision_language) sp.user_defined_symbols = vision_language_symbols();
      train_sentencepiece(tiny_corpus(4000, 1234), sp, tmp / "tokenizer.model");
      if (vision_language) {
        // The config's token ids assume where SentencePiece puts user-defined symbols.
        SentencePieceTokenizer trained(tmp / "tokenizer.model");
        const auto image = trained.token_to_id("<|image_pad|>");
        RETAIN_CHECK(image && *image == parsed.multimodal->image_token_id,
                     "init-model: the tiny tokenizer put <|image_pad|> at id ", image.value_or(-1),
                     ", not ", parsed.multimodal->image_token_id);
      }
    }
    write_json_file_atomic(tmp / "config.json", config);
    if (vision_language) {
      write_json_file_atomic(tmp / "preprocessor_config.json", preprocessor_config(parsed));
      write_json_file_atomic(tmp / "video_preprocessor_config.json",
                             video_preprocessor_config(parsed));
    }

    // A vision-language config keeps each part's initializer_range in its own sub-config.
    double std = config.value("initializer_range", 0.02);
    double vision_std = std;
    if (vision_language) {
      std = config["text_config"].value("initializer_range", 0.02);
      vision_std = config["vision_config"].value("initializer_range", 0.02);
    }
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
    if (vision_language) {
      for (const auto& [name, shape] : VisionTower::param_shapes(parsed.multimodal->vision)) {
        int64_t numel = 1;
        for (int64_t d : shape) numel *= d;
        total += numel;
        const std::string full = "model.visual." + name;
        uint64_t tensor_seed = options.seed;
        for (unsigned char c : full) tensor_seed = tensor_seed * 1099511628211ull + c;
        const bool bias = name.size() > 5 && name.substr(name.size() - 5) == ".bias";
        const bool norm = !bias && vision_norm_weight(name);
        writer.add_lazy(full, dtype, shape, [shape, dtype, vision_std, tensor_seed, bias, norm] {
          if (norm) return at::ones(shape, at::TensorOptions().dtype(dtype));
          if (bias) return at::zeros(shape, at::TensorOptions().dtype(dtype));
          auto gen = at::make_generator<at::CPUGeneratorImpl>(tensor_seed);
          return at::normal(0.0, vision_std, shape, gen).to(dtype);
        });
      }
    }
    log_info("init-model: ", options.preset, " ", parsed.model_type, ", ", total / 1e6,
             "M parameters, ", c10::toString(dtype), " -> ", out.string());
    writer.write(tmp / "model.safetensors");
  });
}

}  // namespace retain
