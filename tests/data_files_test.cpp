// The benchmarks' data readers (eval/benchmarks/data_files.h): the released layouts read, and a bad
// record refused at load with its file, line (and turn) named.
#include "eval/benchmarks/data_files.h"
#include "test_util.h"

namespace retain {
namespace {

using retain::testing::TempDir;

std::string file_with(const TempDir& tmp, const std::string& name, const std::string& text) {
  write_text_file_atomic(tmp / name, text);
  return (tmp / name).string();
}

TEST(DataFiles, DialogueRecordsAndTheirErrors) {
  TempDir tmp;
  const auto d = read_dialogue_file(
      file_with(tmp, "ok.jsonl",
                "\n{\"id\":7,\"context\":\"c\",\"multi_turns\":[{\"input\":\"q\",\"answer\":\"a\"},"
                "{\"input\":\"r\",\"answer\":[\"b\",\"B\"]},{\"input\":\"s\",\"answer\":3}]}\n"),
      0);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].id, "7");
  ASSERT_EQ(d[0].turns.size(), 3u);
  EXPECT_EQ(d[0].turns[1].second, (std::vector<std::string>{"b", "B"}));
  EXPECT_EQ(d[0].turns[2].second, std::vector<std::string>{"3"});
  auto error_of = [&](const std::string& line) {
    try {
      read_dialogue_file(file_with(tmp, "bad.jsonl", line + "\n"), 0);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string bad = (tmp / "bad.jsonl").string();
  EXPECT_EQ(error_of(R"({"context":"x"})"),
            bad + ":1: multi_turns must be a non-empty array of {input, answer}");
  EXPECT_EQ(error_of(R"({"context":"x","multi_turns":[7]})"),
            bad + ":1 turn 0: expected {input, answer}, found number");
  EXPECT_EQ(error_of(R"({"context":"x","multi_turns":[{"input":"q","answer":[1]}]})"),
            bad + ":1 turn 0: 'answer' must hold strings, found number");
  EXPECT_EQ(error_of(R"({"context":"x","multi_turns":[{"input":"q"}]})"),
            bad + ":1 turn 0: required key 'answer' is missing");
  EXPECT_EQ(error_of("[1]"), bad + ":1: expected a JSON object, found array");
}

TEST(DataFiles, LongBenchV2RecordsAreCheckedAtLoad) {
  TempDir tmp;
  const std::string fields =
      R"("context":"c","question":"q","choice_A":"a","choice_B":"b","choice_C":"c","choice_D":"d")";
  EXPECT_EQ(
      read_longbench_v2_file(file_with(tmp, "a.json", "[{" + fields + R"(,"answer":"A"}])")).size(),
      1u);
  EXPECT_EQ(read_longbench_v2_file(
                file_with(tmp, "b.jsonl", "{" + fields + R"(,"answer":"A","_id":"x"})" + "\n\n"))
                .size(),
            1u);
  EXPECT_ERROR_CONTAINS(read_longbench_v2_file(file_with(tmp, "c.json", "[1]")),
                        "c.json record 0: expected a JSON object, found number");
  EXPECT_ERROR_CONTAINS(
      read_longbench_v2_file(file_with(
          tmp, "d.jsonl", "{" + fields + R"(,"answer":"A"})" + "\n{" + fields + R"(,"answer":1})")),
      "d.jsonl:2: key 'answer' has the wrong type");
  EXPECT_ERROR_CONTAINS(read_longbench_v2_file(file_with(
                            tmp, "e.jsonl", "{" + fields + R"(,"answer":"A","difficulty":3})")),
                        "e.jsonl:1: key 'difficulty' has the wrong type");
  EXPECT_ERROR_CONTAINS(read_longbench_v2_file(file_with(tmp, "f.json", R"({"a":1})")),
                        "f.json:1: required key 'context' is missing");
}

}  // namespace
}  // namespace retain
