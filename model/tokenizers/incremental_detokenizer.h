// The text of a growing token sequence, decoded a few tokens at a time instead of whole at every
// step (which made streaming and stop-string checks quadratic in the answer's length).
//
// Each push decodes a short window: the tokens since the last emission plus the token before
// them, once without the new tokens and once with them, and emits what the new ones add (the
// method of TGI's and vLLM's detokenizers). A decoder's first-token rules (SentencePiece's and
// Metaspace's dropped leading space, WordPiece's missing "##" join) act on the window's first
// token in both decodes and cancel out; bytes of an unfinished UTF-8 character (they decode to
// U+FFFD) wait until the character is whole, and so does a run of byte-fallback pieces until it
// ends (TextDecoder::holds). The emitted text equals decode(all tokens): tested on
// every tokenizer fixture and the real SmolLM2 tokenizer with random and real token sequences
// (tests/incremental_detokenizer_test.cpp). A decoder where it would not (the window's text is not
// a prefix of the longer window's) holds its text back; finish() then emits the rest of the whole
// decode.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace retain {

class Tokenizer;

using DecodeFn = std::function<std::string(const std::vector<int64_t>&)>;

// How ids become text: the tokenizer's decode, and which ids cannot end a window (`holds`):
// byte-fallback pieces ("<0xE3>": SentencePiece's and tokenizer.json's ByteFallback), because a
// run of them decodes as one group (HF's ByteFallback turns the whole run into U+FFFD when any
// byte of it is invalid, complete characters before the bad byte included); and, when special
// tokens are skipped, the skipped ones, because a run of bytes continues across them. Their text
// waits for the next token that is neither.
struct TextDecoder {
  DecodeFn decode;
  std::function<bool(int64_t)> holds;  // empty: every token may end a window
  explicit operator bool() const { return static_cast<bool>(decode); }
};
// `tokenizer` must outlive the result.
TextDecoder text_decoder(const Tokenizer& tokenizer, bool skip_special = false);

class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(TextDecoder decoder);

  // Appends a token; returns the text it completes (often "", e.g. inside a UTF-8 character).
  std::string push(int64_t token);
  // The end of the sequence: returns what decode(all tokens) has beyond text() (an unfinished
  // character's U+FFFD included, as decode gives it). Where text() is not a prefix of it (a
  // decoder outside the guarantee above; not seen on any tokenizer tested), returns "" and logs a
  // warning once: streamed text cannot be taken back.
  std::string finish();

  // Everything emitted so far.
  const std::string& text() const { return text_; }
  const std::vector<int64_t>& tokens() const { return tokens_; }

 private:
  TextDecoder decoder_;
  std::vector<int64_t> tokens_;
  size_t prefix_ = 0;  // the window's first token (its text was emitted already)
  size_t read_ = 0;    // the first token whose text is not emitted yet
  std::string text_;
};

// Whether a growing generation has produced one of `stop_strings`: searches only the text the
// last token added and the few bytes before it that a stop string could straddle.
class StopStringWatch {
 public:
  StopStringWatch(TextDecoder decoder, std::vector<std::string> stop_strings);
  // Appends a token; true once the text holds a stop string.
  bool push(int64_t token);
  const std::string& text() const { return detokenizer_.text(); }

 private:
  IncrementalDetokenizer detokenizer_;
  std::vector<std::string> stop_strings_;
  size_t longest_ = 0;
};

}  // namespace retain
