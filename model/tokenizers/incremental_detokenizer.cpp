#include "model/tokenizers/incremental_detokenizer.h"

#include <algorithm>
#include <mutex>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "model/tokenizers/tokenizer.h"

namespace retain {

namespace {

const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD: what an incomplete character decodes to

bool ends_with_replacement(const std::string& s) {
  return s.size() >= kReplacement.size() &&
         s.compare(s.size() - kReplacement.size(), kReplacement.size(), kReplacement) == 0;
}

}  // namespace

TextDecoder text_decoder(const Tokenizer& tokenizer, bool skip_special) {
  TextDecoder d;
  d.decode = [&tokenizer, skip_special](const std::vector<int64_t>& ids) {
    return tokenizer.decode(ids, skip_special);
  };
  d.holds = [&tokenizer, skip_special](int64_t id) {
    const auto piece = tokenizer.id_to_token(id);
    if (piece && piece->size() == 6 && piece->compare(0, 3, "<0x") == 0 && piece->back() == '>')
      return true;
    return skip_special && tokenizer.decode({id}, true).empty();
  };
  return d;
}

IncrementalDetokenizer::IncrementalDetokenizer(TextDecoder decoder) : decoder_(std::move(decoder)) {
  RETAIN_CHECK(static_cast<bool>(decoder_), "IncrementalDetokenizer: no decode function");
}

std::string IncrementalDetokenizer::push(int64_t token) {
  tokens_.push_back(token);
  // A run of byte pieces is decided as a group: wait for the token after it.
  if (decoder_.holds && decoder_.holds(token)) return "";
  const auto begin = tokens_.begin() + static_cast<std::ptrdiff_t>(prefix_);
  const std::string before = decoder_.decode(
      std::vector<int64_t>(begin, tokens_.begin() + static_cast<std::ptrdiff_t>(read_)));
  const std::string after = decoder_.decode(std::vector<int64_t>(begin, tokens_.end()));
  // Nothing new yet, an unfinished character, or a decoder that rewrote the window's start.
  if (after.size() <= before.size() || ends_with_replacement(after) ||
      after.compare(0, before.size(), before) != 0)
    return "";
  std::string added = after.substr(before.size());
  text_ += added;
  prefix_ = read_;
  read_ = tokens_.size();
  return added;
}

std::string IncrementalDetokenizer::finish() {
  const std::string whole = decoder_.decode(tokens_);
  prefix_ = read_ = tokens_.size();
  if (whole.compare(0, text_.size(), text_) != 0) {
    // Never seen on the tokenizers tested; what was streamed cannot be taken back, so the stream
    // keeps it (a server must not fail a request for it) and says so once.
    static std::once_flag warned;
    std::call_once(warned, [] {
      log_warn(
          "incremental detokenization: a streamed text differs from the whole decode (a "
          "tokenizer decoder outside the tested ones)");
    });
    return "";
  }
  std::string rest = whole.substr(text_.size());
  text_ = whole;
  return rest;
}

StopStringWatch::StopStringWatch(TextDecoder decoder, std::vector<std::string> stop_strings)
    : detokenizer_(std::move(decoder)), stop_strings_(std::move(stop_strings)) {
  for (const auto& s : stop_strings_) longest_ = std::max(longest_, s.size());
}

bool StopStringWatch::push(int64_t token) {
  const size_t old_size = detokenizer_.text().size();
  if (detokenizer_.push(token).empty()) return false;
  const std::string& text = detokenizer_.text();
  const size_t from = old_size >= longest_ ? old_size - longest_ + 1 : 0;
  for (const auto& s : stop_strings_)
    if (!s.empty() && text.find(s, from) != std::string::npos) return true;
  return false;
}

}  // namespace retain
