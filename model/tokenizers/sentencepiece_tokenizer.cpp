#include "model/tokenizers/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <unordered_map>

#include "core/error.h"
#include "core/json.h"
#include "core/utf8.h"

namespace retain {

SentencePieceTokenizer::SentencePieceTokenizer(const fs::path& model_file,
                                               const fs::path& config_file)
    : path_(model_file.string()),
      processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  auto status = processor_->Load(path_);
  RETAIN_CHECK(status.ok(), path_, ": not a valid SentencePiece model: ", status.ToString());
  bool add_bos = true, add_eos = false;
  special_source_ = "BOS before the text (no tokenizer_config.json)";
  if (!config_file.empty() && fs::exists(config_file)) {
    Json config = read_json_file(config_file);
    const std::string where = config_file.string();
    with_json_errors(where, [&] {
      add_bos = json_get_optional<bool>(config, "add_bos_token", where).value_or(false);
      add_eos = json_get_optional<bool>(config, "add_eos_token", where).value_or(false);
    });
    special_source_ = str_cat(where, ": add_bos_token ", add_bos ? "true" : "false",
                              ", add_eos_token ", add_eos ? "true" : "false",
                              " (transformers 5 applies them when there is no tokenizer.json)");
  }
  if (add_bos && bos_id()) prefix_.push_back(*bos_id());
  if (add_eos && eos_id()) suffix_.push_back(*eos_id());
}

std::vector<std::string> SentencePieceTokenizer::explain() const {
  return {describe(), "pipeline: SentencePiece (libsentencepiece) on tokenizer.model",
          "special tokens: " + special_source_};
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::vector<int64_t> SentencePieceTokenizer::encode(const std::string& text) const {
  size_t bad = find_invalid_utf8(text);
  RETAIN_CHECK(bad == std::string::npos, "tokenizer: input is not valid UTF-8 (byte offset ", bad,
               ")");
  std::vector<int> ids;
  auto status = processor_->Encode(text, &ids);
  RETAIN_CHECK(status.ok(), path_, ": encode failed: ", status.ToString());
  return {ids.begin(), ids.end()};
}

std::string SentencePieceTokenizer::decode(const std::vector<int64_t>& ids,
                                           bool /*skip_special*/) const {
  std::vector<int> narrow;
  narrow.reserve(ids.size());
  for (int64_t id : ids) {
    RETAIN_CHECK(id >= 0 && id < vocab_size(), path_, ": cannot decode id ", id,
                 " (vocabulary has ", vocab_size(), " pieces)");
    narrow.push_back(static_cast<int>(id));
  }
  std::string text;
  auto status = processor_->Decode(narrow, &text);
  RETAIN_CHECK(status.ok(), path_, ": decode failed: ", status.ToString());
  return text;
}

int64_t SentencePieceTokenizer::vocab_size() const { return processor_->GetPieceSize(); }

std::optional<std::string> SentencePieceTokenizer::id_to_token(int64_t id) const {
  if (id < 0 || id >= vocab_size()) return std::nullopt;
  return processor_->IdToPiece(static_cast<int>(id));
}

std::optional<int64_t> SentencePieceTokenizer::token_to_id(const std::string& token) const {
  int id = processor_->PieceToId(token);
  // PieceToId answers unk for anything unknown; only the unk piece itself maps to it truly.
  if (id == processor_->unk_id() && token != processor_->IdToPiece(id)) return std::nullopt;
  return id;
}

std::string SentencePieceTokenizer::describe() const {
  return str_cat(path_, " (SentencePiece, ", vocab_size(), " pieces)");
}

std::optional<int64_t> SentencePieceTokenizer::bos_id() const {
  int id = processor_->bos_id();
  return id >= 0 ? std::optional<int64_t>(id) : std::nullopt;
}

std::optional<int64_t> SentencePieceTokenizer::eos_id() const {
  int id = processor_->eos_id();
  return id >= 0 ? std::optional<int64_t>(id) : std::nullopt;
}

namespace {

class VectorSentenceIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorSentenceIterator(const std::vector<std::string>& sentences)
      : sentences_(sentences) {}
  bool done() const override { return index_ >= sentences_.size(); }
  void Next() override { ++index_; }
  const std::string& value() const override { return sentences_[index_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& sentences_;
  size_t index_ = 0;
};

}  // namespace

void train_sentencepiece(const std::vector<std::string>& sentences,
                         const SentencePieceTrainOptions& options, const fs::path& out_file) {
  RETAIN_CHECK(!sentences.empty(), "train_sentencepiece: no training sentences");
  std::unordered_map<std::string, std::string> args = {
      {"model_type", options.model_type},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"byte_fallback", options.byte_fallback ? "true" : "false"},
      {"character_coverage", "1.0"},
      {"unk_id", "0"},
      {"bos_id", "1"},
      {"eos_id", "2"},
      {"pad_id", "-1"},
      {"split_digits", options.split_digits ? "true" : "false"},
      {"hard_vocab_limit", options.hard_vocab_limit ? "true" : "false"},
      // Keep whitespace runs (code, indentation) as Llama-2's tokenizer does.
      {"remove_extra_whitespaces", "false"},
      {"normalization_rule_name", "identity"},
      {"num_threads", "1"},  // deterministic
      {"minloglevel", "2"},
  };
  args["split_by_number"] = options.split_by_number ? "true" : "false";
  if (!options.user_defined_symbols.empty()) {
    std::string symbols;
    for (const auto& sym : options.user_defined_symbols) {
      RETAIN_CHECK(!sym.empty() && sym.find(',') == std::string::npos,
                   "train_sentencepiece: user-defined symbol '", sym, "' is empty or has a comma");
      symbols += (symbols.empty() ? "" : ",") + sym;
    }
    args["user_defined_symbols"] = symbols;
  }
  VectorSentenceIterator it(sentences);
  std::string model;
  auto status = sentencepiece::SentencePieceTrainer::Train(args, &it, &model);
  RETAIN_CHECK(status.ok(), "SentencePiece training failed: ", status.ToString());
  write_file_atomic(out_file, [&](const fs::path& tmp) {
    std::ofstream out(tmp, std::ios::binary);
    out.write(model.data(), static_cast<std::streamsize>(model.size()));
    out.close();
    RETAIN_CHECK(out.good(), tmp.string(), ": write failed");
  });
}

}  // namespace retain
