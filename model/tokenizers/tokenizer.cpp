#include "model/tokenizers/tokenizer.h"

#include "core/error.h"
#include "core/sha256.h"
#include "model/tokenizers/hf_tokenizer.h"
#include "model/tokenizers/sentencepiece_tokenizer.h"

namespace retain {

std::vector<int64_t> Tokenizer::encode_prompt(const std::string& text) const {
  std::vector<int64_t> ids = prefix_ids();
  auto body = encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

std::vector<int64_t> Tokenizer::encode_with_special_tokens(const std::string& text) const {
  std::vector<int64_t> ids = encode_prompt(text);
  ids.insert(ids.end(), suffix_ids().begin(), suffix_ids().end());
  return ids;
}

std::unique_ptr<Tokenizer> load_tokenizer(const fs::path& model_dir) {
  if (fs::exists(model_dir / "tokenizer.json")) return std::make_unique<HfTokenizer>(model_dir);
  if (fs::exists(model_dir / "tokenizer.model"))
    return std::make_unique<SentencePieceTokenizer>(model_dir / "tokenizer.model",
                                                    model_dir / "tokenizer_config.json");
  fail(model_dir.string(),
       ": no tokenizer found (expected tokenizer.json or tokenizer.model); give "
       "token ids with --prompt-ids instead of text");
}

std::string tokenizer_sha256(const fs::path& model_dir) {
  for (const char* name : {"tokenizer.json", "tokenizer.model"})
    if (fs::exists(model_dir / name)) return sha256_file_hex(model_dir / name);
  fail(model_dir.string(), ": no tokenizer found (expected tokenizer.json or tokenizer.model)");
}

}  // namespace retain
