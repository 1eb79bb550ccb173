#include "eval/benchmarks/ruler.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "data/ruler.h"
#include "eval/benchmarks/benchmark.h"
#include "eval/benchmarks/scoring.h"
#include "eval/bootstrap.h"
#include "eval/metrics.h"
#include "model/chat_template.h"
#include "model/tokenizers/tokenizer.h"

namespace retain {

namespace {

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// kvpress's compression ratio as its run directories write it: two decimals.
std::string fixed2(double x) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(2);
  out << x;
  return out.str();
}

// A CSV field: quoted when it holds a comma, a quote or a newline (policy specs hold commas).
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// The needle-in-a-haystack tasks, whose mean is the "niah" headline.
bool is_niah(const std::string& task) { return task.rfind("niah", 0) == 0; }

// A record's unit for the bootstrap (eval/bootstrap.h): its prompt, stratified by task and length.
ScoredUnit ruler_unit(const Json& record, const std::string& where) {
  return {json_get<std::string>(record, "id", where),
          str_cat(json_get<std::string>(record, "task", where), "@",
                  json_get<int64_t>(record, "length", where)),
          json_get<double>(record, "score", where)};
}

// "ruler" over every task and "niah" over the needle tasks, each the mean of its strata.
std::vector<BootstrapMetric> ruler_bootstrap_metrics() {
  return {{"ruler", [](const std::string&) { return true; }},
          {"niah", [](const std::string& stratum) { return is_niah(stratum); }}};
}

// A cell's metrics: per (task, length) the mean score x 100 (RULER's round to 2 decimals); a
// task's score is its mean over the lengths, a length's the mean over its tasks, "ruler" the mean
// over all tasks and "niah" over the needle tasks (the issue's and TrimKV's headline; without
// vt's chains). `per_length` adds each length's and each (task, length)'s.
Json ruler_metrics(const std::vector<Json>& records, bool per_length, const RecordWhere& where) {
  std::map<std::pair<std::string, int64_t>, std::pair<double, int64_t>> cells;
  double peak = 0;
  int64_t max_attended = -1;
  for (size_t i = 0; i < records.size(); ++i) {
    const Json& r = records[i];
    const std::string at = where(i);
    auto& [sum, n] =
        cells[{json_get<std::string>(r, "task", at), json_get<int64_t>(r, "length", at)}];
    sum += json_get<double>(r, "score", at);
    n += 1;
    peak += r.value("peak_kv_bytes", 0.0);
    max_attended = std::max(max_attended, r.value("max_attended_entries", int64_t{-1}));
  }
  Json metrics = Json::object();
  std::map<std::string, std::vector<double>> per_task;
  std::map<int64_t, std::vector<double>> per_length_scores;
  for (const auto& [key, sn] : cells) {
    const double score = python_round(100.0 * sn.first / static_cast<double>(sn.second), 2);
    per_task[key.first].push_back(score);
    per_length_scores[key.second].push_back(score);
    if (per_length) metrics[str_cat(key.first, "@", key.second)] = score;
  }
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  };
  std::vector<double> task_scores, niah_scores;
  for (const auto& [task, scores] : per_task) {
    metrics[task] = python_round(mean(scores), 2);
    task_scores.push_back(mean(scores));
    if (is_niah(task)) niah_scores.push_back(mean(scores));
  }
  if (per_length)
    for (const auto& [length, scores] : per_length_scores)
      metrics[str_cat("ruler@", length)] = python_round(mean(scores), 2);
  metrics["ruler"] = python_round(mean(task_scores), 2);
  if (!niah_scores.empty()) metrics["niah"] = python_round(mean(niah_scores), 2);
  metrics["peak_kv_bytes"] = records.empty() ? 0.0 : peak / static_cast<double>(records.size());
  metrics["max_attended_entries"] = max_attended;
  return metrics;
}

class RulerBenchmark final : public Benchmark {
 public:
  explicit RulerBenchmark(const RulerEvalOptions& o) : o_(o) {}

  std::string name() const override { return "ruler"; }
  std::string unit_name() const override { return "q"; }

  void load_data() override {
    RETAIN_CHECK(o_.question_mode == "evict" || o_.question_mode == "keep",
                 "eval ruler: --question-mode must be evict or keep, found '", o_.question_mode,
                 "'");
    RETAIN_CHECK(o_.samples >= 1, "eval ruler: --samples must be >= 1, found ", o_.samples);
    RETAIN_CHECK(!o_.lengths.empty(), "eval ruler: --lengths is empty");
    for (int64_t length : o_.lengths)
      RETAIN_CHECK(length >= 256, "eval ruler: --lengths must be >= 256 tokens, found ", length);
    sources_ = read_ruler_sources(o_.essays, o_.squad, o_.hotpotqa);
    const auto& all = ruler_task_names();
    if (o_.tasks.empty()) {
      for (const auto& task : all)
        if (ruler_task_available(task, sources_)) tasks_.push_back(task);
    } else {
      for (const auto& task : o_.tasks) {
        RETAIN_CHECK(std::find(all.begin(), all.end(), task) != all.end(), "eval ruler: --tasks '",
                     task, "' is not a RULER task (expected ", join_names(all), "); did you mean '",
                     closest_name(task, all), "'?");
        RETAIN_CHECK(ruler_task_available(task, sources_), "eval ruler: --tasks ", task,
                     " needs --", task == "qa_1" ? "squad" : "hotpotqa");
        tasks_.push_back(task);
      }
    }
  }

  void prepare(const EvalModel& m) override {
    use_chat_ = o_.chat.chat || (!o_.chat.no_chat && has_chat_template(o_.sweep.model.model_dir));
    if (use_chat_) chat_ = load_chat_template(o_.sweep.model.model_dir, o_.chat.chat_template);
    const Tokenizer& tokenizer = *m.tokenizer;
    const int64_t trained = m.model->config().max_position_embeddings;
    for (int64_t length : o_.lengths)
      if (trained > 0 && length > trained)
        log_warn("eval ruler: --lengths ", length, " exceeds the model's max_position_embeddings (",
                 trained, "); its positions past that are extrapolated");
    // RULER fits lengths with the model's tokenizer, without special tokens and (with a model
    // template) with the template's text in: the chat wrapping counts here too.
    const auto count = [&](const std::string& text) {
      return static_cast<int64_t>(tokenizer.encode(text).size());
    };
    const std::string wrap_cost = use_chat_ ? render("", "") : "";
    const int64_t overhead = use_chat_ ? count(wrap_cost) : 0;
    for (int64_t length : o_.lengths)
      for (const auto& task : tasks_) {
        log_info("eval ruler: generating ", o_.samples, " ", task, " samples at ", length,
                 " tokens");
        auto part = make_ruler(
            task, length, o_.samples, o_.seed,
            [&](const std::string& text) { return count(text) + overhead; }, sources_);
        for (auto& s : part) {
          haystacks_[task] = s.haystack;
          samples_.push_back(std::move(s));
        }
      }
    // Where each needle starts in the prompt, for depth-vs-recall analyses of the records.
    for (const RulerSample& s : samples_) {
      const PromptText p = prompt_text(s);
      std::vector<size_t> bytes;
      for (const auto& needle : s.needles)
        bytes.push_back(p.context_start + s.context.find(needle));
      needle_tokens_.push_back(bytes.empty() ? std::vector<int64_t>{}
                                             : token_indices_at(tokenizer, p.text, bytes, p.bos));
    }
  }

  Json config() const override {
    return {{"lengths", o_.lengths},   {"tasks", tasks_},
            {"samples", o_.samples},   {"seed", o_.seed},
            {"essays", o_.essays},     {"squad", o_.squad},
            {"hotpotqa", o_.hotpotqa}, {"haystacks", haystacks_},
            {"chat", use_chat_},       {"question_mode", o_.question_mode}};
  }

  size_t units() const override { return samples_.size(); }
  std::string unit_key(size_t i) const override { return samples_[i].id; }
  std::string record_key(const Json& j) const override { return j.at("id").get<std::string>(); }

  GenerationRequest request(size_t i, const UnitContext& c) const override {
    const RulerSample& s = samples_[i];
    const PromptText p = prompt_text(s);
    GenerationRequest q;
    q.max_new_tokens = s.max_new_tokens;
    q.prompt = use_chat_ ? c.tokenizer.encode(p.text) : c.tokenizer.encode_prompt(p.text);
    if (o_.question_mode == "keep") {
      q.context_tokens = question_start(c.tokenizer, p.text,
                                        p.text.substr(p.context_start + s.context.size()), p.bos);
      q.budget_tokens = q.context_tokens;
    }
    return q;
  }

  Json record(size_t i, const GenerationRequest& /*request*/, const GenerationResult& r,
              Json fields, const UnitContext& c) const override {
    const RulerSample& s = samples_[i];
    const std::string pred = ruler_postprocess(c.tokenizer.decode(r.tokens, true));
    fields.update({{"id", s.id},
                   {"task", s.task},
                   {"length", s.length},
                   {"needle_tokens", needle_tokens_[i]},
                   {"outputs", s.outputs},
                   {"pred", pred},
                   {"score", ruler_string_match(pred, s.outputs, !ruler_uses_match_part(s.task))}});
    return fields;
  }

  Json aggregate(const std::vector<Json>& records) const override {
    return ruler_metrics(records, o_.lengths.size() > 1,
                         [](size_t) { return std::string("a RULER record"); });
  }

  std::optional<ScoredUnit> unit_score(const Json& record) const override {
    return ruler_unit(record, "a RULER record");
  }
  std::vector<BootstrapMetric> bootstrap_metrics() const override {
    return ruler_bootstrap_metrics();
  }

  PlotSpec plot() const override {
    PlotSpec spec{"RULER", "score", {{"ruler", "mean of the tasks"}}, "peak_kv_bytes", true};
    for (const auto& task : tasks_) spec.panels.push_back({task, task});
    return spec;
  }
  std::vector<std::string> table_columns() const override {
    std::vector<std::string> columns = {"ruler"};
    // The paired difference to the full cache of the needle tasks (where there are any), the
    // headline the sweep's interval is for.
    if (std::any_of(tasks_.begin(), tasks_.end(), is_niah))
      columns.insert(columns.end(), {"niah", "niah_vs_full"});
    else
      columns.push_back("ruler_vs_full");
    if (o_.lengths.size() > 1)
      for (int64_t length : o_.lengths) columns.push_back(str_cat("ruler@", length));
    for (const auto& task : tasks_) columns.push_back(task);
    columns.push_back("max_attended_entries");
    return columns;
  }

  const std::vector<std::string>& tasks() const { return tasks_; }

 private:
  // The chat-rendered prompt: `user` as the user's turn, then the generation prompt, then `after`
  // (the answer prefix). Thinking off, as kvpress renders it.
  std::string render(const std::string& user, const std::string& after) const {
    ChatOptions options;
    options.enable_thinking = false;
    return chat_->render({{"user", user}}, options) + after;
  }
  // A sample's prompt as text: with a chat template the rendered turn (the answer prefix after
  // the assistant header, as kvpress puts it), else the prompt, which encodes after the
  // tokenizer's BOS (`bos`). The context starts at byte `context_start`; the question follows.
  struct PromptText {
    std::string text;
    size_t context_start = 0;
    bool bos = false;  // the encoding starts with the tokenizer's prefix ids
  };
  PromptText prompt_text(const RulerSample& s) const {
    if (!use_chat_) return {s.prompt(), 0, true};
    const std::string opening = render("", "");
    std::string text = render(s.context + s.question, s.answer_prefix);
    // The user turn starts where the empty render and the full one first differ.
    size_t start = 0;
    while (start < opening.size() && start < text.size() && opening[start] == text[start]) ++start;
    RETAIN_CHECK(text.compare(start, s.context.size(), s.context) == 0, "eval ruler: ", s.id,
                 ": the chat template does not put the prompt's text verbatim in the user turn");
    return {std::move(text), start, false};
  }

  RulerEvalOptions o_;
  RulerSources sources_;
  std::vector<std::string> tasks_;
  std::vector<RulerSample> samples_;
  std::vector<std::vector<int64_t>> needle_tokens_;  // [sample]: where each needle starts
  std::map<std::string, std::string> haystacks_;
  bool use_chat_ = false;
  std::optional<ChatTemplate> chat_;
};

// DIR/leaderboard.csv from DIR/scores.json: kvpress's leaderboard columns (dataset, data_dir,
// model, method, compression_ratio, score), then retain's budget and the task scores. A
// fractional budget b of the context is kvpress's compression ratio 1 - b; an absolute budget
// has none.
void write_leaderboard(const fs::path& out, const RulerEvalOptions& o,
                       const std::vector<std::string>& tasks) {
  const Json scores =
      parse_json(read_text_file(out / "scores.json"), (out / "scores.json").string());
  std::ostringstream csv;
  csv << "dataset,data_dir,model,method,compression_ratio,score,budget";
  for (const auto& task : tasks) csv << "," << task;
  csv << "\n";
  const std::string model = fs::path(o.sweep.model.model_dir).filename().string();
  for (const auto& result : scores.at("results")) {
    const Json& m = result.at("metrics");
    const std::string policy = result.at("policy").get<std::string>();
    const Json& budget = result.at("budget");
    std::string ratio = "0.00";
    if (!budget.is_null())
      ratio = budget.get<double>() < 1 ? fixed2(1.0 - budget.get<double>()) : "";
    for (int64_t length : o.lengths) {
      const std::string suffix = o.lengths.size() > 1 ? str_cat("@", length) : "";
      csv << "ruler," << length << "," << csv_field(model) << "," << csv_field(policy) << ","
          << ratio << "," << m.at("ruler" + suffix).dump() << ","
          << (budget.is_null() ? "" : budget.dump());
      for (const auto& task : tasks)
        csv << "," << (m.contains(task + suffix) ? m.at(task + suffix).dump() : "");
      csv << "\n";
    }
  }
  write_text_file_atomic(out / "leaderboard.csv", csv.str());
}

}  // namespace

BenchmarkScoring ruler_scoring() {
  BenchmarkScoring s;
  s.name = "ruler";
  s.metrics = [](const std::vector<Json>& records, bool, const RecordWhere& where) {
    std::set<int64_t> lengths;
    for (size_t i = 0; i < records.size(); ++i)
      lengths.insert(json_get<int64_t>(records[i], "length", where(i)));
    return ruler_metrics(records, lengths.size() > 1, where);
  };
  s.unit_score = [](const Json& record, const std::string& where) {
    return std::optional<ScoredUnit>(ruler_unit(record, where));
  };
  s.bootstrap_metrics = ruler_bootstrap_metrics();
  s.figure = [](const std::vector<ScoreRow>& rows, PlotSpec& plot,
                std::vector<std::string>& columns) {
    plot = {"RULER", "score", {{"ruler", "mean of the tasks"}}, "peak_kv_bytes", true};
    const auto& tasks = ruler_task_names();
    add_metric_panels(rows, plot, [&](const std::string& metric) {
      return std::find(tasks.begin(), tasks.end(), metric) != tasks.end();
    });
    columns = {"ruler"};
    if (rows.front().metrics.contains("niah"))
      columns.insert(columns.end(), {"niah", "niah_vs_full"});
    else
      columns.push_back("ruler_vs_full");
    for (size_t p = 1; p < plot.panels.size(); ++p) columns.push_back(plot.panels[p].metric);
    columns.push_back("max_attended_entries");
  };
  return s;
}

int run_ruler_eval(const RulerEvalOptions& o) {
  RulerBenchmark benchmark(o);
  const int rc = run_sweep(benchmark, o.sweep);
  write_leaderboard(o.sweep.out, o, benchmark.tasks());
  log_info("wrote ", (fs::path(o.sweep.out) / "leaderboard.csv").string());
  return rc;
}

}  // namespace retain
