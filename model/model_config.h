// The decoder's hyper-parameters, read from a HuggingFace config.json (llama, mistral, qwen2,
// qwen3). Every key that changes the computation is either honoured or refused with a clear error;
// nothing is silently ignored.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"

namespace retain {

enum class RopeType { kDefault, kLinear, kDynamic, kLlama3, kYarn };
enum class Activation { kSilu, kGelu, kGeluTanh, kRelu };

struct RopeConfig {
  RopeType type = RopeType::kDefault;
  double theta = 10000.0;
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  // llama3 / yarn: the pretraining context length the scaling is relative to.
  int64_t original_max_position_embeddings = 0;
  // yarn
  std::optional<double> attention_factor;
  std::optional<double> mscale;
  std::optional<double> mscale_all_dim;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  bool truncate = true;
};

struct MultimodalConfig;  // model/vision/vision_config.h

// Tensor parallelism: process `rank` of a group of `size` holds one contiguous slice of every
// layer's query heads, KV heads and MLP rows (a ModelConfig's counts are then that slice's).
struct TensorParallelShard {
  int rank = 0;
  int size = 1;
};

struct ModelConfig {
  // llama | mistral | qwen2 | qwen3, or a vision-language model whose decoder is a qwen2
  // (qwen2_5_vl) or qwen3 (qwen3_vl) decoder.
  std::string model_type;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  Activation activation = Activation::kSilu;
  std::string hidden_act = "silu";
  bool tie_word_embeddings = false;
  bool qkv_bias = false;
  bool o_bias = false;
  bool mlp_bias = false;
  bool qk_norm = false;  // qwen3: RMSNorm over head_dim on q and k before RoPE
  RopeConfig rope;
  std::vector<int64_t> sliding_window;  // per layer; 0 = full attention
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> bos_token_id;
  c10::ScalarType dtype = c10::kFloat;  // the checkpoint's dtype ("torch_dtype"/"dtype")
  // Where the decoder's weights sit in the checkpoint: "model." (text models, Qwen2.5-VL as
  // first released) or "model.language_model." (vision-language models as transformers 5 saves
  // them); Decoder::load settles it from the checkpoint's names.
  std::string weight_prefix = "model.";
  // Set for vision-language models: the vision tower and the multimodal rotary layout.
  std::shared_ptr<const MultimodalConfig> multimodal;

  // Set by shard(): this config's num_heads, num_kv_heads and intermediate_size are one slice.
  TensorParallelShard tp;

  int64_t kv_groups() const { return num_heads / num_kv_heads; }
  // Every KV head of the model, and the model's index of this slice's first one.
  int64_t global_kv_heads() const { return num_kv_heads * tp.size; }
  int64_t kv_head_offset() const { return num_kv_heads * tp.rank; }
  // The slice of process `rank` of `size`: heads, KV heads and MLP rows divided by `size` (a
  // clear error naming `where` when one does not divide). Needs an unsharded config.
  ModelConfig shard(int rank, int size, const std::string& where) const;
  // The whole model's shapes (itself when not sharded).
  ModelConfig unsharded() const;

  static ModelConfig from_json(const Json& json, const std::string& where);
  static ModelConfig load(const fs::path& model_dir);

  // A stable hash of everything that defines the computation (hex sha-like string); gate files
  // carry it so they are never loaded onto a different base model. A shard hashes as the whole.
  std::string fingerprint() const;
};

const char* rope_type_name(RopeType type);
// config.json "hidden_act" -> Activation; `where` names the file in the error.
Activation parse_activation(const std::string& name, const std::string& where);
c10::ScalarType parse_dtype_name(const std::string& name, const std::string& where);

}  // namespace retain
