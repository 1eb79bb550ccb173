#include "eval/math/math_data.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "core/error.h"
#include "core/json.h"
#include "data/parquet_table.h"
#include "eval/math/math_answer.h"

namespace retain {

namespace {

// A row as JSON whatever the file: a JSONL line, or a parquet row's text and integer columns.
struct Row {
  Json fields;
  std::string where;
};

std::vector<Row> read_jsonl(const fs::path& file) {
  std::istringstream in(read_text_file(file));
  std::string line;
  std::vector<Row> rows;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = str_cat(file.string(), ":", n);
    Json j = parse_json(line, where);
    RETAIN_CHECK(j.is_object(), where, ": expected a JSON object per line, found ", j.type_name());
    rows.push_back({std::move(j), where});
  }
  return rows;
}

std::vector<Row> read_parquet(const fs::path& file) {
  ParquetTable table(file);
  std::vector<Row> rows(static_cast<size_t>(table.rows()));
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].fields = Json::object();
    rows[i].where = str_cat(file.string(), " row ", i);
  }
  // The columns the layouts read; others (images, lists of generations) stay unread.
  for (const char* name : {"question", "answer", "problem", "solution", "subject", "type", "level",
                           "unique_id", "id", "ID", "problem_idx"}) {
    if (!table.has_column(name)) continue;
    const auto column = table.json_column(name);
    for (size_t i = 0; i < rows.size(); ++i)
      if (!column[i].is_null()) rows[i].fields[name] = column[i];
  }
  return rows;
}

// The first of `keys` the row has, as text (an integer is written out: AIME's answers and ids).
std::optional<std::string> text_field(const Row& row, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    const auto it = row.fields.find(key);
    if (it == row.fields.end() || it->is_null()) continue;
    if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
    RETAIN_CHECK(it->is_string(), row.where, ": '", key, "' should be a string, found ",
                 it->type_name());
    return it->get<std::string>();
  }
  return std::nullopt;
}

std::string required(const Row& row, std::initializer_list<const char*> keys,
                     const std::string& layout) {
  if (auto value = text_field(row, keys)) return *value;
  std::string names;
  for (const char* key : keys) names += (names.empty() ? "'" : " or '") + std::string(key) + "'";
  RETAIN_CHECK(false, row.where, ": no ", names, " (", layout, ")");
  return "";
}

MathProblem read_problem(const Row& row, MathBenchmark benchmark, size_t index) {
  MathProblem p;
  p.where = row.where;
  switch (benchmark) {
    case MathBenchmark::kGsm8k: {
      const std::string layout = "GSM8K's layout: question, answer ending in '#### N'";
      p.problem = required(row, {"question"}, layout);
      const std::string answer = required(row, {"answer"}, layout);
      const auto gold = gsm8k_extract_answer(answer);
      RETAIN_CHECK(gold.has_value(), row.where, ": the answer has no '#### N' (", layout, ")");
      p.gold = *gold;
      p.id = text_field(row, {"id"}).value_or(std::to_string(index));
      break;
    }
    case MathBenchmark::kMath500: {
      const std::string layout = "MATH-500's layout: problem, answer or solution with \\boxed{}";
      p.problem = required(row, {"problem"}, layout);
      if (auto answer = text_field(row, {"answer"})) {
        p.gold = *answer;
      } else {
        const auto boxed = last_boxed_answer(required(row, {"answer", "solution"}, layout));
        RETAIN_CHECK(boxed.has_value(), row.where,
                     ": no 'answer', and the solution has no \\boxed{}");
        p.gold = *boxed;
      }
      p.subject = text_field(row, {"subject", "type"}).value_or("");
      // MATH-500 writes the level as 1-5, the MATH release as "Level 1".
      if (const auto level = text_field(row, {"level"})) {
        const size_t digit = level->find_first_of("0123456789");
        if (digit != std::string::npos) p.level = std::stoll(level->substr(digit, 1));
      }
      p.id = text_field(row, {"unique_id", "id"}).value_or(std::to_string(index));
      break;
    }
    case MathBenchmark::kAime: {
      const std::string layout = "AIME's layout: problem (or question), answer";
      p.problem = required(row, {"problem", "question"}, layout);
      p.gold = required(row, {"answer"}, layout);
      p.id = text_field(row, {"id", "ID", "problem_idx"}).value_or(std::to_string(index));
      break;
    }
  }
  RETAIN_CHECK(!p.problem.empty(), row.where, ": the problem is empty");
  RETAIN_CHECK(!p.gold.empty(), row.where, ": the answer is empty");
  return p;
}

}  // namespace

std::vector<MathProblem> load_math_problems(const fs::path& data, MathBenchmark benchmark,
                                            int64_t limit) {
  const std::string name = math_benchmark_name(benchmark);
  RETAIN_CHECK(fs::exists(data), data.string(), ": no such file or directory (expected ", name,
               "'s .jsonl or .parquet, or a directory of them)");
  std::vector<fs::path> files;
  if (fs::is_directory(data)) {
    for (const auto& e : fs::directory_iterator(data))
      if (e.is_regular_file() &&
          (e.path().extension() == ".jsonl" || e.path().extension() == ".parquet"))
        files.push_back(e.path());
    std::sort(files.begin(), files.end());
    RETAIN_CHECK(!files.empty(), data.string(), ": no .jsonl or .parquet file in it");
  } else {
    RETAIN_CHECK(data.extension() == ".jsonl" || data.extension() == ".parquet", data.string(),
                 ": expected a .jsonl or .parquet file, found '", data.extension().string(), "'");
    files.push_back(data);
  }
  std::vector<MathProblem> problems;
  std::map<std::string, std::string> seen;  // id -> where
  size_t index = 0;
  for (const auto& file : files)
    for (const Row& row : file.extension() == ".parquet" ? read_parquet(file) : read_jsonl(file)) {
      MathProblem p = read_problem(row, benchmark, index++);
      const auto [it, fresh] = seen.emplace(p.id, p.where);
      RETAIN_CHECK(fresh, p.where, ": id '", p.id, "' again (first at ", it->second, ")");
      problems.push_back(std::move(p));
      if (limit > 0 && static_cast<int64_t>(problems.size()) == limit) return problems;
    }
  RETAIN_CHECK(!problems.empty(), data.string(), ": no problems");
  return problems;
}

}  // namespace retain
