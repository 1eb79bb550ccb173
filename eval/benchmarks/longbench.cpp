#include "eval/benchmarks/longbench.h"

#include <fstream>
#include <set>

#include "core/error.h"
#include "core/json.h"
#include "eval/benchmarks/benchmark.h"
#include "eval/benchmarks/scoring.h"
#include "eval/metrics.h"
#include "model/chat_template.h"
#include "model/tokenizers/tokenizer.h"

namespace retain {

namespace {

const std::vector<std::string> kDefaultTasks = {"narrativeqa",
                                                "qasper",
                                                "multifieldqa_en",
                                                "hotpotqa",
                                                "2wikimqa",
                                                "musique",
                                                "gov_report",
                                                "qmsum",
                                                "multi_news",
                                                "trec",
                                                "triviaqa",
                                                "samsum",
                                                "passage_count",
                                                "passage_retrieval_en",
                                                "lcc",
                                                "repobench-p"};
const std::vector<std::string> kDefaultTasksE = {"qasper",
                                                 "multifieldqa_en",
                                                 "hotpotqa",
                                                 "2wikimqa",
                                                 "gov_report",
                                                 "multi_news",
                                                 "trec",
                                                 "triviaqa",
                                                 "samsum",
                                                 "passage_count",
                                                 "passage_retrieval_en",
                                                 "lcc",
                                                 "repobench-p"};
const std::set<std::string> kNoChat = {"trec", "triviaqa", "samsum", "lsht", "lcc", "repobench-p"};

std::string field_text(const Json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

}  // namespace

Json longbench_metrics(const std::vector<Json>& records, bool e,
                       const std::function<std::string(size_t)>& where) {
  std::map<std::string, std::pair<double, int64_t>> per_dataset, buckets;  // sum, count
  for (size_t i = 0; i < records.size(); ++i) {
    const Json& j = records[i];
    const std::string dataset = json_get<std::string>(j, "dataset", where(i));
    const auto answers = json_get<std::vector<std::string>>(j, "answers", where(i));
    const auto classes = json_get_optional<std::vector<std::string>>(j, "all_classes", where(i))
                             .value_or(std::vector<std::string>{});
    const double s =
        longbench_score(dataset, json_get<std::string>(j, "pred", where(i)), answers, classes);
    per_dataset[dataset].first += s;
    per_dataset[dataset].second += 1;
    if (e && j.contains("length") && j["length"].is_number()) {
      auto& bucket = buckets[dataset + "/" + longbench_e_bucket(j["length"].get<double>())];
      bucket.first += s;
      bucket.second += 1;
    }
  }
  Json metrics = Json::object();
  double sum = 0;
  for (const auto& [d, st] : per_dataset) {
    metrics[d] = python_round(100 * st.first / static_cast<double>(st.second), 2);
    sum += metrics[d].get<double>();
  }
  metrics["avg"] =
      python_round(sum / static_cast<double>(std::max<size_t>(per_dataset.size(), 1)), 2);
  for (const auto& [key, st] : buckets)  // LongBench-E: "<dataset>/0-4k" ...
    metrics[key] = numpy_round(100 * st.first / static_cast<double>(st.second), 2);
  return metrics;
}

namespace {

class LongBench final : public Benchmark {
 public:
  explicit LongBench(const LongBenchOptions& o) : o_(o) {}

  std::string name() const override { return "longbench"; }

  void load_data() override {
    const fs::path data(o_.data_dir);
    const fs::path prompt_file = data / "config" / "dataset2prompt.json",
                   maxlen_file = data / "config" / "dataset2maxlen.json";
    RETAIN_CHECK(fs::exists(prompt_file), prompt_file.string(),
                 " is missing: --data must be a LongBench checkout");
    RETAIN_CHECK(fs::exists(maxlen_file), maxlen_file.string(),
                 " is missing: --data must be a LongBench checkout");
    const Json prompts = read_json_file(prompt_file);
    maxlens_ = read_json_file(maxlen_file);
    datasets_ = !o_.datasets.empty() ? o_.datasets : (o_.e ? kDefaultTasksE : kDefaultTasks);
    for (const auto& d : datasets_) {
      RETAIN_CHECK(longbench_metric(d).has_value(), "eval longbench: dataset '", d,
                   "' is not supported (English + code tasks)");
      RETAIN_CHECK(prompts.contains(d), prompt_file.string(), ": no prompt for dataset '", d, "'");
      RETAIN_CHECK(maxlens_.contains(d), maxlen_file.string(), ": no max length for dataset '", d,
                   "'");
    }
    for (const auto& d : datasets_) {
      const fs::path file = data / "data" / (d + (o_.e ? "_e" : "") + ".jsonl");
      RETAIN_CHECK(fs::exists(file), file.string(), " is missing (download LongBench's data into ",
                   (data / "data").string(), ")");
      std::ifstream in(file);
      std::string line;
      int64_t kept = 0;
      for (int64_t n = 1; std::getline(in, line); ++n) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        if (o_.limit > 0 && kept >= o_.limit) break;
        const std::string where = str_cat(file.string(), ":", n);
        Json j = parse_json(line, where);
        RETAIN_CHECK(j.is_object(), where, ": expected a JSON object");
        std::map<std::string, std::string> fields;
        for (const auto& [k, v] : j.items()) fields[k] = field_text(v);
        const std::string templ = prompts[d].get<std::string>();
        records_.push_back(
            {d, j.contains("_id") ? field_text(j["_id"]) : str_cat(d, "-", n),
             format_prompt(templ, fields, where), question_part(templ, fields, where),
             json_get<Json>(j, "answers", where), j.value("all_classes", Json(nullptr)),
             j.value("length", Json(nullptr))});
        ++kept;
      }
    }
  }

  void prepare(const EvalModel& m) override {
    max_length_ = o_.max_length > 0 ? o_.max_length : m.model->config().max_position_embeddings;
    use_chat_ = o_.chat.chat || (!o_.chat.no_chat && has_chat_template(o_.sweep.model.model_dir));
    if (use_chat_) template_ = load_chat_template(o_.sweep.model.model_dir, o_.chat.chat_template);
    newline_ids_ = m.tokenizer->encode("\n");
  }

  Json config() const override {
    return {{"data", o_.data_dir},
            {"datasets", datasets_},
            {"e", o_.e},
            {"max_length", max_length_},
            {"chat", use_chat_},
            {"limit", o_.limit},
            {"protect_question", o_.protect_question}};
  }

  size_t units() const override { return records_.size(); }
  std::string unit_key(size_t i) const override {
    return str_cat(records_[i].dataset, "|", records_[i].id);
  }
  std::string record_key(const Json& j) const override {
    return str_cat(j.at("dataset").get<std::string>(), "|", j.at("id").get<std::string>());
  }

  GenerationRequest request(size_t i, const UnitContext& c) const override {
    const Record& r = records_[i];
    // Middle truncation on the raw prompt, as pred.py does before the chat template.
    std::string text = r.prompt_text;
    auto ids = c.tokenizer.encode_prompt(text);
    if (static_cast<int64_t>(ids.size()) > max_length_) {
      const int64_t half = max_length_ / 2;
      text = c.tokenizer.decode(std::vector<int64_t>(ids.begin(), ids.begin() + half), true) +
             c.tokenizer.decode(std::vector<int64_t>(ids.end() - half, ids.end()), true);
    }
    const bool chat = template_ && !kNoChat.count(r.dataset);
    const std::string fed = chat ? template_->render({{"user", text}}, ChatOptions{}) : text;
    GenerationRequest q;
    q.prompt = chat ? c.tokenizer.encode(fed) : c.tokenizer.encode_prompt(text);
    q.max_new_tokens = maxlens_[r.dataset].get<int64_t>();
    if (r.dataset == "samsum" && !newline_ids_.empty())
      q.extra_stop_ids.push_back(newline_ids_.back());
    // --protect-question: the template's part after {context}, where it survived truncation.
    if (o_.protect_question && !r.question_text.empty() &&
        fed.rfind(r.question_text) != std::string::npos)
      q.protect_from = question_start(c.tokenizer, fed, r.question_text, /*with_bos=*/!chat);
    return q;
  }

  Json record(size_t i, const GenerationRequest& q, const GenerationResult& g, Json fields,
              const UnitContext& c) const override {
    const Record& r = records_[i];
    fields.update({{"dataset", r.dataset},
                   {"id", r.id},
                   {"pred", c.tokenizer.decode(g.tokens, true)},
                   {"answers", r.answers},
                   {"all_classes", r.all_classes},
                   {"length", r.length}});
    if (o_.protect_question)
      fields["question_start"] = q.protect_from >= 0 ? Json(q.protect_from) : Json(nullptr);
    return fields;
  }

  Json aggregate(const std::vector<Json>& records) const override {
    return longbench_metrics(records, o_.e,
                             [](size_t i) { return str_cat("predictions.jsonl record ", i); });
  }
  PlotSpec plot() const override {
    PlotSpec spec{o_.e ? "LongBench-E" : "LongBench", "score", {{"avg", "average"}}, "", true};
    for (const auto& d : datasets_) spec.panels.push_back({d, d});
    return spec;
  }

 private:
  struct Record {
    std::string dataset, id, prompt_text, question_text;
    Json answers, all_classes, length;
  };
  LongBenchOptions o_;
  std::vector<std::string> datasets_;
  Json maxlens_;
  std::vector<Record> records_;
  int64_t max_length_ = 0;
  bool use_chat_ = false;
  std::optional<ChatTemplate> template_;
  std::vector<int64_t> newline_ids_;
};

}  // namespace

int run_longbench_eval(const LongBenchOptions& o) {
  LongBench benchmark(o);
  return run_sweep(benchmark, o.sweep);
}

BenchmarkScoring longbench_scoring() {
  BenchmarkScoring s;
  s.name = "longbench";
  s.prepare = [](Json& j, const std::string& file, bool e, const std::string& where) {
    // LongBench's own pred files are named after their dataset and carry no "dataset" field.
    if (!j.contains("dataset")) j["dataset"] = fs::path(file).stem().string();
    if (e) json_get<double>(j, "length", where);  // required
  };
  s.metrics = [](const std::vector<Json>& records, bool e, const RecordWhere& where) {
    return longbench_metrics(records, e, where);
  };
  s.figure = [](const std::vector<ScoreRow>& rows, PlotSpec& plot, std::vector<std::string>&) {
    // One panel per dataset; LongBench-E's length buckets ("hotpotqa/0-4k") stay in the table.
    plot.panels = {{"avg", "overall"}};
    plot.percent = true;
    add_metric_panels(rows, plot,
                      [](const std::string& m) { return m.find('/') == std::string::npos; });
  };
  return s;
}

}  // namespace retain
