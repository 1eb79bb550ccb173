// The incremental detokenizer (model/tokenizers/incremental_detokenizer.h) streams exactly the
// text a whole decode gives, on every kind of tokenizer here: byte-level BPE (Llama-3, Qwen2
// regexes), SentencePiece-style BPE with byte fallback (tokenizer.json), a SentencePiece .model,
// real Llama-2 and Llama-3 tokenizer files under several transformers classes, and the real
// SmolLM2 tokenizer; on real text (the fixtures' strings, many scripts and emoji), on random ids
// (bytes that never form a character, special tokens) and with special tokens skipped. Each
// token costs a decode of a few tokens, not of the answer so far.
#include <cstdio>
#include <random>

#include "core/json.h"
#include "model/tokenizers/byte_level.h"
#include "model/tokenizers/incremental_detokenizer.h"
#include "model/tokenizers/sentencepiece_tokenizer.h"
#include "model/tokenizers/tokenizer.h"
#include "test_util.h"

namespace retain {
namespace {

using testing::fixture_dir;

struct Named {
  std::string name;
  std::shared_ptr<const Tokenizer> tokenizer;
};

std::vector<Named> tokenizers() {
  std::vector<Named> out;
  for (const char* name : {"bytelevel_llama3", "bytelevel_qwen2", "spm_bpe_bytefallback"})
    out.push_back({name, load_tokenizer(fixture_dir("tokenizers") / name)});
  out.push_back({"sentencepiece_model",
                 std::make_shared<SentencePieceTokenizer>(fixture_dir("sp") / "tokenizer.model")});
  for (const char* name : {"llama2_as_llama", "llama2_as_llama_fast_legacy", "llama2_as_gemma",
                           "llama3_as_gpt2", "llama3_as_qwen2"})
    out.push_back({name, load_tokenizer(fixture_dir("tokenizer_semantics") / name)});
  if (testing::fixture_skipped("smollm2").empty())
    out.push_back({"smollm2", load_tokenizer(fixture_dir("smollm2") / "model")});
  return out;
}

std::vector<std::string> real_texts() {
  std::vector<std::string> texts;
  for (const auto& c : read_json_file(fixture_dir("tokenizers") / "cases.json"))
    texts.push_back(c["text"].get<std::string>());
  return texts;
}

// Streams `ids` token by token; checks that what was emitted is at every step a prefix of the
// whole decode of the tokens so far and at the end equals it; returns the tokens decoded in all.
int64_t expect_streams_exactly(const Tokenizer& tok, const std::vector<int64_t>& ids,
                               bool skip_special, const std::string& what) {
  int64_t decoded = 0;
  TextDecoder counting = text_decoder(tok, skip_special);
  counting.decode = [&](const std::vector<int64_t>& window) {
    decoded += static_cast<int64_t>(window.size());
    return tok.decode(window, skip_special);
  };
  IncrementalDetokenizer stream(counting);
  std::string streamed;
  std::vector<int64_t> so_far;
  for (int64_t id : ids) {
    streamed += stream.push(id);
    so_far.push_back(id);
    EXPECT_EQ(streamed, stream.text()) << what;
    // Checked on every 7th token only: a whole decode per token is what the class avoids.
    if (so_far.size() % 7 == 0) {
      const std::string whole = tok.decode(so_far, skip_special);
      if (whole.compare(0, streamed.size(), streamed) != 0) {
        size_t i = 0;
        while (i < whole.size() && i < streamed.size() && whole[i] == streamed[i]) ++i;
        std::string pieces;
        for (size_t j = so_far.size() >= 8 ? so_far.size() - 8 : 0; j < so_far.size(); ++j)
          pieces += " " + tok.id_to_token(so_far[j]).value_or("?");
        ADD_FAILURE() << what << " (skip_special " << skip_special
                      << "): streamed text is not a prefix after " << so_far.size()
                      << " tokens; at byte " << i << " the whole decode has "
                      << Json(whole.substr(i >= 12 ? i - 12 : 0, 24)).dump() << ", the stream "
                      << Json(streamed.substr(i >= 12 ? i - 12 : 0, 24)).dump()
                      << "; last tokens:" << pieces;
        return 0;
      }
    }
  }
  streamed += stream.finish();
  EXPECT_EQ(streamed, tok.decode(ids, skip_special)) << what;
  return decoded;
}

TEST(IncrementalDetokenizer, StreamsExactlyTheWholeDecodeOfRealText) {
  const auto texts = real_texts();
  ASSERT_GE(texts.size(), 300u);
  for (const auto& [name, tok] : tokenizers()) {
    SCOPED_TRACE(name);
    // The fixture's strings joined into long answers, so windows cross every kind of boundary.
    for (size_t start = 0; start < texts.size(); start += 60) {
      std::string text;
      for (size_t i = start; i < std::min(texts.size(), start + 60); ++i) text += texts[i] + "\n";
      const auto ids = tok->encode(text);
      for (bool skip : {false, true}) {
        const int64_t decoded = expect_streams_exactly(*tok, ids, skip, name);
        // Linear: each token is decoded a few times (its window, once before and once with it),
        // not once per later token.
        EXPECT_LE(decoded, 8 * static_cast<int64_t>(ids.size()) + 64) << name;
      }
    }
  }
}

TEST(IncrementalDetokenizer, StreamsExactlyOnRandomIdsAndSpecialTokens) {
  std::mt19937_64 rng(20261127);
  for (const auto& [name, tok] : tokenizers()) {
    SCOPED_TRACE(name);
    const int64_t vocab = tok->vocab_size();
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<int64_t> ids;
      for (int i = 0; i < 150; ++i) {
        // Mostly low ids (bytes, byte-level pieces, specials), the rest anywhere.
        const int64_t id = static_cast<int64_t>(rng() % (rng() % 2 ? 300 : vocab));
        ids.push_back(std::min(id, vocab - 1));
      }
      for (bool skip : {false, true})
        expect_streams_exactly(*tok, ids, skip, name + " trial " + std::to_string(trial));
    }
  }
}

TEST(IncrementalDetokenizer, HoldsAnUnfinishedCharacterUntilItsLastByte) {
  // "é" and "😀" one byte per token, through a byte-level tokenizer (its byte alphabet) and
  // through byte-fallback pieces: nothing is emitted while a character is incomplete, then the
  // whole character at once.
  const std::vector<uint8_t> bytes = {'a', 0xC3, 0xA9, 0xF0, 0x9F, 0x98, 0x80, 'b'};
  auto byte_level = load_tokenizer(fixture_dir("tokenizers") / "bytelevel_llama3");
  auto fallback = load_tokenizer(fixture_dir("tokenizers") / "spm_bpe_bytefallback");
  for (const auto* tok : {byte_level.get(), fallback.get()}) {
    SCOPED_TRACE(tok->describe());
    IncrementalDetokenizer stream(text_decoder(*tok));
    std::string out;
    for (size_t i = 0; i < bytes.size(); ++i) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "<0x%02X>", bytes[i]);
      const auto id = tok == byte_level.get() ? tok->token_to_id(byte_to_char(bytes[i]))
                                              : tok->token_to_id(hex);
      ASSERT_TRUE(id.has_value()) << i;
      const std::string emitted = stream.push(*id);
      const bool inside = i == 1 || (i >= 3 && i <= 5);  // a character's bytes before its last
      if (inside) {
        EXPECT_EQ(emitted, "") << "emitted part of a character at byte " << i;
      }
      out += emitted;
    }
    out += stream.finish();
    EXPECT_EQ(out,
              "a\xC3\xA9\xF0\x9F\x98\x80"
              "b");
  }
}

TEST(StopStringWatch, FindsAStopStringStraddlingTokensAndIgnoresEarlierText) {
  auto tok = load_tokenizer(fixture_dir("tokenizers") / "bytelevel_qwen2");
  const auto ids = tok->encode("The answer is 42.\nQuestion: next");
  StopStringWatch watch(text_decoder(*tok), {"\nQuestion:", "never"});
  size_t stopped_at = ids.size();
  for (size_t i = 0; i < ids.size(); ++i)
    if (watch.push(ids[i])) {
      stopped_at = i;
      break;
    }
  ASSERT_LT(stopped_at, ids.size());
  // It stops at the token that completes the stop string, not before.
  const std::string before =
      tok->decode(std::vector<int64_t>(ids.begin(), ids.begin() + stopped_at));
  EXPECT_EQ(before.find("\nQuestion:"), std::string::npos);
  EXPECT_NE(watch.text().find("\nQuestion:"), std::string::npos);
}

}  // namespace
}  // namespace retain
