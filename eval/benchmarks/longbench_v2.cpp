#include "eval/benchmarks/longbench_v2.h"

#include <map>
#include <sstream>

#include "core/error.h"
#include "core/json.h"
#include "eval/benchmarks/benchmark.h"
#include "eval/benchmarks/data_files.h"
#include "eval/benchmarks/scoring.h"
#include "eval/metrics.h"
#include "model/chat_template.h"
#include "model/tokenizers/regex.h"
#include "model/tokenizers/tokenizer.h"

namespace retain {

namespace {

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

}  // namespace

bool longbench_v2_correct(const Json& j, const std::string& where) {
  const std::string pred = j.contains("response")
                               ? extract_choice(json_get<std::string>(j, "response", where))
                               : json_get_optional<std::string>(j, "pred", where).value_or("");
  return pred == json_get<std::string>(j, "answer", where);
}

Json longbench_v2_metrics(const std::vector<Json>& records,
                          const std::function<std::string(size_t)>& where) {
  std::map<std::string, std::pair<int64_t, int64_t>> splits;  // split -> (correct, total)
  for (size_t i = 0; i < records.size(); ++i) {
    const Json& j = records[i];
    const bool correct = longbench_v2_correct(j, where(i));
    const std::string difficulty =
        json_get<std::string>(j, "difficulty", where(i)) == "easy" ? "easy" : "hard";
    std::string length = json_get<std::string>(j, "length", where(i));
    length = length == "short" || length == "medium" ? length : "long";
    for (const auto& split : {std::string("overall"), difficulty, length}) {
      splits[split].first += correct;
      splits[split].second += 1;
    }
  }
  Json metrics = Json::object();
  for (const auto& [split, ct] : splits)
    metrics[split] =
        python_round(100.0 * static_cast<double>(ct.first) / static_cast<double>(ct.second), 1);
  return metrics;
}

namespace {

class LongBenchV2 final : public Benchmark {
 public:
  explicit LongBenchV2(const LongBenchV2Options& o) : o_(o) {}

  std::string name() const override { return "longbench-v2"; }
  std::string unit_name() const override { return "q"; }

  void load_data() override {
    template_path_ = o_.template_file.empty()
                         ? fs::path(o_.data).parent_path() / "prompts" / "0shot.txt"
                         : fs::path(o_.template_file);
    RETAIN_CHECK(fs::exists(template_path_), template_path_.string(),
                 " is missing: pass --template with LongBench v2's prompts/0shot.txt");
    template_ = read_text_file(template_path_);
    for (const char* field : {"$DOC$", "$Q$", "$C_A$", "$C_B$", "$C_C$", "$C_D$"})
      RETAIN_CHECK(template_.find(field) != std::string::npos, template_path_.string(),
                   ": the template lacks ", field);
    records_ = read_longbench_v2_file(o_.data);
    if (o_.limit > 0 && static_cast<int64_t>(records_.size()) > o_.limit)
      records_.resize(static_cast<size_t>(o_.limit));
    for (size_t i = 0; i < records_.size(); ++i) {
      const std::string where = str_cat(o_.data, " record ", i);
      ids_.push_back(records_[i].contains("_id") ? json_get<std::string>(records_[i], "_id", where)
                                                 : str_cat(i));
    }
  }

  void prepare(const EvalModel& m) override {
    max_length_ = o_.max_length > 0 ? o_.max_length : m.model->config().max_position_embeddings;
    use_chat_ = o_.chat.chat || (!o_.chat.no_chat && has_chat_template(o_.sweep.model.model_dir));
    if (use_chat_) chat_ = load_chat_template(o_.sweep.model.model_dir, o_.chat.chat_template);
  }

  Json config() const override {
    return {{"data", o_.data},
            {"template", template_path_.string()},
            {"max_length", max_length_},
            {"chat", use_chat_},
            {"limit", o_.limit}};
  }

  size_t units() const override { return records_.size(); }
  std::string unit_key(size_t i) const override { return ids_[i]; }
  std::string record_key(const Json& j) const override { return j.at("_id").get<std::string>(); }

  GenerationRequest request(size_t i, const UnitContext& c) const override {
    const Json& r = records_[i];
    const std::string where = str_cat(o_.data, " record ", i);
    std::string prompt = template_;
    prompt = replace_all(prompt, "$DOC$", json_get<std::string>(r, "context", where));
    prompt = replace_all(prompt, "$Q$", json_get<std::string>(r, "question", where));
    for (const char* choice : {"A", "B", "C", "D"})
      prompt = replace_all(prompt, str_cat("$C_", choice, "$"),
                           json_get<std::string>(r, str_cat("choice_", choice), where));
    auto ids = c.tokenizer.encode(prompt);
    if (static_cast<int64_t>(ids.size()) > max_length_) {
      // pred.py: the first and last max_len // 2 tokens.
      const int64_t half = max_length_ / 2;
      prompt = c.tokenizer.decode(std::vector<int64_t>(ids.begin(), ids.begin() + half), true) +
               c.tokenizer.decode(std::vector<int64_t>(ids.end() - half, ids.end()), true);
    }
    GenerationRequest q;
    q.prompt = chat_ ? c.tokenizer.encode(chat_->render({{"user", prompt}}, ChatOptions{}))
                     : c.tokenizer.encode_prompt(prompt);
    q.max_new_tokens = o_.max_new_tokens;
    return q;
  }

  Json record(size_t i, const GenerationRequest& /*request*/, const GenerationResult& g,
              Json fields, const UnitContext& c) const override {
    const Json& r = records_[i];
    const std::string where = str_cat(o_.data, " record ", i);
    const std::string response = c.tokenizer.decode(g.tokens, true);
    fields.update({{"_id", ids_[i]},
                   {"difficulty", r.value("difficulty", "hard")},
                   {"length", r.value("length", "long")},
                   {"answer", json_get<std::string>(r, "answer", where)},
                   {"response", response},
                   {"pred", extract_choice(response)}});
    return fields;
  }

  Json aggregate(const std::vector<Json>& records) const override {
    return longbench_v2_metrics(records,
                                [](size_t i) { return str_cat("predictions.jsonl record ", i); });
  }
  std::optional<bool> unit_correct(const Json& record) const override {
    return longbench_v2_correct(record, "predictions.jsonl record");
  }
  PlotSpec plot() const override {
    return {"LongBench v2",
            "accuracy (%)",
            {{"overall", "overall"},
             {"easy", "easy"},
             {"hard", "hard"},
             {"short", "short"},
             {"medium", "medium"},
             {"long", "long"}},
            "",
            true};
  }

 private:
  LongBenchV2Options o_;
  fs::path template_path_;
  std::string template_;
  std::vector<Json> records_;
  std::vector<std::string> ids_;
  int64_t max_length_ = 0;
  bool use_chat_ = false;
  std::optional<ChatTemplate> chat_;
};

}  // namespace

int run_longbench_v2_eval(const LongBenchV2Options& o) {
  LongBenchV2 benchmark(o);
  return run_sweep(benchmark, o.sweep);
}

std::string extract_choice(const std::string& response) {
  std::string text;
  for (char c : response)
    if (c != '*') text.push_back(c);
  static const Regex with_parens("The correct answer is \\(([A-D])\\)", "longbench-v2");
  static const Regex bare("The correct answer is ([A-D])", "longbench-v2");
  for (const Regex* r : {&with_parens, &bare}) {
    auto hits = r->find_all(text);
    if (!hits.empty()) return text.substr(hits[0].second - (r == &with_parens ? 2 : 1), 1);
  }
  return "";
}

BenchmarkScoring longbench_v2_scoring() {
  BenchmarkScoring s;
  s.name = "longbench-v2";
  s.metrics = [](const std::vector<Json>& records, bool, const RecordWhere& where) {
    return longbench_v2_metrics(records, where);
  };
  s.figure = [](const std::vector<ScoreRow>& rows, PlotSpec& plot, std::vector<std::string>&) {
    plot.percent = true;
    add_metric_panels(rows, plot,
                      [](const std::string& m) { return m.find('/') == std::string::npos; });
  };
  return s;
}

}  // namespace retain
