#include "eval/benchmarks/data_files.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace retain {

namespace {

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

// A JSON object from one line, or an error naming the line.
Json object_line(const std::string& line, const std::string& where) {
  Json j = parse_json(line, where);
  RETAIN_CHECK(j.is_object(), where, ": expected a JSON object, found ", j.type_name());
  return j;
}

}  // namespace

std::vector<DialogueRecord> read_dialogue_file(const std::string& path, int64_t limit) {
  std::ifstream in(path);
  RETAIN_CHECK(in.good(), path, ": cannot open");
  std::vector<DialogueRecord> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (blank(line)) continue;
    if (limit > 0 && static_cast<int64_t>(out.size()) >= limit) break;
    const std::string where = str_cat(path, ":", n);
    const Json j = object_line(line, where);
    DialogueRecord c;
    c.id = j.contains("id") ? (j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump())
                            : str_cat("line", n);
    c.context = json_get<std::string>(j, "context", where);
    const auto turns = j.find("multi_turns");
    RETAIN_CHECK(turns != j.end() && turns->is_array() && !turns->empty(), where,
                 ": multi_turns must be a non-empty array of {input, answer}");
    for (size_t k = 0; k < turns->size(); ++k) {
      const Json& t = (*turns)[k];
      const std::string turn_where = str_cat(where, " turn ", k);
      RETAIN_CHECK(t.is_object(), turn_where, ": expected {input, answer}, found ", t.type_name());
      const auto a = t.find("answer");
      RETAIN_CHECK(a != t.end(), turn_where, ": required key 'answer' is missing");
      std::vector<std::string> answers;
      if (a->is_array()) {
        for (const Json& one : *a) {
          RETAIN_CHECK(one.is_string(), turn_where, ": 'answer' must hold strings, found ",
                       one.type_name());
          answers.push_back(one.get<std::string>());
        }
      } else {
        answers.push_back(a->is_string() ? a->get<std::string>() : a->dump());
      }
      c.turns.emplace_back(json_get<std::string>(t, "input", turn_where), std::move(answers));
    }
    out.push_back(std::move(c));
  }
  RETAIN_CHECK(!out.empty(), path, ": no dialogue records");
  return out;
}

std::vector<Json> read_longbench_v2_file(const std::string& path) {
  const std::string text = read_text_file(path);
  const size_t first = text.find_first_not_of(" \t\r\n");
  RETAIN_CHECK(first != std::string::npos, path, ": empty");
  std::vector<std::pair<Json, std::string>> read;  // record, where
  if (text[first] == '[') {
    const Json all = parse_json(text, path);
    RETAIN_CHECK(all.is_array(), path, ": expected a JSON array of records");
    for (size_t i = 0; i < all.size(); ++i) read.emplace_back(all[i], str_cat(path, " record ", i));
  } else {
    std::istringstream in(text);
    std::string line;
    for (int64_t n = 1; std::getline(in, line); ++n) {
      if (blank(line)) continue;
      const std::string where = str_cat(path, ":", n);
      read.emplace_back(object_line(line, where), where);
    }
  }
  std::vector<Json> out;
  for (auto& [record, where] : read) {
    RETAIN_CHECK(record.is_object(), where, ": expected a JSON object, found ", record.type_name());
    for (const char* key :
         {"context", "question", "choice_A", "choice_B", "choice_C", "choice_D", "answer"})
      json_get<std::string>(record, key, where);
    for (const char* key : {"_id", "difficulty", "length"})
      json_get_optional<std::string>(record, key, where);
    out.push_back(std::move(record));
  }
  return out;
}

std::vector<MmstarQuestion> read_mmstar_jsonl(const fs::path& file) {
  std::istringstream in(read_text_file(file));
  std::string line;
  std::vector<MmstarQuestion> out;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (blank(line)) continue;
    MmstarQuestion q;
    q.where = str_cat(file.string(), ":", n);
    const Json j = object_line(line, q.where);
    q.index = json_get<int64_t>(j, "index", q.where);
    q.question = json_get<std::string>(j, "question", q.where);
    q.answer = json_get<std::string>(j, "answer", q.where);
    q.category = json_get<std::string>(j, "category", q.where);
    q.l2_category = json_get<std::string>(j, "l2_category", q.where);
    q.image_file = file.parent_path() / json_get<std::string>(j, "image", q.where);
    out.push_back(std::move(q));
  }
  return out;
}

}  // namespace retain
