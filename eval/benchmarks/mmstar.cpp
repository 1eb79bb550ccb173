#include "eval/benchmarks/mmstar.h"

#include <map>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "core/log.h"
#include "data/parquet_table.h"
#include "eval/benchmarks/benchmark.h"
#include "eval/benchmarks/data_files.h"
#include "eval/benchmarks/scoring.h"
#include "eval/benchmarks/vision_prompt.h"
#include "eval/metrics.h"
#include "model/tokenizers/unicode.h"
#include "model/vision/image_io.h"

namespace retain {

namespace {

std::vector<MmstarQuestion> read_parquet(const fs::path& file) {
  ParquetTable table(file);
  for (const char* column : {"index", "question", "image", "answer", "category", "l2_category"})
    RETAIN_CHECK(table.has_column(column), file.string(), ": no column '", column,
                 "' (expected MMStar's columns index, question, image, answer, category, "
                 "l2_category)");
  const auto index = table.integer_column("index");
  const auto question = table.text_column("question");
  const auto image = table.image_column("image");
  const auto answer = table.text_column("answer");
  const auto category = table.text_column("category");
  const auto l2 = table.text_column("l2_category");
  std::vector<MmstarQuestion> out;
  for (size_t i = 0; i < index.size(); ++i) {
    MmstarQuestion q;
    q.where = str_cat(file.string(), " row ", i);
    auto need = [&](const auto& v, const char* key) {
      RETAIN_CHECK(v.has_value(), q.where, ": '", key, "' is null");
      return *v;
    };
    q.index = need(index[i], "index");
    q.question = need(question[i], "question");
    q.answer = need(answer[i], "answer");
    q.category = need(category[i], "category");
    q.l2_category = need(l2[i], "l2_category");
    const ParquetImage picture = need(image[i], "image");
    q.image_bytes = picture.bytes;
    if (q.image_bytes.empty()) {
      RETAIN_CHECK(!picture.path.empty(), q.where, ": the image has neither bytes nor a path");
      q.image_file = file.parent_path() / picture.path;
    }
    out.push_back(std::move(q));
  }
  return out;
}

}  // namespace

std::vector<MmstarQuestion> load_mmstar(const fs::path& data, int64_t limit) {
  RETAIN_CHECK(fs::exists(data), data.string(),
               ": no such file or directory (expected MMStar's mmstar.parquet, a directory "
               "holding it, or mmstar.jsonl)");
  std::vector<fs::path> files;
  if (fs::is_directory(data)) {
    for (const char* name : {"mmstar.jsonl", "mmstar.parquet"})
      if (fs::exists(data / name)) {
        files.push_back(data / name);
        break;
      }
    if (files.empty()) {
      for (const auto& e : fs::recursive_directory_iterator(data))
        if (e.is_regular_file() && e.path().extension() == ".parquet") files.push_back(e.path());
      std::sort(files.begin(), files.end());
    }
    RETAIN_CHECK(!files.empty(), data.string(),
                 ": no mmstar.parquet, mmstar.jsonl or *.parquet in it");
  } else {
    files.push_back(data);
  }
  std::vector<MmstarQuestion> out;
  std::map<int64_t, std::string> seen;
  for (const auto& f : files)
    for (auto& q : f.extension() == ".parquet" ? read_parquet(f) : read_mmstar_jsonl(f)) {
      RETAIN_CHECK(!q.answer.empty(), q.where, ": empty answer");
      auto [it, inserted] = seen.emplace(q.index, q.where);
      RETAIN_CHECK(inserted, q.where, ": index ", q.index, " again (first at ", it->second, ")");
      out.push_back(std::move(q));
    }
  if (limit > 0 && static_cast<int64_t>(out.size()) > limit) out.resize(static_cast<size_t>(limit));
  RETAIN_CHECK(!out.empty(), data.string(), ": no questions");
  return out;
}

std::string mmstar_prompt_text(const MmstarQuestion& q) {
  return python_strip(q.question) +
         "\nAnswer with the option's letter from the given choices directly.";
}

namespace {

// lower().strip().replace('\n', ' ') as code points (the official code indexes characters).
std::vector<uint32_t> normalized(const std::string& text) {
  const std::string s = python_strip(python_lower(text));
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = next_code_point(s, i);
    out.push_back(cp == '\n' ? ' ' : cp);
  }
  return out;
}

bool starts_with(const std::vector<uint32_t>& s, const std::string& prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (s[i] != static_cast<unsigned char>(prefix[i])) return false;
  return true;
}

}  // namespace

bool mmstar_correct(const std::string& response, const std::string& answer) {
  const auto a = normalized(answer);
  const auto p = normalized(response);
  // answer == predict[k]: a one-character answer equal to the response's k-th character (an
  // index past the end raises IndexError, which the official code counts as wrong).
  auto at = [&](size_t k) { return a.size() == 1 && p.size() > k && p[k] == a[0]; };
  if (p.empty()) return false;
  if (at(0)) return true;
  if (p[0] == '(') return at(1);
  if (starts_with(p, "option ")) return at(7);
  if (starts_with(p, "the answer is ")) return at(14);
  return false;
}

Json mmstar_metrics(const std::vector<Json>& records,
                    const std::function<std::string(size_t)>& where) {
  std::map<std::string, std::pair<int64_t, int64_t>> counts;  // key -> (correct, total)
  for (size_t i = 0; i < records.size(); ++i) {
    const Json& r = records[i];
    const bool right = mmstar_correct(json_get<std::string>(r, "response", where(i)),
                                      json_get<std::string>(r, "answer", where(i)));
    const std::string category = json_get<std::string>(r, "category", where(i));
    const std::string l2 = json_get<std::string>(r, "l2_category", where(i));
    for (const auto& key : {std::string("overall"), category, str_cat(category, "(", l2, ")")}) {
      counts[key].first += right;
      counts[key].second += 1;
    }
  }
  Json metrics = Json::object();
  for (const auto& [key, ct] : counts)
    metrics[key] =
        python_round(100.0 * static_cast<double>(ct.first) / static_cast<double>(ct.second), 1);
  metrics["questions"] = static_cast<int64_t>(records.size());
  return metrics;
}

namespace {

// MMStar's six core capabilities (the official MMStar_eval's keys).
const std::vector<std::string>& mmstar_categories() {
  static const std::vector<std::string> kCategories = {
      "coarse perception", "fine-grained perception", "instance reasoning",
      "logical reasoning", "science & technology",    "math"};
  return kCategories;
}

class Mmstar final : public Benchmark {
 public:
  explicit Mmstar(const MmstarOptions& o) : o_(o) {}

  std::string name() const override { return "mmstar"; }
  std::string unit_name() const override { return "q"; }

  void load_data() override {
    questions_ = load_mmstar(o_.data, o_.limit);
    log_info("mmstar: ", questions_.size(), " questions from ", o_.data);
  }

  void prepare(const EvalModel& m) override {
    vision_.emplace(m, o_.sweep.model.model_dir, o_.chat, o_.max_pixels, o_.budget_scope,
                    o_.sweep.budgets, "eval mmstar");
    setting_ = vision_->setting(str_cat(",max_new_tokens=", o_.max_new_tokens));
  }

  Json config() const override {
    Json config = {{"data", o_.data},
                   {"max_new_tokens", o_.max_new_tokens},
                   {"limit", o_.limit},
                   {"questions", questions_.size()}};
    config.update(vision_->config());
    return config;
  }

  size_t units() const override { return questions_.size(); }
  std::string unit_key(size_t i) const override {
    return str_cat(questions_[i].index, "|", setting_);
  }
  bool settings_in_keys() const override { return true; }
  std::string record_key(const Json& j) const override {
    return str_cat(j.at("index").get<int64_t>(), "|", j.value("setting", ""));
  }

  GenerationRequest request(size_t i, const UnitContext& c) const override {
    const MmstarQuestion& q = questions_[i];
    const at::Tensor rgb = q.image_bytes.empty()
                               ? read_image_rgb(q.image_file)
                               : decode_image_rgb(q.image_bytes, q.where + " image");
    return vision_->request(std::string(kQwenImageBlock) + mmstar_prompt_text(q), {rgb}, c,
                            o_.max_new_tokens);
  }

  Json record(size_t i, const GenerationRequest& request, const GenerationResult& g, Json fields,
              const UnitContext& c) const override {
    const MmstarQuestion& q = questions_[i];
    fields.update({{"index", q.index},
                   {"setting", setting_},
                   {"category", q.category},
                   {"l2_category", q.l2_category},
                   {"answer", q.answer},
                   {"image_tokens", request.multimodal->image_tokens},
                   {"response", c.tokenizer.decode(g.tokens, true)}});
    return fields;
  }

  Json aggregate(const std::vector<Json>& records) const override {
    Json metrics =
        mmstar_metrics(records, [](size_t i) { return str_cat("predictions.jsonl record ", i); });
    metrics.update(vision_record_means(records));
    return metrics;
  }

  PlotSpec plot() const override { return accuracy_plot("MMStar", mmstar_categories()); }
  std::vector<std::string> table_columns() const override {
    return accuracy_columns(mmstar_categories());
  }

 private:
  MmstarOptions o_;
  std::vector<MmstarQuestion> questions_;
  std::optional<VisionPromptBuilder> vision_;
  std::string setting_;  // VisionPromptBuilder::setting
};

}  // namespace

int run_mmstar_eval(const MmstarOptions& o) {
  check_budget_scope(o.budget_scope, o.sweep.budgets, "eval mmstar");
  Mmstar benchmark(o);
  return run_sweep(benchmark, o.sweep);
}

BenchmarkScoring mmstar_scoring() {
  BenchmarkScoring s;
  s.name = "mmstar";
  s.one_setting_per_group = true;
  s.metrics = [](const std::vector<Json>& records, bool, const RecordWhere& where) {
    return mmstar_metrics(records, where);
  };
  s.figure = [](const std::vector<ScoreRow>& rows, PlotSpec& plot,
                std::vector<std::string>& columns) {
    // The categories; "category(l2)" stays in scores.json / scores.csv.
    plot.percent = true;
    columns.push_back("overall");
    if (rows.empty()) return;
    for (const auto& [metric, value] : rows.front().metrics.items())
      if (metric != "overall" && metric != "questions" && metric.find('(') == std::string::npos) {
        plot.panels.push_back({metric, metric});
        columns.push_back(metric);
      }
  };
  return s;
}

}  // namespace retain
