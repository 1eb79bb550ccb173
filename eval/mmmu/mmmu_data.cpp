#include "eval/mmmu/mmmu_data.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "core/json.h"
#include "data/parquet_table.h"
#include "eval/mmmu/python_literal.h"

namespace retain {

const std::vector<std::string>& mmmu_subjects() {
  // run_llava.py's CAT_SHORT2LONG, in its order (sorted by the short names, not the long ones).
  static const std::vector<std::string> kSubjects = {"Accounting",
                                                     "Agriculture",
                                                     "Architecture_and_Engineering",
                                                     "Art",
                                                     "Art_Theory",
                                                     "Basic_Medical_Science",
                                                     "Biology",
                                                     "Chemistry",
                                                     "Clinical_Medicine",
                                                     "Computer_Science",
                                                     "Design",
                                                     "Diagnostics_and_Laboratory_Medicine",
                                                     "Economics",
                                                     "Electronics",
                                                     "Energy_and_Power",
                                                     "Finance",
                                                     "Geography",
                                                     "History",
                                                     "Literature",
                                                     "Manage",
                                                     "Marketing",
                                                     "Materials",
                                                     "Math",
                                                     "Mechanical_Engineering",
                                                     "Music",
                                                     "Pharmacy",
                                                     "Physics",
                                                     "Psychology",
                                                     "Public_Health",
                                                     "Sociology"};
  return kSubjects;
}

std::vector<ImageTag> find_image_tags(const std::string& text) {
  std::vector<ImageTag> tags;
  const std::string open = "<image ";
  for (size_t at = text.find(open); at != std::string::npos; at = text.find(open, at + 1)) {
    size_t end = at + open.size();
    int number = 0;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9' && number < 1000)
      number = number * 10 + (text[end++] - '0');
    if (end == at + open.size() || end >= text.size() || text[end] != '>') continue;
    tags.push_back({at, end + 1 - at, number});
  }
  return tags;
}

std::vector<std::string> mmmu_choices(const MmmuQuestion& q) {
  std::vector<std::string> choices;
  for (size_t i = 0; i < q.options.size(); ++i)
    choices.push_back(std::string(1, static_cast<char>('A' + i)));
  return choices;
}

std::string mmmu_prompt_text(const MmmuQuestion& q) {
  if (q.question_type == "multiple-choice") {
    std::string example;
    for (size_t i = 0; i < q.options.size(); ++i)
      example += str_cat("(", static_cast<char>('A' + i), ") ", q.options[i], "\n");
    return q.question + "\n" + example +
           "\nAnswer with the option's letter from the given choices directly.";
  }
  return q.question + "\nAnswer the question using a single word or phrase.";
}

namespace {

constexpr int kMaxImages = 7;  // image_1 .. image_7

// One record's fields as read from either layout.
struct RawRecord {
  std::optional<std::string> id, question, options, answer, question_type, subfield;
  std::optional<std::vector<std::string>> options_list;  // a JSON list (JSONL layout)
  std::map<int, MmmuImage> images;
  std::string where;
};

MmmuQuestion check_record(RawRecord r) {
  const std::string& where = r.where;
  auto need = [&](const std::optional<std::string>& v, const char* key) -> const std::string& {
    RETAIN_CHECK(v.has_value(), where, ": '", key, "' is missing (or null)");
    return *v;
  };
  MmmuQuestion q;
  q.where = where;
  q.id = need(r.id, "id");
  q.question = need(r.question, "question");
  q.question_type = need(r.question_type, "question_type");
  q.subfield = r.subfield.value_or("");
  RETAIN_CHECK(q.question_type == "multiple-choice" || q.question_type == "open", where,
               ": question_type is '", q.question_type, "'; expected multiple-choice or open");
  // The official subject of an id: "_".join(id.split("_")[1:-1]).
  const size_t first = q.id.find('_'), last = q.id.rfind('_');
  RETAIN_CHECK(first != std::string::npos && last > first, where, ": id '", q.id,
               "' is not <split>_<Subject>_<number>");
  q.subject = q.id.substr(first + 1, last - first - 1);
  const auto& subjects = mmmu_subjects();
  RETAIN_CHECK(std::find(subjects.begin(), subjects.end(), q.subject) != subjects.end(), where,
               ": id '", q.id, "' names subject '", q.subject, "', not one of MMMU's 30");

  if (r.options_list) {
    q.options = *r.options_list;
  } else {
    std::string error;
    auto options = parse_python_string_list(need(r.options, "options"), &error);
    RETAIN_CHECK(options.has_value(), where, ": options is not a Python list of strings (", error,
                 "): ", *r.options);
    q.options = std::move(*options);
  }
  const std::string& answer = need(r.answer, "answer");
  auto listed = answer.starts_with("[") ? parse_python_string_list(answer) : std::nullopt;
  q.answers = listed && !listed->empty() ? *listed : std::vector<std::string>{answer};
  if (q.question_type == "multiple-choice") {
    RETAIN_CHECK(!q.options.empty(), where, ": a multiple-choice question without options");
    RETAIN_CHECK(q.options.size() <= 26, where, ": ", q.options.size(),
                 " options (at most 26 letters)");
    const auto choices = mmmu_choices(q);
    RETAIN_CHECK(answer != "?", where,
                 ": the answer is '?' (MMMU's test split has no public answers; use validation "
                 "or dev)");
    RETAIN_CHECK(q.answers.size() == 1 &&
                     std::find(choices.begin(), choices.end(), q.answers[0]) != choices.end(),
                 where, ": answer '", answer, "' is not one of the option letters A-",
                 choices.back(), " (", q.options.size(), " options)");
  }
  q.images = std::move(r.images);
  std::string text = q.question;
  for (const auto& o : q.options) text += "\n" + o;
  for (const auto& tag : find_image_tags(text))
    RETAIN_CHECK(q.images.count(tag.number), where, ": <image ", tag.number,
                 "> is referenced but image_", tag.number, " is ",
                 tag.number >= 1 && tag.number <= kMaxImages ? "empty" : "not a column MMMU has");
  return q;
}

std::vector<RawRecord> read_parquet(const fs::path& file) {
  ParquetTable table(file);
  for (const char* column : {"id", "question", "options", "answer", "question_type"})
    RETAIN_CHECK(
        table.has_column(column), file.string(), ": no column '", column,
        "' (expected MMMU's columns id, question, options, answer, question_type, "
        "image_1..image_7; this file has ",
        [&] {
          std::string names;
          for (const auto& n : table.column_names()) names += (names.empty() ? "" : ", ") + n;
          return names;
        }(),
        ")");
  const auto id = table.text_column("id");
  const auto question = table.text_column("question");
  const auto options = table.text_column("options");
  const auto answer = table.text_column("answer");
  const auto question_type = table.text_column("question_type");
  const auto subfield = table.has_column("subfield")
                            ? table.text_column("subfield")
                            : std::vector<std::optional<std::string>>(id.size());
  std::map<int, std::vector<std::optional<ParquetImage>>> images;
  for (int n = 1; n <= kMaxImages; ++n)
    if (table.has_column(str_cat("image_", n)))
      images[n] = table.image_column(str_cat("image_", n));
  std::vector<RawRecord> out;
  for (size_t i = 0; i < id.size(); ++i) {
    RawRecord r;
    r.where = str_cat(file.string(), " row ", i);
    r.id = id[i];
    r.question = question[i];
    r.options = options[i];
    r.answer = answer[i];
    r.question_type = question_type[i];
    r.subfield = subfield[i];
    for (auto& [n, column] : images)
      if (column[i]) {
        MmmuImage image;
        image.bytes = std::move(column[i]->bytes);
        if (image.bytes.empty()) {
          RETAIN_CHECK(!column[i]->path.empty(), r.where, ": image_", n,
                       " has neither bytes nor a path");
          image.file = file.parent_path() / column[i]->path;
        }
        r.images[n] = std::move(image);
      }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<RawRecord> read_jsonl(const fs::path& file) {
  std::istringstream in(read_text_file(file));
  std::string line;
  std::vector<RawRecord> out;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = str_cat(file.string(), ":", n);
    const Json j = parse_json(line, where);
    RETAIN_CHECK(j.is_object(), where, ": expected a JSON object per line");
    RawRecord r;
    r.where = where;
    r.id = json_get_optional<std::string>(j, "id", where);
    r.question = json_get_optional<std::string>(j, "question", where);
    r.question_type = json_get_optional<std::string>(j, "question_type", where);
    r.subfield = json_get_optional<std::string>(j, "subfield", where);
    if (j.contains("options") && j["options"].is_array())
      r.options_list = json_get<std::vector<std::string>>(j, "options", where);
    else
      r.options = json_get_optional<std::string>(j, "options", where);
    // An answer list is kept as the official release writes it: a Python literal.
    if (j.contains("answer") && j["answer"].is_array()) {
      std::string literal = "[";
      for (const auto& a : json_get<std::vector<std::string>>(j, "answer", where)) {
        RETAIN_CHECK(a.find('\'') == std::string::npos || a.find('"') == std::string::npos, where,
                     ": an answer with both quote characters");
        const char quote = a.find('\'') == std::string::npos ? '\'' : '"';
        literal += str_cat(literal.size() > 1 ? ", " : "", quote, a, quote);
      }
      r.answer = literal + "]";
    } else {
      r.answer = json_get_optional<std::string>(j, "answer", where);
    }
    for (int k = 1; k <= kMaxImages; ++k)
      if (auto path = json_get_optional<std::string>(j, str_cat("image_", k), where)) {
        MmmuImage image;
        image.file = file.parent_path() / *path;
        r.images[k] = std::move(image);
      }
    out.push_back(std::move(r));
  }
  return out;
}

// Every <split>-*.parquet (HF's shard names) or <split>.parquet under `dir`, sorted.
std::vector<fs::path> parquet_files(const fs::path& dir, const std::string& split) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && entry.path().extension() == ".parquet" &&
        (name.starts_with(split + "-") || name == split + ".parquet"))
      files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::vector<MmmuQuestion> load_mmmu(const fs::path& data, const MmmuLoadOptions& o) {
  RETAIN_CHECK(fs::exists(data), data.string(), ": no such file or directory (expected MMMU's ",
               "parquet release directory, a parquet file, or a JSONL file)");
  std::vector<RawRecord> raw;
  if (fs::is_directory(data)) {
    if (fs::exists(data / (o.split + ".jsonl"))) {
      raw = read_jsonl(data / (o.split + ".jsonl"));
    } else {
      const auto files = parquet_files(data, o.split);
      RETAIN_CHECK(!files.empty(), data.string(), ": no ", o.split, ".jsonl and no ", o.split,
                   "-*.parquet under it (expected MMMU's release: <Subject>/", o.split,
                   "-00000-of-00001.parquet)");
      for (const auto& f : files)
        for (auto& r : read_parquet(f)) raw.push_back(std::move(r));
    }
  } else if (data.extension() == ".parquet") {
    raw = read_parquet(data);
  } else {
    raw = read_jsonl(data);
  }
  std::map<std::string, std::vector<MmmuQuestion>> by_subject;
  std::map<std::string, std::string> seen;  // id -> where
  for (auto& r : raw) {
    MmmuQuestion q = check_record(std::move(r));
    auto [it, inserted] = seen.emplace(q.id, q.where);
    RETAIN_CHECK(inserted, q.where, ": id '", q.id, "' again (first at ", it->second, ")");
    by_subject[q.subject].push_back(std::move(q));
  }
  for (const auto& s : o.subjects)
    RETAIN_CHECK(
        std::find(mmmu_subjects().begin(), mmmu_subjects().end(), s) != mmmu_subjects().end(),
        "--subjects: '", s, "' is not one of MMMU's 30 subjects (Art_Theory, Math, ...)");
  std::vector<MmmuQuestion> out;
  for (const auto& subject : mmmu_subjects()) {
    if (!o.subjects.empty() &&
        std::find(o.subjects.begin(), o.subjects.end(), subject) == o.subjects.end())
      continue;
    auto it = by_subject.find(subject);
    if (it == by_subject.end()) continue;
    auto& questions = it->second;
    if (o.limit > 0 && static_cast<int64_t>(questions.size()) > o.limit)
      questions.resize(static_cast<size_t>(o.limit));
    for (auto& q : questions) out.push_back(std::move(q));
  }
  RETAIN_CHECK(!out.empty(), data.string(), ": no ", o.split, " questions",
               o.subjects.empty() ? "" : " of the subjects asked for");
  return out;
}

}  // namespace retain
