// What transformers 5 (5.23) builds from a model directory's tokenizer.json, so that retain's ids
// are the ids users get from `AutoTokenizer.from_pretrained(dir)`:
//   1. which tokenizer class AutoTokenizer instantiates, from tokenizer_config.json's
//      `tokenizer_class` and config.json's `model_type` (choose_tokenizer_class);
//   2. TokenizersBackend (PreTrainedTokenizerFast) uses tokenizer.json whole; every other class
//      keeps only tokenizer.json's vocab, merges and post-processor and installs its own
//      normalizer, pre-tokenizer, decoder and BPE options (rebuild_tokenizer_json);
//   3. the tokens tokenizer_config.json names (bos/eos/unk/pad/..., added_tokens_decoder) are
//      added when tokenizer.json lacks them, and its add_bos_token/add_eos_token are ignored
//      (tokenizer.json's post-processor decides BOS/EOS).
// Each rule names the transformers source it follows; tests compare with transformers itself.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/json.h"

namespace retain {

struct ModelTypeTokenizerClass {
  const char* model_type;
  const char* tokenizer_class;  // "TokenizersBackend" when the file is used as written
  bool hub_class_known_wrong;   // transformers distrusts tokenizer_config.json's class here
};
// transformers' model_type -> tokenizer class map (transformers_class_table.cpp).
const std::vector<ModelTypeTokenizerClass>& transformers_tokenizer_classes();

// The transformers classes that build their own pipeline (every other name means the file as
// written).
const std::vector<std::string>& transformers_rebuilding_classes();

struct TokenizerClassChoice {
  std::string name;    // without a "Fast" suffix; "TokenizersBackend" = tokenizer.json as written
  std::string reason;  // why AutoTokenizer picks it, for `tokenize --explain`
};

// `tokenizer_config` and `model_config` are the parsed tokenizer_config.json and config.json
// (empty objects when absent); `json_mentions_byte_level`: tokenizer.json's text contains
// "ByteLevel" (transformers' test for Llama-3-style files declared as LlamaTokenizer).
TokenizerClassChoice choose_tokenizer_class(const Json& tokenizer_config, const Json& model_config,
                                            bool json_mentions_byte_level);

// Rewrites `tokenizer_json` as class `name`'s constructor rebuilds it (normalizer, pre-tokenizer,
// decoder, BPE options, post-processor where the class forces one, added tokens) and returns a
// one-line description of the pipeline; std::nullopt when retain does not reproduce that class.
std::optional<std::string> rebuild_tokenizer_json(const std::string& name,
                                                  const Json& tokenizer_config,
                                                  Json& tokenizer_json);

// tokenizer_config.json's added_tokens_decoder tokens that tokenizer_json lacks, in id order (a
// token outside the vocabulary gets the next free id, as tokenizers assigns it).
void add_config_added_tokens(const Json& tokenizer_config, Json& tokenizer_json);

// The special tokens tokenizer_config.json names (and the class's defaults where it names none),
// added to tokenizer_json's added_tokens as special tokens when missing, as transformers'
// TokenizersBackend does at load; a token outside the vocabulary gets the next free id.
void add_named_special_tokens(const std::string& class_name, const Json& tokenizer_config,
                              Json& tokenizer_json);

}  // namespace retain
