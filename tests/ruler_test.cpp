// RULER's tasks (data/ruler.h): every sample fits its length under the counting function and
// fills most of it; needles, chains, word counts and documents are where the references say;
// samples are reproducible and independent of how many are drawn; the string-match metrics and
// the prediction clean-up are RULER's; bad sources fail naming the file.
#include <algorithm>
#include <fstream>
#include <regex>

#include "data/ruler.h"
#include "eval/sweep.h"
#include "model/tokenizers/tokenizer.h"
#include "test_util.h"

namespace retain {
namespace {

// A stand-in tokenizer: one token per 4 bytes, rounded up (English BPE is about that).
int64_t bytes_over_four(const std::string& text) {
  return static_cast<int64_t>((text.size() + 3) / 4);
}

int64_t occurrences(const std::string& text, const std::string& what) {
  int64_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Ruler, EverySampleFitsItsLengthAndFillsMostOfIt) {
  const RulerSources none;
  for (int64_t length : {1024, 4096})
    for (const auto& task : ruler_task_names()) {
      if (!ruler_task_available(task, none)) continue;
      const auto samples = make_ruler(task, length, 3, 7, bytes_over_four, none);
      ASSERT_EQ(samples.size(), 3u) << task;
      for (const auto& s : samples) {
        const int64_t used = bytes_over_four(s.prompt()) + s.max_new_tokens;
        EXPECT_LE(used, length) << s.id;
        // Within the search's step (RULER's `incremental`) of the length.
        EXPECT_GE(used, length * 6 / 10) << s.id << " uses " << used;
        EXPECT_EQ(s.max_new_tokens, ruler_max_new_tokens(task));
        EXPECT_FALSE(s.outputs.empty()) << s.id;
        EXPECT_EQ(s.prompt(), s.context + s.question + s.answer_prefix);
      }
    }
}

TEST(Ruler, NeedlesAnswerTheQuestion) {
  const RulerSources none;
  for (const auto& task : {"niah_single_1", "niah_multikey_1", "niah_multikey_3", "niah_multivalue",
                           "niah_multiquery"}) {
    for (const auto& s : make_ruler(task, 2048, 4, 1, bytes_over_four, none)) {
      const std::string type = s.outputs[0].size() == 36 ? "uuids" : "numbers";
      for (const auto& value : s.outputs) {
        // The needle holding each reference, and the question naming its key.
        const std::regex needle("One of the special magic " + type + " for ([^ ]+) is: " + value +
                                "\\.");
        std::smatch m;
        ASSERT_TRUE(std::regex_search(s.context, m, needle)) << s.id << " " << value;
        EXPECT_NE(s.question.find(m[1].str()), std::string::npos) << s.id;
        EXPECT_NE(s.answer_prefix.find(m[1].str()), std::string::npos) << s.id;
      }
      // The needles are the queried keys' sentences, one per reference, in context order.
      ASSERT_EQ(s.needles.size(), s.outputs.size()) << s.id;
      size_t last = 0;
      for (const auto& needle : s.needles) {
        const size_t at = s.context.find(needle);
        ASSERT_NE(at, std::string::npos) << s.id << " " << needle;
        EXPECT_GE(at, last) << s.id;
        last = at;
        EXPECT_EQ(std::count_if(
                      s.outputs.begin(), s.outputs.end(),
                      [&](const std::string& v) { return needle.find(v) != std::string::npos; }),
                  1)
            << s.id << " " << needle;
      }
      if (std::string(task) == "niah_multivalue") {
        EXPECT_EQ(s.outputs.size(), 4u);
      }
      if (std::string(task) == "niah_multiquery") {
        EXPECT_EQ(s.outputs.size(), 4u);
        EXPECT_NE(s.question.find(", and "), std::string::npos) << s.question;
      }
    }
  }
  // One answer: RULER's singular prompt; the noise haystack one sentence group per line.
  const auto s = make_ruler("niah_single_1", 1024, 1, 1, bytes_over_four, none).front();
  EXPECT_EQ(s.context.rfind("A special magic number is hidden within the following text.", 0), 0u);
  EXPECT_EQ(s.question.rfind("What is the special magic number for ", 0), 0u);
  const std::string ending = " mentioned in the provided text is";
  EXPECT_EQ(s.answer_prefix.substr(s.answer_prefix.size() - ending.size()), ending);
  EXPECT_GT(occurrences(s.context,
                        "The grass is green. The sky is blue. The sun is yellow. Here "
                        "we go. There and back again.\n"),
            10);
  EXPECT_EQ(s.outputs[0].size(), 7u);  // a 7-digit number
  EXPECT_EQ(s.haystack, "noise");
  // The essay tasks fall back to the noise haystack without essays.
  EXPECT_EQ(make_ruler("niah_single_2", 1024, 1, 1, bytes_over_four, none).front().haystack,
            "noise");
}

TEST(Ruler, VariableChainsCommonAndFrequentWords) {
  const RulerSources none;
  for (const auto& s : make_ruler("vt", 2048, 3, 2, bytes_over_four, none)) {
    ASSERT_EQ(s.outputs.size(), 5u);
    const std::string value = s.question.substr(s.question.find("value ") + 6, 5);
    EXPECT_NE(s.context.find("VAR " + s.outputs[0] + " = " + value + "\n"), std::string::npos);
    for (size_t j = 0; j + 1 < s.outputs.size(); ++j)
      EXPECT_NE(s.context.find("VAR " + s.outputs[j + 1] + " = VAR " + s.outputs[j] + " "),
                std::string::npos)
          << s.id << " hop " << j;
    // The chain's five assignments are its needles, in order, after the worked example.
    ASSERT_EQ(s.needles.size(), 5u) << s.id;
    EXPECT_EQ(s.needles[0], "VAR " + s.outputs[0] + " = " + value);
    EXPECT_GT(s.context.find(s.needles[0]), s.context.rfind("Memorize and track")) << s.id;
    // The worked example comes first, with its answer.
    EXPECT_EQ(occurrences(s.context, "Memorize and track the chain(s)"), 2);
    EXPECT_EQ(occurrences(s.context, "5 variables are assigned the value"), 1);
  }
  for (const auto& s : make_ruler("cwe", 4096, 2, 3, bytes_over_four, none)) {
    ASSERT_EQ(s.outputs.size(), 10u);
    EXPECT_TRUE(s.needles.empty()) << s.id;  // the answer is the whole list
    // The main list is the last one: each common word 30 times, any other 3 times.
    const std::string list = s.context.substr(s.context.rfind("Memorize the ones that appear"));
    for (const auto& w : s.outputs)
      EXPECT_EQ(occurrences(list, ". " + w + " ") + occurrences(list, ". " + w + "\n"), 30) << w;
  }
  for (const auto& s : make_ruler("fwe", 4096, 2, 4, bytes_over_four, none)) {
    ASSERT_EQ(s.outputs.size(), 3u);
    const auto count = [&](const std::string& w) { return occurrences(s.context, " " + w + " "); };
    EXPECT_GT(count("..."), count(s.outputs[0]));
    EXPECT_GE(count(s.outputs[0]), count(s.outputs[1]));
    EXPECT_GE(count(s.outputs[1]), count(s.outputs[2]));
    EXPECT_GT(count(s.outputs[2]), 5);
  }
}

TEST(Ruler, SamplesAreReproducibleAndIndependentOfTheCount) {
  const RulerSources none;
  const auto three = make_ruler("niah_multikey_2", 1024, 3, 9, bytes_over_four, none);
  const auto five = make_ruler("niah_multikey_2", 1024, 5, 9, bytes_over_four, none);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(three[i].prompt(), five[i].prompt());
    EXPECT_EQ(three[i].outputs, five[i].outputs);
  }
  EXPECT_NE(three[0].prompt(), three[1].prompt());
  EXPECT_NE(make_ruler("niah_multikey_2", 1024, 1, 10, bytes_over_four, none)[0].prompt(),
            three[0].prompt());
}

TEST(Ruler, QuestionAnsweringAndEssaysFromTheUsersFiles) {
  testing::TempDir dir;
  const auto squad = dir.path() / "dev-v2.0.json";
  std::ofstream(squad) << R"({"data": [
    {"title": "A", "paragraphs": [
      {"context": "The river Zorn flows north past the mill of Abel.", "qas": [
        {"question": "Which way does the Zorn flow?", "answers": [{"text": "north"}],
         "is_impossible": false},
        {"question": "Who owns the moon?", "answers": [], "is_impossible": true}]},
      {"context": "Abel built the mill in 1820.", "qas": []}]},
    {"title": "B", "paragraphs": [{"context": "Tea grows on the hills of Kandy.", "qas": []}]}]})";
  const auto essays = dir.path() / "essays.txt";
  {
    std::ofstream out(essays);
    for (int i = 0; i < 400; ++i) out << "Essay sentence number " << i << " says little. ";
  }
  const RulerSources sources = read_ruler_sources(essays.string(), squad.string(), "");
  ASSERT_EQ(sources.squad.size(), 1u);  // the unanswerable question is left out
  EXPECT_EQ(sources.squad_docs.size(), 3u);
  const auto qa = make_ruler("qa_1", 512, 2, 1, bytes_over_four, sources);
  for (const auto& s : qa) {
    EXPECT_EQ(s.outputs, std::vector<std::string>{"north"});
    EXPECT_NE(s.context.find("The river Zorn flows north"), std::string::npos);
    EXPECT_NE(s.context.find("Document 1:\n"), std::string::npos);
    EXPECT_EQ(s.answer_prefix, " Answer:");
    EXPECT_EQ(s.needles,
              std::vector<std::string>{"The river Zorn flows north past the mill of Abel."});
    EXPECT_NE(s.question.find("Question: Which way does the Zorn flow?"), std::string::npos);
  }
  const auto essay = make_ruler("niah_single_2", 1024, 1, 1, bytes_over_four, sources).front();
  EXPECT_EQ(essay.haystack, "essay");
  EXPECT_NE(essay.context.find("Essay sentence number"), std::string::npos);
  EXPECT_NE(essay.context.find("One of the special magic numbers for "), std::string::npos);
  // What the user's files lack is named.
  EXPECT_ERROR_CONTAINS(make_ruler("qa_2", 512, 1, 1, bytes_over_four, sources),
                        "needs --hotpotqa");
  EXPECT_ERROR_CONTAINS(read_ruler_sources("", (dir.path() / "missing.json").string(), ""),
                        "missing.json");
  const auto broken = dir.path() / "broken.json";
  std::ofstream(broken) << R"({"data": [{"paragraphs": [{"qas": []}]}]})";
  EXPECT_ERROR_CONTAINS(read_ruler_sources("", broken.string(), ""), "broken.json");
  EXPECT_ERROR_CONTAINS(make_ruler("niah_single_9", 512, 1, 1, bytes_over_four, sources),
                        "unknown task 'niah_single_9'");
}

// token_indices_at on real tokenizers (byte-level BPE with two regexes, SentencePiece-style BPE):
// each needle of a noise, essay and vt prompt starts at the token it names. The prompt's tokens
// before it decode to the text before it (but for spaces the needle's first token carries), and
// the tokens from it on decode to the needle. SmolLM2's GPT-2 pre-tokenizer: RealModel.*NeedleToken*.
TEST(Ruler, NeedleTokenIndexIsWhereTheNeedleStarts) {
  RulerSources essays;
  for (int i = 0; i < 300; ++i)
    for (const char* w : {"Essay", "sentence", "number", "says", "little."})
      essays.essay_words.push_back(w);
  for (const char* name : {"bytelevel_llama3", "bytelevel_qwen2", "spm_bpe_bytefallback"}) {
    const auto tok = load_tokenizer(testing::fixture_dir("tokenizers") / name);
    const auto count = [&](const std::string& text) {
      return static_cast<int64_t>(tok->encode(text).size());
    };
    int64_t checked = 0;
    for (const auto& task : {"niah_single_1", "niah_single_2", "niah_multivalue", "vt"})
      for (const auto& s : make_ruler(task, 1024, 2, 5, count, essays)) {
        const std::string text = s.prompt();
        const std::vector<int64_t> ids = tok->encode_prompt(text);
        const auto bos = static_cast<int64_t>(tok->prefix_ids().size());
        std::vector<size_t> bytes;
        for (const auto& needle : s.needles) bytes.push_back(s.context.find(needle));
        const std::vector<int64_t> at = token_indices_at(*tok, text, bytes, /*with_bos=*/true);
        ASSERT_EQ(at.size(), s.needles.size());
        for (size_t j = 0; j < at.size(); ++j) {
          const int64_t index = at[j];
          const std::string& needle = s.needles[j];
          ASSERT_GT(index, bos) << name << " " << s.id;
          ASSERT_LT(index, static_cast<int64_t>(ids.size())) << name << " " << s.id;
          // The tokens before it decode to the text before the needle, but for spaces its first
          // token carries (never a newline: that would be an index one token early).
          const std::string before =
              tok->decode(std::vector<int64_t>(ids.begin() + bos, ids.begin() + index), true);
          ASSERT_LE(before.size(), bytes[j]) << name << " " << s.id;
          EXPECT_EQ(before, text.substr(0, before.size())) << name << " " << s.id;
          EXPECT_EQ(text.substr(before.size(), bytes[j] - before.size()).find_first_not_of(' '),
                    std::string::npos)
              << name << " " << s.id << " " << needle;
          std::string from =
              tok->decode(std::vector<int64_t>(ids.begin() + index, ids.end()), true);
          from.erase(0, from.find_first_not_of(' '));
          EXPECT_EQ(from.rfind(needle, 0), 0u) << name << " " << s.id << ": " << from.substr(0, 60);
          ++checked;
        }
      }
    EXPECT_EQ(checked, 2 * (1 + 1 + 4 + 5)) << name;
  }
}

TEST(Ruler, StringMatchIsRulers) {
  // string_match_all: the fraction of references found, case-insensitively; part: any of them.
  EXPECT_DOUBLE_EQ(
      ruler_string_match("The numbers are 1234567 and 7654321.", {"1234567", "7654321"}, true),
      1.0);
  EXPECT_DOUBLE_EQ(ruler_string_match("only 1234567", {"1234567", "7654321"}, true), 0.5);
  EXPECT_DOUBLE_EQ(ruler_string_match("NORTH, of course", {"north", "up"}, false), 1.0);
  EXPECT_DOUBLE_EQ(ruler_string_match("south", {"north", "up"}, false), 0.0);
  EXPECT_DOUBLE_EQ(ruler_string_match("91234567", {"1234567"}, true), 1.0);  // a plain substring
  EXPECT_DOUBLE_EQ(ruler_string_match("anything", {}, true), 0.0);
  EXPECT_EQ(ruler_postprocess("  a\tb\x01"
                              "c \n"),
            "a\nb\nc");
  EXPECT_TRUE(ruler_uses_match_part("qa_2"));
  EXPECT_FALSE(ruler_uses_match_part("vt"));
}

}  // namespace
}  // namespace retain
