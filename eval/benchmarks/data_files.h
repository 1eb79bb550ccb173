// The benchmarks' released data files read and checked record by record, free of LibTorch (the
// fuzzer, fuzz/benchmark_data_fuzz.cpp, builds them alone): every field a benchmark reads later
// is checked here, so that a bad record fails at load with its file and line named, never in the
// middle of a sweep. The layouts are described in docs/evaluation.md.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/fs.h"
#include "core/json.h"

namespace retain {

// `eval dialogue --data FILE`: JSONL, one conversation a line: {"id"?, "context": str,
// "multi_turns": [{"input": str, "answer": str | [str] | other (written as JSON)}, ...]}.
struct DialogueRecord {
  std::string id, context;
  std::vector<std::pair<std::string, std::vector<std::string>>> turns;  // question, answers
};
// At most `limit` conversations (0: all); a file with none is an error.
std::vector<DialogueRecord> read_dialogue_file(const std::string& path, int64_t limit);

// `eval longbench-v2 --data FILE`: the release's data.json (one JSON array) or JSONL. Each record
// an object with string context, question, choice_A..choice_D and answer; _id, difficulty and
// length, when present, strings.
std::vector<Json> read_longbench_v2_file(const std::string& path);

// `eval mmstar --data mmstar.jsonl` (the parquet release: eval/benchmarks/mmstar.cpp).
struct MmstarQuestion {
  int64_t index = 0;
  std::string question, answer, category, l2_category;
  std::vector<uint8_t> image_bytes;  // or empty and read from image_file
  fs::path image_file;
  std::string where;
};
// {index, question, answer, category, l2_category, image: a path relative to the file} a line.
std::vector<MmstarQuestion> read_mmstar_jsonl(const fs::path& file);

}  // namespace retain
