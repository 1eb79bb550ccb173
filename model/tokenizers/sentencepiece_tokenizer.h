// SentencePiece models (tokenizer.model) through libsentencepiece, and training new ones with its
// trainer (used for the project's own tiny models and the demo).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/tokenizers/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace retain {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // With only a tokenizer.model, transformers 5 applies tokenizer_config.json's add_bos_token
  // and add_eos_token (both read here when `config_file` exists; BOS alone without one).
  explicit SentencePieceTokenizer(const fs::path& model_file, const fs::path& config_file = {});
  ~SentencePieceTokenizer() override;

  std::vector<int64_t> encode(const std::string& text) const override;
  // SentencePiece drops control pieces (BOS/EOS) when decoding, whatever skip_special says.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special = false) const override;
  int64_t vocab_size() const override;
  std::optional<std::string> id_to_token(int64_t id) const override;
  std::optional<int64_t> token_to_id(const std::string& token) const override;
  std::optional<int64_t> bos_id() const override;
  std::optional<int64_t> eos_id() const override;
  const std::vector<int64_t>& prefix_ids() const override { return prefix_; }
  const std::vector<int64_t>& suffix_ids() const override { return suffix_; }
  std::string describe() const override;
  std::vector<std::string> explain() const override;

 private:
  std::string path_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::vector<int64_t> prefix_, suffix_;
  std::string special_source_;  // where prefix_/suffix_ come from, for explain()
};

struct SentencePieceTrainOptions {
  int vocab_size = 512;
  std::string model_type = "bpe";
  bool byte_fallback = true;
  // Split numbers into single digits (Llama-2's choice). Off, frequent numbers become pieces.
  bool split_digits = true;
  // Off, pieces may mix digits and letters ("e3" stays one piece).
  bool split_by_number = true;
  // Always pieces of their own, never merged with neighbours (e.g. punctuation, so "43." is
  // "43" "." and a number is the same piece before a full stop or a question mark). No commas.
  std::vector<std::string> user_defined_symbols;
  // Off: vocab_size is an upper bound, so a corpus with fewer distinct pieces still trains.
  bool hard_vocab_limit = true;
};

// Trains on `sentences` and writes the model to `out_file` atomically. Ids: unk 0, bos 1, eos 2.
void train_sentencepiece(const std::vector<std::string>& sentences,
                         const SentencePieceTrainOptions& options, const fs::path& out_file);

}  // namespace retain
