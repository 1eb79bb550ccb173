// HF tokenizers' tokenizer.json (BPE models: Llama-3 / Qwen byte-level, Llama-2 / Mistral
// SentencePiece-style with byte fallback) plus tokenizer_config.json and config.json, giving the
// ids transformers 5's AutoTokenizer gives (transformers_classes.h: which class it builds, and
// the pipeline a class rebuilds), then the tokenizers library's encode and decode id for id:
//   added tokens split out of the raw text (non-normalized ones first, then normalized ones
//   after normalization), honouring lstrip / rstrip / single_word; normalizer; pre-tokenizer;
//   BPE per pre-token; decoders chained over the token strings.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/tokenizers/bpe.h"
#include "model/tokenizers/pipeline.h"
#include "model/tokenizers/tokenizer.h"

namespace retain {

class HfTokenizer : public Tokenizer {
 public:
  // Reads model_dir/tokenizer.json and, when present, model_dir/tokenizer_config.json.
  explicit HfTokenizer(const fs::path& model_dir);
  ~HfTokenizer() override;

  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids, bool skip_special = false) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::optional<std::string> id_to_token(int64_t id) const override;
  std::optional<int64_t> token_to_id(const std::string& token) const override;
  std::optional<int64_t> bos_id() const override { return bos_id_; }
  std::optional<int64_t> eos_id() const override { return eos_id_; }
  const std::vector<int64_t>& prefix_ids() const override { return prefix_; }
  const std::vector<int64_t>& suffix_ids() const override { return suffix_; }
  std::string describe() const override;
  std::vector<std::string> explain() const override { return explanation_; }

 private:
  struct AddedToken {
    int64_t id;
    std::string content;
    bool special, lstrip, rstrip, single_word, normalized;
  };
  struct Segment {
    std::string text;
    int64_t added_id;  // -1: ordinary text
    bool at_start;
  };
  // The constructor's work; JSON library errors become retain::Error naming the file.
  void load(const fs::path& model_dir);
  // prefix_/suffix_ from tokenizer.json's post-processor (TemplateProcessing, Bert/Roberta
  // processing, or a Sequence of them).
  void read_post_processor(const Json& post_processor);
  // Splits `segment` (ordinary text) around the added tokens with `normalized == normalized`.
  void split_added(const Segment& segment, bool normalized, std::vector<Segment>& out) const;
  std::optional<int64_t> resolve_token(const Json& value, const std::string& where) const;

  std::string where_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<TokenDecoder> decoder_;
  std::vector<AddedToken> added_;
  std::unordered_map<int64_t, size_t> added_by_id_;
  std::unordered_map<std::string, size_t> added_by_content_;
  // [normalized][first byte] -> indices into added_ (longest first): the scan checks only the
  // added tokens that can start at a position.
  std::array<std::vector<size_t>, 256> added_by_first_byte_[2];
  int64_t vocab_size_ = 0;
  std::optional<int64_t> bos_id_, eos_id_;
  std::vector<int64_t> prefix_, suffix_;
  bool split_special_ = false;  // tokenizer_config.json's split_special_tokens
  std::vector<std::string> explanation_;
};

}  // namespace retain
