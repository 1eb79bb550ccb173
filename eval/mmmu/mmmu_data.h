// MMMU's questions as users have them on disk, and the prompt the official evaluation builds.
//   parquet   the HF release (MMMU/MMMU): <Subject>/<split>-NNNNN-of-NNNNN.parquet with columns
//             id, question, options (a Python list literal), answer, question_type
//             ("multiple-choice" | "open"), image_1..image_7 (struct<bytes, path>), subfield, ...
//             `--data` is the release's directory (every <split>-*.parquet under it) or one file
//   jsonl     the same fields, one question per line, in `<split>.jsonl` under `--data` (or the
//             file itself); options a JSON list or the Python literal; image_N a path relative to
//             the JSONL file's directory
// Questions come in the official order: subjects as run_llava.py's CAT_SHORT2LONG lists them
// (which is the order the official multiple-choice parser draws its random fallbacks in), each
// subject's rows as stored.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/fs.h"

namespace retain {

struct MmmuImage {
  std::vector<uint8_t> bytes;  // the encoded file (parquet), or empty and read from `file`
  fs::path file;
};

struct MmmuQuestion {
  std::string id;       // "validation_Art_Theory_12"
  std::string subject;  // "Art_Theory": the id without its split and number, as the official code
  std::string question;
  std::string question_type;         // "multiple-choice" | "open"
  std::vector<std::string> options;  // multiple choice: the options' texts, lettered A, B, ...
  // The gold answers: a letter for multiple choice; an open answer's text, or each entry of an
  // answer stored as a list literal ("['0.5', '1/2']").
  std::vector<std::string> answers;
  std::string subfield;
  std::map<int, MmmuImage> images;  // image_N present in the record, by N
  std::string where;                // "FILE row N" for errors
};

// The 30 subjects in the official order (CAT_SHORT2LONG's values).
const std::vector<std::string>& mmmu_subjects();

struct MmmuLoadOptions {
  std::string split = "validation";
  std::vector<std::string> subjects;  // empty: all
  int64_t limit = 0;                  // per subject (0: all)
};

// Reads and checks every question (types, options, the answer letter within the options, every
// <image N> referenced by the question or an option present). Errors name the file and record.
std::vector<MmmuQuestion> load_mmmu(const fs::path& data, const MmmuLoadOptions& options);

// The official construct_prompt's final_input_prompt (configs/llava1.5.yaml, no task
// instruction; YAML folds the formats' blank lines into single newlines): multiple choice
// "{question}\n(A) {option}\n(B) ...\n\nAnswer with the option's letter from the given choices
// directly."; open "{question}\nAnswer the question using a single word or phrase.". The
// <image N> tags stay in the text.
std::string mmmu_prompt_text(const MmmuQuestion& question);

// The letters of a multiple-choice question's options (A, B, ...).
std::vector<std::string> mmmu_choices(const MmmuQuestion& question);

// The <image N> tags of `text` in order: {byte offset, length, N}.
struct ImageTag {
  size_t offset = 0, length = 0;
  int number = 0;
};
std::vector<ImageTag> find_image_tags(const std::string& text);

}  // namespace retain
