// The tokenizer interface and the loader that picks the implementation from a model directory:
// tokenizer.json (HF tokenizers) when present, else tokenizer.model (SentencePiece).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/fs.h"

namespace retain {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Text -> ids without added BOS/EOS (special tokens written in the text are recognised where
  // the format has them). Invalid UTF-8 is an error naming the byte offset.
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<int64_t>& ids, bool skip_special = false) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::optional<std::string> id_to_token(int64_t id) const = 0;
  virtual std::optional<int64_t> token_to_id(const std::string& token) const = 0;
  virtual std::optional<int64_t> bos_id() const = 0;
  virtual std::optional<int64_t> eos_id() const = 0;
  // The special tokens the tokenizer puts before and after a text in its full encoding (HF: the
  // post-processor's template, e.g. Llama's BOS before; some files also append EOS).
  virtual const std::vector<int64_t>& prefix_ids() const = 0;
  virtual const std::vector<int64_t>& suffix_ids() const = 0;
  // A short description for logs: "tokenizer.json (BPE, 128256 tokens)".
  virtual std::string describe() const = 0;
  // Lines for `tokenize --explain`: which pipeline runs and why, where BOS/EOS come from.
  virtual std::vector<std::string> explain() const { return {describe()}; }

  // The tokenizer's full encoding, what HF's tokenizer(text)["input_ids"] gives:
  // prefix + encode(text) + suffix. Token shards store this.
  std::vector<int64_t> encode_with_special_tokens(const std::string& text) const;
  // A prompt for generation: prefix + encode(text), never the suffix (a prompt that ends in EOS
  // asks the model to continue after the end of the text).
  std::vector<int64_t> encode_prompt(const std::string& text) const;
};

// tokenizer.json if present, else tokenizer.model; a clear error when there is neither.
std::unique_ptr<Tokenizer> load_tokenizer(const fs::path& model_dir);

// SHA-256 of the file load_tokenizer() reads: token shards record it so data tokenized with one
// tokenizer is never fed to a model with another.
std::string tokenizer_sha256(const fs::path& model_dir);

}  // namespace retain
