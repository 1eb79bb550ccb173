#include "model/tokenizers/transformers_classes.h"

#include <algorithm>
#include <map>
#include <unordered_set>

namespace retain {

namespace {

const std::unordered_set<std::string>& rebuilding_classes() {
  static const std::unordered_set<std::string> names(transformers_rebuilding_classes().begin(),
                                                     transformers_rebuilding_classes().end());
  return names;
}

const char* const kBackend = "TokenizersBackend";

std::string strip_fast(std::string name) {
  if (name.size() > 4 && name.compare(name.size() - 4, 4, "Fast") == 0)
    name.resize(name.size() - 4);
  return name;
}

// transformers' tokenizer_class_from_name for the names a tokenizer_config.json carries.
std::string class_from_name(const std::string& declared) {
  const std::string name = strip_fast(declared);
  return rebuilding_classes().count(name) ? name : kBackend;
}

bool is_generic(const std::string& name) {
  return name == kBackend || name == "PythonBackend" || name == "PreTrainedTokenizer" ||
         name == "MistralCommonBackend";
}

const ModelTypeTokenizerClass* find_model_type(const std::string& model_type) {
  for (const auto& entry : transformers_tokenizer_classes())
    if (model_type == entry.model_type) return &entry;
  return nullptr;
}

std::string string_or_empty(const Json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_string()) return "";
  return object[key].get<std::string>();
}

std::optional<bool> optional_bool(const Json& config, const char* key) {
  if (!config.is_object() || !config.contains(key) || !config[key].is_boolean())
    return std::nullopt;
  return config[key].get<bool>();
}

// A special token's text from tokenizer_config.json: a string, {"content": ...}, or null.
std::optional<std::string> token_content(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value["content"].is_string())
    return value["content"].get<std::string>();
  return std::nullopt;
}

// ---- the pipelines the classes install (their constructors, transformers 5.23) ----

Json split_regex(const std::string& pattern) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", pattern}}},
          {"behavior", "Isolated"},
          {"invert", false}};
}
Json byte_level(bool add_prefix_space, bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", add_prefix_space},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}
Json sequence(const char* key, Json parts) {
  return {{"type", "Sequence"}, {key, std::move(parts)}};
}
Json replace(const std::string& from, const std::string& to) {
  return {{"type", "Replace"}, {"pattern", {{"String", from}}}, {"content", to}};
}
// A template that puts `bos` before the text (CodeLlama forces it).
Json bos_template(const std::string& bos, int64_t id) {
  return {{"type", "TemplateProcessing"},
          {"single", Json::array({{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
                                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
          {"pair", Json::array()},
          {"special_tokens", {{bos, {{"id", bos}, {"ids", {id}}, {"tokens", {bos}}}}}}};
}

const char* const kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen3_5Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// BPE options the classes construct with (the vocabulary and merges stay tokenizer.json's).
void set_bpe_options(Json& model, bool byte_fallback, bool fuse_unk,
                     const std::optional<std::string>& unk) {
  model["byte_fallback"] = byte_fallback;
  model["fuse_unk"] = fuse_unk;
  model["unk_token"] = unk ? Json(*unk) : Json();
  model["ignore_merges"] = false;
  model["dropout"] = nullptr;
  model["continuing_subword_prefix"] = nullptr;
  model["end_of_word_suffix"] = nullptr;
}

// The class's default for a named special token, used when tokenizer_config.json has no key.
std::optional<std::string> class_default(const std::string& class_name, const std::string& key) {
  static const std::map<std::string, std::map<std::string, std::string>> defaults = {
      {"LlamaTokenizer", {{"unk_token", "<unk>"}, {"bos_token", "<s>"}, {"eos_token", "</s>"}}},
      {"Qwen2Tokenizer",
       {{"unk_token", "<|endoftext|>"},
        {"eos_token", "<|endoftext|>"},
        {"pad_token", "<|endoftext|>"}}},
      {"GPT2Tokenizer",
       {{"unk_token", "<|endoftext|>"},
        {"bos_token", "<|endoftext|>"},
        {"eos_token", "<|endoftext|>"}}},
      {"GPTNeoXTokenizer",
       {{"unk_token", "<|endoftext|>"},
        {"bos_token", "<|endoftext|>"},
        {"eos_token", "<|endoftext|>"},
        {"pad_token", "<|padding|>"}}},
      {"GemmaTokenizer",
       {{"unk_token", "<unk>"},
        {"bos_token", "<bos>"},
        {"eos_token", "<eos>"},
        {"pad_token", "<pad>"},
        {"mask_token", "<mask>"}}},
      {"CohereTokenizer",
       {{"unk_token", "<UNK>"},
        {"bos_token", "<BOS_TOKEN>"},
        {"eos_token", "<|END_OF_TURN_TOKEN|>"},
        {"pad_token", "<PAD>"},
        {"cls_token", "<CLS>"},
        {"sep_token", "<SEP>"},
        {"mask_token", "<MASK_TOKEN>"}}}};
  // Classes whose constructors share a sibling's defaults.
  static const std::map<std::string, std::string> same_as = {
      {"CodeLlamaTokenizer", "LlamaTokenizer"},
      {"Qwen3_5Tokenizer", "Qwen2Tokenizer"},
      {"CodeGenTokenizer", "GPT2Tokenizer"}};
  auto alias = same_as.find(class_name);
  auto c = defaults.find(alias == same_as.end() ? class_name : alias->second);
  if (c == defaults.end()) return std::nullopt;
  auto t = c->second.find(key);
  if (t == c->second.end()) return std::nullopt;
  return t->second;
}

// The named special token `key` as the class sees it: tokenizer_config.json's value (null means
// none), else the class default.
std::optional<std::string> named_token(const std::string& class_name, const Json& config,
                                       const std::string& key) {
  if (config.is_object() && config.contains(key)) return token_content(config[key]);
  return class_default(class_name, key);
}

// Adds one token to tokenizer.json's added_tokens as tokenizers' AddedVocabulary does: its id is
// the model vocabulary's id of the same text, else the next free id.
void add_token(Json& tokenizer_json, Json token) {
  Json& added = tokenizer_json["added_tokens"];
  if (!added.is_array()) added = Json::array();
  const std::string content = token.value("content", "");
  for (const auto& t : added)
    if (t.value("content", "") == content) return;
  const Json& vocab = tokenizer_json["model"]["vocab"];
  int64_t id;
  if (vocab.is_object() && vocab.contains(content) && vocab[content].is_number_integer()) {
    id = vocab[content].get<int64_t>();
  } else {
    const auto vocab_size = static_cast<int64_t>(vocab.is_object() ? vocab.size() : 0);
    int64_t max_added = -1;
    for (const auto& t : added)
      if (t.contains("id") && t["id"].is_number_integer())
        max_added = std::max(max_added, t["id"].get<int64_t>());
    id = max_added >= vocab_size ? max_added + 1 : vocab_size;
  }
  token["id"] = id;
  added.push_back(std::move(token));
}

Json added_token_json(const std::string& content, bool special, const Json& flags) {
  auto flag = [&](const char* key, bool fallback) {
    return flags.is_object() && flags.contains(key) && flags[key].is_boolean()
               ? flags[key].get<bool>()
               : fallback;
  };
  return {{"content", content},
          {"single_word", flag("single_word", false)},
          {"lstrip", flag("lstrip", false)},
          {"rstrip", flag("rstrip", false)},
          {"normalized", flag("normalized", !special)},
          {"special", flag("special", special)}};
}

}  // namespace

TokenizerClassChoice choose_tokenizer_class(const Json& tokenizer_config, const Json& model_config,
                                            bool json_mentions_byte_level) {
  // transformers/models/auto/tokenization_auto.py, AutoTokenizer.from_pretrained.
  const std::string declared = string_or_empty(tokenizer_config, "tokenizer_class");
  const std::string hub =
      declared.empty() ? string_or_empty(model_config, "tokenizer_class") : declared;
  const std::string model_type = string_or_empty(model_config, "model_type");
  const ModelTypeTokenizerClass* entry = find_model_type(model_type);
  const std::string mapped = entry ? strip_fast(entry->tokenizer_class) : "";
  const std::string where = "tokenizer_class '" + hub + "', model_type '" + model_type + "'";

  if (strip_fast(hub) == "LlamaTokenizer" && !(entry && entry->hub_class_known_wrong) &&
      json_mentions_byte_level)
    return {kBackend, where + ": a byte-level file declared as LlamaTokenizer (Llama-3 style)"};
  if (!hub.empty() && entry && mapped != strip_fast(hub)) {
    if (!is_generic(mapped)) {
      const std::string name = class_from_name(entry->hub_class_known_wrong ? mapped : hub);
      if (name != kBackend)
        return {name,
                where + ": model_type '" + model_type + "' maps to " + mapped +
                    (entry->hub_class_known_wrong ? ", and transformers distrusts the hub's class"
                                                  : ", the declared class wins")};
    }
    return {kBackend, where + ": the model_type maps to " + mapped + ", not to the declared class"};
  }
  if (!hub.empty()) {
    const std::string name = class_from_name(hub);
    return {name,
            where + (name == kBackend ? ": a generic or unknown class" : ": the declared class")};
  }
  if (entry && !is_generic(mapped))
    return {class_from_name(mapped),
            where + ": no declared class; the model_type maps to " + mapped};
  return {kBackend, where + ": no declared class and no class for the model_type"};
}

std::optional<std::string> rebuild_tokenizer_json(const std::string& name, const Json& config,
                                                  Json& tj) {
  RETAIN_CHECK(tj.contains("model") && tj["model"].is_object(), "tokenizer.json: missing 'model'");
  Json& model = tj["model"];
  std::string description;
  const auto unk = [&] { return named_token(name, config, "unk_token"); };
  if (name == "LlamaTokenizer" || name == "CodeLlamaTokenizer") {
    // models/llama/tokenization_llama.py; legacy=null counts as not legacy (getattr(.., True)).
    const bool prefix = optional_bool(config, "add_prefix_space").value_or(true);
    const bool legacy = name == "LlamaTokenizer" && optional_bool(config, "legacy").value_or(false);
    const std::string scheme = !prefix ? "never" : legacy ? "always" : "first";
    const bool strip = name == "CodeLlamaTokenizer" || prefix;
    set_bpe_options(model, true, true, name == "CodeLlamaTokenizer" ? unk() : std::nullopt);
    tj["normalizer"] = nullptr;
    tj["pre_tokenizer"] = {{"type", "Metaspace"},
                           {"replacement", "\u2581"},
                           {"prepend_scheme", scheme},
                           {"split", false}};
    Json decoders =
        Json::array({replace("\u2581", " "), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}});
    if (strip) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    tj["decoder"] = sequence("decoders", decoders);
    description = "no normalizer, Metaspace (prepend " + scheme +
                  ", no split), byte fallback, no unk" + (strip ? "" : ", decoder without Strip");
    if (name == "CodeLlamaTokenizer") {
      // Its constructor passes add_bos_token=True, so update_post_processor installs "<s> $A".
      const std::string bos = named_token(name, config, "bos_token").value_or("<s>");
      const Json& vocab = model["vocab"];
      RETAIN_CHECK(vocab.contains(bos), "tokenizer.json: CodeLlama's BOS '", bos,
                   "' is not in the vocabulary");
      tj["post_processor"] = bos_template(bos, vocab[bos].get<int64_t>());
      description = "no normalizer, Metaspace (prepend first), byte fallback, post-processor '" +
                    bos + " $A'";
    }
  } else if (name == "Qwen2Tokenizer" || name == "Qwen3_5Tokenizer") {
    // models/qwen2/tokenization_qwen2.py, models/qwen3_5/tokenization_qwen3_5.py
    const bool prefix = optional_bool(config, "add_prefix_space").value_or(false);
    set_bpe_options(model, false, false, std::nullopt);
    tj["normalizer"] = {{"type", "NFC"}};
    tj["pre_tokenizer"] =
        sequence("pretokenizers",
                 Json::array({split_regex(name == "Qwen2Tokenizer" ? kQwen2Regex : kQwen3_5Regex),
                              byte_level(prefix, false)}));
    tj["decoder"] = byte_level(true, true);
    description = std::string("NFC, Split(the ") +
                  (name == "Qwen2Tokenizer" ? "Qwen2" : "Qwen3.5") + " regex) + ByteLevel" +
                  (prefix ? " with a prefix space" : "");
  } else if (name == "GPT2Tokenizer" || name == "CodeGenTokenizer" || name == "GPTNeoXTokenizer") {
    // models/gpt2, models/codegen, models/gpt_neox: ByteLevel with GPT-2's regex.
    const bool prefix = optional_bool(config, "add_prefix_space").value_or(false);
    set_bpe_options(model, false, false, std::nullopt);
    const bool neox = name == "GPTNeoXTokenizer";
    tj["normalizer"] = neox ? Json{{"type", "NFC"}} : Json();
    tj["pre_tokenizer"] = byte_level(prefix, true);
    tj["decoder"] = byte_level(true, true);
    description = std::string(neox ? "NFC, " : "no normalizer, ") + "ByteLevel (GPT-2 regex" +
                  (prefix ? ", prefix space" : "") + ")";
    if (neox) {
      // Its constructor ends with update_post_processor() and add_bos/eos_token were dropped
      // from the config: the template is "$A", no special tokens.
      tj["post_processor"] = nullptr;
      description += ", no special tokens added (post-processor '$A')";
    }
  } else if (name == "GemmaTokenizer") {
    // models/gemma/tokenization_gemma.py
    set_bpe_options(model, true, true, unk());
    tj["normalizer"] = replace(" ", "\u2581");
    tj["pre_tokenizer"] = {{"type", "Split"},
                           {"pattern", {{"String", " "}}},
                           {"behavior", "MergedWithPrevious"},
                           {"invert", false}};
    tj["decoder"] = sequence(
        "decoders",
        Json::array({replace("\u2581", " "), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}}));
    description = "Replace(' ' -> '\u2581'), Split(' ', merged with previous), byte fallback";
  } else if (name == "CohereTokenizer") {
    // models/cohere/tokenization_cohere.py
    const bool prefix = optional_bool(config, "add_prefix_space").value_or(false);
    set_bpe_options(model, false, false, std::nullopt);
    tj["normalizer"] = {{"type", "NFC"}};
    tj["pre_tokenizer"] = sequence(
        "pretokenizers",
        Json::array({{{"type", "Digits"}, {"individual_digits", true}}, byte_level(prefix, true)}));
    tj["decoder"] = byte_level(prefix, true);
    description = "NFC, single digits, ByteLevel (GPT-2 regex)";
  } else {
    return std::nullopt;
  }

  // Rebuilt classes start with an empty added vocabulary and take tokenizer_config.json's
  // added_tokens_decoder when it exists (tokenizer.json's added_tokens otherwise).
  if (config.is_object() && config.contains("added_tokens_decoder")) {
    tj["added_tokens"] = Json::array();
    add_config_added_tokens(config, tj);
    description += "; added tokens from tokenizer_config.json";
  }
  return description;
}

void add_config_added_tokens(const Json& config, Json& tj) {
  if (!config.is_object() || !config.contains("added_tokens_decoder")) return;
  const Json& decoder = config["added_tokens_decoder"];
  RETAIN_CHECK(decoder.is_object(),
               "tokenizer_config.json: added_tokens_decoder must be an object");
  std::vector<std::pair<int64_t, Json>> tokens;
  for (const auto& [id, token] : decoder.items()) {
    int64_t key = 0;
    try {
      key = std::stoll(id);
    } catch (const std::exception&) {
      fail("tokenizer_config.json: added_tokens_decoder key '", id, "' is not an id");
    }
    tokens.emplace_back(key, token);
  }
  // In id order, as transformers adds them.
  std::sort(tokens.begin(), tokens.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [id, token] : tokens) {
    auto content = token_content(token);
    RETAIN_CHECK(content.has_value(), "tokenizer_config.json: added_tokens_decoder[", id,
                 "] has no content");
    add_token(
        tj, added_token_json(*content, token.is_object() && token.value("special", false), token));
  }
}

void add_named_special_tokens(const std::string& class_name, const Json& config, Json& tj) {
  // tokenization_utils_tokenizers.py, TokenizersBackend.__init__: named tokens in
  // SPECIAL_TOKENS_ATTRIBUTES order, then the extra special tokens; strings become special,
  // non-normalized tokens, {"content": ...} objects keep their flags.
  static const char* const kNamed[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                       "pad_token", "cls_token", "mask_token"};
  std::vector<std::pair<std::string, Json>> wanted;
  for (const char* key : kNamed) {
    if (auto content = named_token(class_name, config, key))
      wanted.emplace_back(*content,
                          config.is_object() && config.contains(key) ? config[key] : Json());
  }
  for (const char* key : {"extra_special_tokens", "additional_special_tokens"}) {
    if (!config.is_object() || !config.contains(key) || !config[key].is_array()) continue;
    for (const auto& t : config[key])
      if (auto content = token_content(t)) wanted.emplace_back(*content, t);
  }
  for (auto& [content, flags] : wanted) {
    Json token = added_token_json(content, true, flags);
    token["special"] = true;
    add_token(tj, std::move(token));
  }
}

}  // namespace retain
