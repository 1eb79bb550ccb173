// Tokenizer directories laid out as real ones are, against what transformers 5's AutoTokenizer
// gives for them (tests/fixtures/make_tokenizer_semantics.py): the class it builds from
// tokenizer_class + model_type, the pipeline that class rebuilds, BOS/EOS from tokenizer.json's
// post-processor whatever add_bos_token/add_eos_token say, special tokens named only in
// tokenizer_config.json, split_special_tokens; ids with and without special tokens, decoding.
#include <algorithm>
#include <map>

#include "core/json.h"
#include "model/tokenizers/tokenizer.h"
#include "model/tokenizers/transformers_classes.h"
#include "test_util.h"

namespace retain {
namespace {

fs::path semantics_dir() { return testing::fixture_dir("tokenizer_semantics"); }

class TokenizerSemantics : public ::testing::TestWithParam<std::string> {};

const Json& cases() {
  static const Json all = read_json_file(semantics_dir() / "cases.json");
  return all;
}

// gtest lists the tests before the fixture exists, so the names are fixed here; a test checks
// they are the fixture's.
std::vector<std::string> names() {
  return {"llama2_as_llama",
          "llama2_as_llama_fast_legacy",
          "llama2_as_llama_no_prefix",
          "llama2_model_type_mistral",
          "llama2_model_type_phi3",
          "llama2_eos_template",
          "llama2_as_llama_eos_template",
          "llama2_add_bos_false",
          "llama2_add_eos_true",
          "llama2_null_post_processor",
          "llama2_specials_only_in_config",
          "llama2_split_special",
          "llama2_as_codellama",
          "llama2_as_gemma",
          "llama3_as_gpt2",
          "llama3_as_qwen2",
          "llama3_model_type_qwen3_5",
          "llama3_generic_model_type_qwen2",
          "llama3_generic_model_type_qwen3",
          "llama3_declared_llama",
          "llama3_as_gpt_neox",
          "llama3_as_cohere",
          "llama3_no_class_model_type_gpt2",
          "llama3_as_qwen2_added_gap"};
}

TEST_P(TokenizerSemantics, IdsAndDecodingMatchAutoTokenizer) {
  const Json* dir = nullptr;
  for (const auto& d : cases()["dirs"])
    if (d["name"] == GetParam()) dir = &d;
  ASSERT_NE(dir, nullptr) << GetParam() << " is not in the fixture";
  auto tok = load_tokenizer(semantics_dir() / GetParam());
  // The class transformers built is the one retain names in its explanation.
  const auto explanation = tok->explain();
  ASSERT_GE(explanation.size(), 2u);
  const auto cls = (*dir)["class"].get<std::string>();
  EXPECT_NE(explanation[1].find(cls), std::string::npos)
      << explanation[1] << " (AutoTokenizer: " << cls << ")";
  size_t mismatches = 0;
  for (const auto& c : (*dir)["cases"]) {
    const auto text = c["text"].get<std::string>();
    const auto ids = c["ids"].get<std::vector<int64_t>>();
    auto check = [&](const auto& got, const auto& want, const char* what) {
      if (got != want && ++mismatches <= 8)
        ADD_FAILURE() << GetParam() << ": " << what << " of " << Json(text).dump() << ": "
                      << Json(got).dump() << ", AutoTokenizer: " << Json(want).dump();
    };
    check(tok->encode_with_special_tokens(text), ids, "ids");
    check(tok->encode(text), c["ids_no_special"].get<std::vector<int64_t>>(),
          "ids without specials");
    check(tok->decode(ids), c["decoded"].get<std::string>(), "decode");
    check(tok->decode(ids, /*skip_special=*/true), c["decoded_skip"].get<std::string>(),
          "decode skipping specials");
  }
  EXPECT_EQ(mismatches, 0u);
}

INSTANTIATE_TEST_SUITE_P(Dirs, TokenizerSemantics, ::testing::ValuesIn(names()),
                         [](const auto& info) { return info.param; });

// A generation prompt is the full encoding without the post-processor's trailing EOS (a prompt
// ending in EOS would ask the model to go on after the end); BOS stays.
TEST(TokenizerSemanticsFixture, GenerationPromptsLeaveTheTrailingEosOut) {
  auto tok = load_tokenizer(semantics_dir() / "llama2_eos_template");
  const auto full = tok->encode_with_special_tokens("Hello world");
  ASSERT_EQ(tok->suffix_ids(), std::vector<int64_t>{*tok->eos_id()});
  EXPECT_EQ(full.back(), *tok->eos_id());
  EXPECT_EQ(tok->encode_prompt("Hello world"), std::vector<int64_t>(full.begin(), full.end() - 1));
  EXPECT_EQ(tok->encode_prompt("Hello world").front(), *tok->bos_id());
}

// retain's copy of transformers' tables (model_type -> class, distrusted model types, classes
// that rebuild) is the installed transformers': a version bump that changes them fails here.
TEST(TokenizerSemanticsFixture, ClassTableMatchesTransformers) {
  Json table = read_json_file(semantics_dir() / "class_table.json");
  std::map<std::string, std::string> want_map =
      table["map"].get<std::map<std::string, std::string>>();
  std::map<std::string, std::string> got_map;
  std::vector<std::string> got_distrusted;
  for (const auto& e : transformers_tokenizer_classes()) {
    got_map[e.model_type] = e.tokenizer_class;
    if (e.hub_class_known_wrong) got_distrusted.push_back(e.model_type);
  }
  EXPECT_EQ(got_map, want_map);
  std::sort(got_distrusted.begin(), got_distrusted.end());
  EXPECT_EQ(got_distrusted, table["distrusted"].get<std::vector<std::string>>());
  auto rebuilding = transformers_rebuilding_classes();
  std::sort(rebuilding.begin(), rebuilding.end());
  EXPECT_EQ(rebuilding, table["rebuilding"].get<std::vector<std::string>>());
}

TEST(TokenizerSemanticsFixture, EveryDirectoryIsTested) {
  std::vector<std::string> in_fixture;
  for (const auto& d : cases()["dirs"]) in_fixture.push_back(d["name"].get<std::string>());
  EXPECT_EQ(in_fixture, names());
}

}  // namespace
}  // namespace retain
