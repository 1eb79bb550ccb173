#include "model/model_config.h"

#include <algorithm>
#include <functional>
#include <set>

#include "core/error.h"
#include "model/vision/vision_config.h"

namespace retain {

namespace {

const std::set<std::string> kSupportedTypes = {"llama", "mistral",    "qwen2",
                                               "qwen3", "qwen2_5_vl", "qwen3_vl"};

// The text decoder family of a model type: a vision-language model's decoder is a Qwen2 or Qwen3
// decoder (its rotary layout aside).
std::string decoder_family(const std::string& model_type) {
  if (model_type == "qwen2_5_vl") return "qwen2";
  if (model_type == "qwen3_vl") return "qwen3";
  return model_type;
}

// rope_scaling (transformers 4.x) or rope_parameters (transformers 5.x), plus rope_theta that may
// sit at the top level or inside the dict.
RopeConfig parse_rope(const Json& j, int64_t max_positions, const std::string& where) {
  RopeConfig rope;
  Json params = Json::object();
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    if (j.contains(key) && !j[key].is_null()) {
      RETAIN_CHECK(j[key].is_object(), where, ": '", key, "' must be an object");
      params = j[key];
      break;
    }
  }
  std::string ctx = where + ": rope";
  RETAIN_CHECK(!params.contains("full_attention") && !params.contains("sliding_attention"), ctx,
               ": per-layer-type rope parameters are not supported");
  if (auto theta = json_get_optional<double>(params, "rope_theta", ctx)) {
    rope.theta = *theta;
  } else if (auto top = json_get_optional<double>(j, "rope_theta", where)) {
    rope.theta = *top;
  }
  auto partial = json_get_optional<double>(params, "partial_rotary_factor", ctx);
  if (!partial) partial = json_get_optional<double>(j, "partial_rotary_factor", where);
  RETAIN_CHECK(!partial || *partial == 1.0, where, ": partial_rotary_factor ", partial.value_or(1),
               " is not supported (only 1.0)");

  std::string type = "default";
  if (auto t = json_get_optional<std::string>(params, "rope_type", ctx)) {
    type = *t;
  } else if (auto t2 = json_get_optional<std::string>(params, "type", ctx)) {
    type = *t2;
  }
  // Qwen2-VL-era configs call their multimodal rotary "mrope": default frequencies, split among
  // the position axes by mrope_section (read with the vision config).
  if (type == "mrope") type = "default";
  auto original = json_get_optional<int64_t>(params, "original_max_position_embeddings", ctx);
  if (!original)
    original = json_get_optional<int64_t>(j, "original_max_position_embeddings", where);
  rope.original_max_position_embeddings = original.value_or(max_positions);

  if (type == "default") {
    rope.type = RopeType::kDefault;
  } else if (type == "linear" || type == "dynamic") {
    rope.type = type == "linear" ? RopeType::kLinear : RopeType::kDynamic;
    rope.factor = json_get<double>(params, "factor", ctx);
  } else if (type == "llama3") {
    rope.type = RopeType::kLlama3;
    rope.factor = json_get<double>(params, "factor", ctx);
    rope.low_freq_factor = json_get<double>(params, "low_freq_factor", ctx);
    rope.high_freq_factor = json_get<double>(params, "high_freq_factor", ctx);
    RETAIN_CHECK(original.has_value(), ctx, ": llama3 needs original_max_position_embeddings");
  } else if (type == "yarn") {
    rope.type = RopeType::kYarn;
    auto factor = json_get_optional<double>(params, "factor", ctx);
    // As transformers does: without a factor, it is the ratio of the two context lengths.
    rope.factor = factor ? *factor
                         : static_cast<double>(max_positions) /
                               static_cast<double>(rope.original_max_position_embeddings);
    rope.attention_factor = json_get_optional<double>(params, "attention_factor", ctx);
    rope.mscale = json_get_optional<double>(params, "mscale", ctx);
    rope.mscale_all_dim = json_get_optional<double>(params, "mscale_all_dim", ctx);
    // transformers treats 0/absent beta_fast/beta_slow as the defaults ("or 32", "or 1").
    if (auto b = json_get_optional<double>(params, "beta_fast", ctx); b && *b != 0)
      rope.beta_fast = *b;
    if (auto b = json_get_optional<double>(params, "beta_slow", ctx); b && *b != 0)
      rope.beta_slow = *b;
    rope.truncate = json_get_optional<bool>(params, "truncate", ctx).value_or(true);
  } else {
    fail(ctx, ": rope_type '", type,
         "' is not supported (expected default, linear, dynamic, llama3 or yarn)");
  }
  return rope;
}

std::vector<int64_t> parse_sliding_window(const Json& j, const ModelConfig& c,
                                          const std::string& family, const std::string& where) {
  std::vector<int64_t> windows(c.num_layers, 0);
  auto window = json_get_optional<int64_t>(j, "sliding_window", where);
  if (family == "mistral") {
    RETAIN_CHECK(!j.contains("layer_types"), where,
                 ": mistral with layer_types (alternating attention) is not supported");
    if (window) std::fill(windows.begin(), windows.end(), *window);
    return windows;
  }
  if (family == "qwen2" || family == "qwen3") {
    bool use = json_get_optional<bool>(j, "use_sliding_window", where).value_or(false);
    if (!use) return windows;
    RETAIN_CHECK(window.has_value(), where,
                 ": use_sliding_window is true but sliding_window is null");
    if (j.contains("layer_types") && !j["layer_types"].is_null()) {
      auto types = json_get<std::vector<std::string>>(j, "layer_types", where);
      RETAIN_CHECK(static_cast<int64_t>(types.size()) == c.num_layers, where, ": layer_types has ",
                   types.size(), " entries, expected num_hidden_layers = ", c.num_layers);
      for (int64_t l = 0; l < c.num_layers; ++l) {
        RETAIN_CHECK(types[l] == "full_attention" || types[l] == "sliding_attention", where,
                     ": layer_types[", l, "] = '", types[l], "' is not supported");
        if (types[l] == "sliding_attention") windows[l] = *window;
      }
    } else {
      int64_t first = json_get_optional<int64_t>(j, "max_window_layers", where).value_or(28);
      for (int64_t l = first; l < c.num_layers; ++l) windows[l] = *window;
    }
    return windows;
  }
  RETAIN_CHECK(!window.has_value() || family != "llama", where,
               ": sliding_window is not supported for llama");
  return windows;
}

}  // namespace

Activation parse_activation(const std::string& name, const std::string& where) {
  if (name == "silu" || name == "swish") return Activation::kSilu;
  if (name == "gelu") return Activation::kGelu;
  if (name == "gelu_pytorch_tanh" || name == "gelu_new") return Activation::kGeluTanh;
  if (name == "relu") return Activation::kRelu;
  fail(where, ": hidden_act '", name,
       "' is not supported (expected silu, gelu, gelu_pytorch_tanh, gelu_new or relu)");
}

const char* rope_type_name(RopeType type) {
  switch (type) {
    case RopeType::kDefault:
      return "default";
    case RopeType::kLinear:
      return "linear";
    case RopeType::kDynamic:
      return "dynamic";
    case RopeType::kLlama3:
      return "llama3";
    case RopeType::kYarn:
      return "yarn";
  }
  return "?";
}

c10::ScalarType parse_dtype_name(const std::string& name, const std::string& where) {
  if (name == "float32" || name == "fp32" || name == "f32") return c10::kFloat;
  if (name == "bfloat16" || name == "bf16") return c10::kBFloat16;
  if (name == "float16" || name == "fp16" || name == "f16" || name == "half") return c10::kHalf;
  fail(where, ": dtype '", name, "' is not supported (expected float32, bfloat16 or float16)");
}

ModelConfig ModelConfig::from_json(const Json& j, const std::string& where) {
  // Whatever the checks below miss still fails as retain::Error naming the file.
  return with_json_errors(where, [&]() -> ModelConfig {
    RETAIN_CHECK(j.is_object(), where, ": expected a JSON object");
    ModelConfig c;
    c.model_type = json_get<std::string>(j, "model_type", where);
    RETAIN_CHECK(kSupportedTypes.count(c.model_type), where, ": model_type '", c.model_type,
                 "' is not supported (expected llama, mistral, qwen2, qwen3, qwen2_5_vl or "
                 "qwen3_vl)");
    const std::string family = decoder_family(c.model_type);
    const bool vision_language = family != c.model_type;
    // A vision-language config keeps the decoder's keys in "text_config" (transformers 5) or, as
    // first released, at the top level beside "vision_config".
    const bool nested = vision_language && j.contains("text_config") && !j["text_config"].is_null();
    const Json& t = nested ? j["text_config"] : j;
    const std::string text_where = nested ? where + ": text_config" : where;
    RETAIN_CHECK(t.is_object(), text_where, ": expected a JSON object");
    for (const char* key : {"quantization_config", "num_experts", "num_local_experts"})
      RETAIN_CHECK(!j.contains(key) || j[key].is_null(), where, ": '", key, "' is not supported");
    RETAIN_CHECK(vision_language || !j.contains("vision_config") || j["vision_config"].is_null(),
                 where, ": 'vision_config' is not supported for model_type '", c.model_type, "'");
    if (auto tp = json_get_optional<int64_t>(t, "pretraining_tp", text_where))
      RETAIN_CHECK(*tp == 1, where, ": pretraining_tp ", *tp, " is not supported (only 1)");

    c.vocab_size = json_get<int64_t>(t, "vocab_size", text_where);
    c.hidden_size = json_get<int64_t>(t, "hidden_size", text_where);
    c.intermediate_size = json_get<int64_t>(t, "intermediate_size", text_where);
    c.num_layers = json_get<int64_t>(t, "num_hidden_layers", text_where);
    c.num_heads = json_get<int64_t>(t, "num_attention_heads", text_where);
    c.num_kv_heads =
        json_get_optional<int64_t>(t, "num_key_value_heads", text_where).value_or(c.num_heads);
    for (auto [name, value] : {std::pair{"vocab_size", c.vocab_size},
                               {"hidden_size", c.hidden_size},
                               {"intermediate_size", c.intermediate_size},
                               {"num_hidden_layers", c.num_layers},
                               {"num_attention_heads", c.num_heads},
                               {"num_key_value_heads", c.num_kv_heads}})
      RETAIN_CHECK(value > 0, where, ": ", name, " must be positive, found ", value);
    // The deepest released decoders have 126 layers (Llama 3.1 405B); per-layer tables are sized
    // from this count before any weight is read, so a corrupt one must not ask for gigabytes.
    constexpr int64_t kMaxLayers = 4096;
    RETAIN_CHECK(c.num_layers <= kMaxLayers, where, ": num_hidden_layers ", c.num_layers,
                 " is more than ", kMaxLayers, " (a corrupt config?)");
    RETAIN_CHECK(c.num_heads % c.num_kv_heads == 0, where, ": num_attention_heads ", c.num_heads,
                 " is not a multiple of num_key_value_heads ", c.num_kv_heads);
    auto head_dim = json_get_optional<int64_t>(t, "head_dim", text_where);
    if (!head_dim) {
      RETAIN_CHECK(c.hidden_size % c.num_heads == 0, where, ": hidden_size ", c.hidden_size,
                   " is not a multiple of num_attention_heads ", c.num_heads,
                   " and head_dim is absent");
      head_dim = c.hidden_size / c.num_heads;
    }
    c.head_dim = *head_dim;
    RETAIN_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0, where,
                 ": head_dim must be a positive even number, found ", c.head_dim);
    c.max_position_embeddings =
        json_get_optional<int64_t>(t, "max_position_embeddings", text_where).value_or(2048);
    c.rms_norm_eps = json_get_optional<double>(t, "rms_norm_eps", text_where).value_or(1e-6);
    c.hidden_act = json_get_optional<std::string>(t, "hidden_act", text_where).value_or("silu");
    c.activation = parse_activation(c.hidden_act, text_where);
    c.tie_word_embeddings =
        json_get_optional<bool>(t, "tie_word_embeddings", text_where).value_or(false);

    // Which projections carry a bias is fixed per family in transformers' model code.
    if (family == "llama" || family == "qwen3") {
      bool bias = json_get_optional<bool>(t, "attention_bias", text_where).value_or(false);
      c.qkv_bias = bias;
      c.o_bias = bias;
    } else if (family == "qwen2") {
      c.qkv_bias = true;
    }
    if (family == "llama")
      c.mlp_bias = json_get_optional<bool>(t, "mlp_bias", text_where).value_or(false);
    c.qk_norm = family == "qwen3";

    c.rope = parse_rope(t, c.max_position_embeddings, text_where);
    c.sliding_window = parse_sliding_window(t, c, family, text_where);

    if (t.contains("eos_token_id") && !t["eos_token_id"].is_null()) {
      if (t["eos_token_id"].is_array())
        c.eos_token_ids = json_get<std::vector<int64_t>>(t, "eos_token_id", text_where);
      else
        c.eos_token_ids = {json_get<int64_t>(t, "eos_token_id", text_where)};
    }
    c.bos_token_id = json_get_optional<int64_t>(t, "bos_token_id", text_where);
    auto dtype = json_get_optional<std::string>(t, "dtype", text_where);
    if (!dtype) dtype = json_get_optional<std::string>(t, "torch_dtype", text_where);
    if (!dtype && nested) dtype = json_get_optional<std::string>(j, "dtype", where);
    if (!dtype && nested) dtype = json_get_optional<std::string>(j, "torch_dtype", where);
    if (dtype) c.dtype = parse_dtype_name(*dtype, text_where);
    if (vision_language) {
      // transformers 5 keeps the tying flag at the top; earlier saves put it in text_config.
      if (nested && json_get_optional<bool>(j, "tie_word_embeddings", where).value_or(false))
        c.tie_word_embeddings = true;
      if (c.eos_token_ids.empty() && j.contains("eos_token_id") && !j["eos_token_id"].is_null())
        c.eos_token_ids = j["eos_token_id"].is_array()
                              ? json_get<std::vector<int64_t>>(j, "eos_token_id", where)
                              : std::vector<int64_t>{json_get<int64_t>(j, "eos_token_id", where)};
      static const Json kNoRope = Json::object();
      const Json* rope = &kNoRope;
      for (const char* key : {"rope_parameters", "rope_scaling"})
        if (t.contains(key) && t[key].is_object()) {
          rope = &t[key];
          break;
        }
      c.multimodal = std::make_shared<const MultimodalConfig>(
          parse_multimodal_config(c.model_type, j, *rope, c.head_dim, where));
      c.weight_prefix = "model.language_model.";
    }
    return c;
  });
}

ModelConfig ModelConfig::load(const fs::path& model_dir) {
  fs::path path = model_dir / "config.json";
  RETAIN_CHECK(fs::exists(path), model_dir.string(),
               ": no config.json (is this a HuggingFace model directory?)");
  return from_json(read_json_file(path), path.string());
}

ModelConfig ModelConfig::shard(int rank, int size, const std::string& where) const {
  RETAIN_CHECK(tp.size == 1, "internal: sharding an already sharded config");
  RETAIN_CHECK(size >= 1 && rank >= 0 && rank < size, "internal: tensor parallel rank ", rank,
               " of ", size);
  for (auto [what, count] : {std::pair{"num_attention_heads", num_heads},
                             {"num_key_value_heads", num_kv_heads},
                             {"intermediate_size", intermediate_size}})
    RETAIN_CHECK(count % size == 0, where, ": tensor parallel size ", size, " must divide ", what,
                 " (", count, "): each rank holds 1/", size,
                 " of every layer's heads; pick a size that divides ", num_heads, " query heads, ",
                 num_kv_heads, " KV heads and ", intermediate_size, " MLP rows");
  ModelConfig local = *this;
  local.num_heads /= size;
  local.num_kv_heads /= size;
  local.intermediate_size /= size;
  local.tp = {rank, size};
  return local;
}

ModelConfig ModelConfig::unsharded() const {
  ModelConfig whole = *this;
  whole.num_heads *= tp.size;
  whole.num_kv_heads *= tp.size;
  whole.intermediate_size *= tp.size;
  whole.tp = {};
  return whole;
}

std::string ModelConfig::fingerprint() const {
  if (tp.size > 1) return unsharded().fingerprint();
  std::string canonical = str_cat(
      model_type, "|", vocab_size, "|", hidden_size, "|", intermediate_size, "|", num_layers, "|",
      num_heads, "|", num_kv_heads, "|", head_dim, "|", rms_norm_eps, "|", hidden_act, "|",
      tie_word_embeddings, qkv_bias, o_bias, mlp_bias, qk_norm, "|", rope_type_name(rope.type), "|",
      rope.theta, "|", rope.factor, "|", rope.original_max_position_embeddings);
  for (int64_t w : sliding_window) canonical += str_cat(",", w);
  if (multimodal) canonical += "|" + multimodal_fingerprint(*multimodal);
  // FNV-1a 64: stable across platforms and runs, unlike std::hash.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : canonical) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace retain
