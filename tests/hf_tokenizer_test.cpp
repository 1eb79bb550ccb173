// tokenizer.json tokenizers against HF `tokenizers`: ids, ids with the BOS the post-processor
// adds, and decoding (with and without special tokens) on 452 strings for three tokenizers the
// fixture script trains (byte-level BPE with the Llama-3 regex, with the Qwen2 regex + NFC, and
// SentencePiece-style BPE with byte fallback). Fixtures: tests/fixtures/make_hf_tokenizers.py.
#include <fstream>

#include "core/json.h"
#include "model/tokenizers/hf_tokenizer.h"
#include "model/tokenizers/pipeline.h"
#include "test_util.h"

namespace retain {
namespace {

using testing::TempDir;

const std::vector<std::string> kTokenizers = {"bytelevel_llama3", "bytelevel_qwen2",
                                              "spm_bpe_bytefallback"};

fs::path tok_dir(const std::string& name) { return testing::fixture_dir("tokenizers") / name; }

class HfTokenizerParity : public ::testing::TestWithParam<std::string> {};

TEST_P(HfTokenizerParity, IdsAndDecodingMatchTokenizers) {
  auto tok = load_tokenizer(tok_dir(GetParam()));
  Json cases = read_json_file(testing::fixture_dir("tokenizers") / "cases.json");
  ASSERT_GE(cases.size(), 300u);
  size_t mismatches = 0;
  for (const auto& c : cases) {
    const auto text = c["text"].get<std::string>();
    const Json& expected = c[GetParam()];
    auto ids = tok->encode(text);
    auto want = expected["ids"].get<std::vector<int64_t>>();
    if (ids != want && ++mismatches <= 10) ADD_FAILURE() << "ids differ for " << Json(text).dump();
    EXPECT_EQ(tok->encode_prompt(text), expected["ids_with_special"].get<std::vector<int64_t>>())
        << Json(text).dump();
    EXPECT_EQ(tok->decode(want), expected["decoded"].get<std::string>()) << Json(text).dump();
    EXPECT_EQ(tok->decode(want, /*skip_special=*/true),
              expected["decoded_skip_special"].get<std::string>())
        << Json(text).dump();
  }
  EXPECT_EQ(mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, HfTokenizerParity, ::testing::ValuesIn(kTokenizers),
                         [](const auto& info) { return info.param; });

TEST(HfTokenizer, SpecialTokensAndConfig) {
  auto llama = load_tokenizer(tok_dir("bytelevel_llama3"));
  EXPECT_EQ(llama->prefix_ids(), std::vector<int64_t>{*llama->token_to_id("<|begin_of_text|>")});
  EXPECT_TRUE(llama->suffix_ids().empty());
  EXPECT_EQ(llama->bos_id(), llama->token_to_id("<|begin_of_text|>"));
  EXPECT_EQ(llama->eos_id(), llama->token_to_id("<|eot_id|>"));
  auto qwen = load_tokenizer(tok_dir("bytelevel_qwen2"));
  EXPECT_TRUE(qwen->prefix_ids().empty());
  EXPECT_EQ(qwen->eos_id(), qwen->token_to_id("<|im_end|>"));
  auto spm = load_tokenizer(tok_dir("spm_bpe_bytefallback"));
  EXPECT_EQ(spm->prefix_ids(), std::vector<int64_t>{1});
  EXPECT_EQ(spm->bos_id(), 1);
  EXPECT_EQ(spm->id_to_token(3), "<0x00>");
}

TEST(HfTokenizer, DecodeOfEncodeIsIdentityForByteLevel) {
  auto tok = load_tokenizer(tok_dir("bytelevel_llama3"));
  for (const char* s : {"", "  leading", "tabs\t\tand\nnewlines\r\n",
                        "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 "
                        "\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7",
                        "x = {\"a\": [1, 2, 3]}  # comment", "<|eot_id|>inside<|start_header_id|>"})
    EXPECT_EQ(tok->decode(tok->encode(s)), s);
}

// A copy of a fixture tokenizer dir whose tokenizer.json a test may rewrite.
fs::path copy_with(const TempDir& dir, const std::function<void(Json&)>& edit) {
  fs::path out = dir / "tok";
  fs::create_directories(out);
  Json j = read_json_file(tok_dir("bytelevel_qwen2") / "tokenizer.json");
  edit(j);
  write_json_file_atomic(out / "tokenizer.json", j);
  return out;
}

TEST(HfTokenizer, BadInputGivesClearErrors) {
  TempDir dir;
  fs::path d = dir / "broken";
  fs::create_directories(d);
  std::ofstream(d / "tokenizer.json") << "{\"model\": {";
  EXPECT_ERROR_CONTAINS(load_tokenizer(d), "tokenizer.json: invalid JSON");
  EXPECT_ERROR_CONTAINS(
      load_tokenizer(copy_with(dir, [](Json& j) { j["model"]["type"] = "WordPiece"; })),
      "type 'WordPiece' is not supported");
  EXPECT_ERROR_CONTAINS(load_tokenizer(copy_with(dir,
                                                 [](Json& j) {
                                                   j["normalizer"] = {{"type", "BertNormalizer"}};
                                                 })),
                        "normalizer type 'BertNormalizer' is not supported");
  EXPECT_ERROR_CONTAINS(
      load_tokenizer(copy_with(dir,
                               [](Json& j) {
                                 j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] =
                                     "(unclosed";
                               })),
      "regex does not compile");
  EXPECT_ERROR_CONTAINS(
      load_tokenizer(copy_with(dir, [](Json& j) { j["model"]["merges"][0] = 7; })),
      "merge #0 must be");
  EXPECT_ERROR_CONTAINS(
      load_tokenizer(copy_with(dir, [](Json& j) { j["model"]["dropout"] = 0.1; })),
      "dropout is not supported");
  EXPECT_ERROR_CONTAINS(load_tokenizer(copy_with(dir, [](Json& j) { j.erase("model"); })),
                        "missing 'model'");
  auto tok = load_tokenizer(tok_dir("bytelevel_qwen2"));
  EXPECT_ERROR_CONTAINS(tok->encode("ok \xc3"), "not valid UTF-8 (byte offset 3)");
  EXPECT_ERROR_CONTAINS(tok->decode({99999}), "cannot decode id 99999");
}

// tokenizer_config.json and the post-processor are read as carefully as tokenizer.json: each
// malformed part is named.
TEST(HfTokenizer, BadConfigAndTemplateGiveClearErrors) {
  TempDir dir;
  auto with_config = [&](const std::string& config) {
    fs::path d = copy_with(dir, [](Json&) {});
    write_text_file_atomic(d / "tokenizer_config.json", config);
    return d;
  };
  EXPECT_ERROR_CONTAINS(load_tokenizer(with_config(R"({"tokenizer_class": "Qwen2Tokenizer",
                                     "added_tokens_decoder": {"x": {"content": "<a>"}}})")),
                        "added_tokens_decoder key 'x' is not an id");
  EXPECT_ERROR_CONTAINS(
      load_tokenizer(with_config(R"({"added_tokens_decoder": {"7": {"special": true}}})")),
      "added_tokens_decoder[7] has no content");
  EXPECT_ERROR_CONTAINS(load_tokenizer(with_config("[1, 2]")), "expected a JSON object");
  EXPECT_ERROR_CONTAINS(load_tokenizer(with_config("{\"split_special_tokens\": 3}")),
                        "split_special_tokens");
  fs::remove(dir / "tok" / "tokenizer_config.json");
  // A template "<b> $A" whose special_tokens map is `specials`.
  auto with_template = [&](const Json& specials) {
    return copy_with(dir, [&](Json& j) {
      j["post_processor"] = {{"type", "TemplateProcessing"},
                             {"single", Json::array({{{"SpecialToken", {{"id", "<b>"}}}},
                                                     {{"Sequence", {{"id", "A"}}}}})},
                             {"special_tokens", specials}};
    });
  };
  EXPECT_ERROR_CONTAINS(
      load_tokenizer(with_template(Json::object())),
      "template names special token '<b>', which its special_tokens map does not define");
  EXPECT_ERROR_CONTAINS(load_tokenizer(with_template({{"<b>", {{"ids", {99999999}}}}})),
                        "special token '<b>' has id 99999999, outside the vocabulary");
}

TEST(HfTokenizer, MergesAsStringsOrPairsGiveTheSameIds) {
  TempDir dir;
  fs::path d = copy_with(dir, [](Json& j) {
    for (auto& m : j["model"]["merges"])
      m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  });
  auto a = load_tokenizer(d);
  auto b = load_tokenizer(tok_dir("bytelevel_qwen2"));
  const std::string text = "The quick brown fox jumps over 1234567 lazy dogs, doesn't it?";
  EXPECT_EQ(a->encode(text), b->encode(text));
}

// Pre-tokenizers of seven real families (GPT-2, Llama-3, Qwen2, o200k, Tekken, DeepSeek-Coder,
// DeepSeek-V3) on characters assigned in Unicode 15-16, against HF `tokenizers` (Unicode 16):
// with PCRE2 tables older than Unicode 16 these letters and digits count as "other" and split
// differently (fixtures: tests/fixtures/make_split_cases.py).
TEST(HfTokenizer, PreTokenizersMatchTokenizersOnUnicode16Scripts) {
  Json all = read_json_file(testing::fixture_dir("split_cases") / "split_cases.json");
  ASSERT_GE(all["families"].size(), 7u);
  ASSERT_GE(all["characters"].size(), 30u);
  for (const auto& family : all["families"]) {
    const auto name = family["name"].get<std::string>();
    auto pre = make_pre_tokenizer(family["pre_tokenizer"], name);
    size_t mismatches = 0;
    for (const auto& c : family["cases"]) {
      std::vector<PreToken> pieces;
      pre->split(PreToken{c["text"].get<std::string>(), true}, pieces);
      std::vector<std::string> got;
      for (const auto& p : pieces) got.push_back(p.text);
      const auto want = c["pieces"].get<std::vector<std::string>>();
      if (got != want && ++mismatches <= 5)
        ADD_FAILURE() << name << ": " << c["text"].dump() << " splits as " << Json(got).dump()
                      << ", HF tokenizers: " << Json(want).dump();
    }
    EXPECT_EQ(mismatches, 0u) << name << " (" << family["cases"].size() << " texts)";
  }
}

// A single_word added token is cut out only between non-word characters, as HF decides them
// (Rust regex \w on Unicode 16): the same ids for letters, digits, marks, joiners and No
// characters old and new.
TEST(HfTokenizer, SingleWordAddedTokensUseHfWordCharacters) {
  const fs::path root = testing::fixture_dir("split_cases");
  Json all = read_json_file(root / "split_cases.json");
  auto tok = load_tokenizer(root / "single_word");
  ASSERT_GE(all["single_word"].size(), 100u);
  size_t mismatches = 0, cut_out = 0;
  const int64_t zq = *tok->token_to_id("zq");
  for (const auto& c : all["single_word"]) {
    const auto want = c["ids"].get<std::vector<int64_t>>();
    cut_out += std::count(want.begin(), want.end(), zq) > 0;
    if (tok->encode(c["text"].get<std::string>()) != want && ++mismatches <= 5)
      ADD_FAILURE() << c["text"].dump() << ": ids differ from HF tokenizers";
  }
  EXPECT_EQ(mismatches, 0u);
  // Both outcomes occur, so the cases tell word characters from the rest.
  EXPECT_GT(cut_out, 20u);
  EXPECT_LT(cut_out, all["single_word"].size() - 20);
}

}  // namespace
}  // namespace retain
