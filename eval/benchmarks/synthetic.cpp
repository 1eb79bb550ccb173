#include "eval/benchmarks/synthetic.h"

#include <fstream>
#include <map>
#include <set>

#include "core/error.h"
#include "core/json.h"
#include "data/synthetic.h"
#include "eval/benchmarks/benchmark.h"
#include "model/tokenizers/tokenizer.h"

namespace retain {

std::string first_line_trimmed(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : line.substr(b, e - b + 1);
}

namespace {

std::vector<SyntheticExample> read_task_file(const std::string& path) {
  std::ifstream in(path);
  RETAIN_CHECK(in.good(), "eval synthetic: cannot read --data ", path);
  std::vector<SyntheticExample> out;
  std::set<std::string> ids;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = str_cat(path, ":", n);
    Json j;
    try {
      j = Json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail(where, ": not valid JSON (", e.what(), ")");
    }
    out.push_back(synthetic_from_json(j, where));
    RETAIN_CHECK(ids.insert(out.back().id).second, where, ": id '", out.back().id,
                 "' appears twice");
  }
  RETAIN_CHECK(!out.empty(), "eval synthetic: ", path, " holds no examples");
  return out;
}

std::vector<SyntheticExample> examples_of_task(const std::vector<SyntheticExample>& all,
                                               const std::string& task) {
  std::vector<SyntheticExample> out;
  for (const auto& ex : all)
    if (ex.task == task) out.push_back(ex);
  return out;
}

class SyntheticBenchmark final : public Benchmark {
 public:
  explicit SyntheticBenchmark(const SyntheticEvalOptions& o) : o_(o) {}

  std::string name() const override { return "synthetic"; }
  std::string unit_name() const override { return "q"; }

  void load_data() override {
    RETAIN_CHECK(o_.question_mode == "evict" || o_.question_mode == "keep",
                 "eval synthetic: --question-mode must be evict or keep, found '", o_.question_mode,
                 "'");
    std::vector<SyntheticExample> file_examples;
    if (!o_.data.empty()) file_examples = read_task_file(o_.data);
    for (const auto& task : o_.tasks) {
      auto part = o_.data.empty() ? make_synthetic(task, o_.count, o_.context_words, o_.seed)
                                  : examples_of_task(file_examples, task);
      RETAIN_CHECK(!part.empty(), "eval synthetic: ", o_.data, " has no example of task '", task,
                   "'");
      if (o_.limit > 0 && static_cast<int64_t>(part.size()) > o_.limit)
        part.resize(static_cast<size_t>(o_.limit));
      examples_.insert(examples_.end(), part.begin(), part.end());
    }
    // A unit is one question: an example's turn.
    for (size_t e = 0; e < examples_.size(); ++e)
      for (size_t t = 0; t < examples_[e].turns.size(); ++t) units_.emplace_back(e, t);
  }

  void prepare(const EvalModel& m) override {
    prompt_ids_.clear();
    for (const auto& [e, t] : units_)
      prompt_ids_.push_back(m.tokenizer->encode_prompt(synthetic_prompt(examples_[e], t)));
  }

  Json config() const override {
    return {{"tasks", o_.tasks},
            {"data", o_.data},
            {"count", o_.count},
            {"context_words", o_.context_words},
            {"seed", o_.seed},
            {"limit", o_.limit},
            {"max_new_tokens", o_.max_new_tokens},
            {"protect_question", o_.protect_question},
            {"question_mode", o_.question_mode}};
  }

  size_t units() const override { return units_.size(); }
  std::string unit_key(size_t i) const override {
    const auto [e, t] = units_[i];
    return str_cat(examples_[e].id, "|", t);
  }
  std::string record_key(const Json& j) const override {
    return str_cat(j.at("id").get<std::string>(), "|", j.at("turn").get<size_t>());
  }

  GenerationRequest request(size_t i, const UnitContext& c) const override {
    const auto [e, t] = units_[i];
    const SyntheticExample& ex = examples_[e];
    const std::string prompt_text = synthetic_prompt(ex, t);
    const std::string question = "\nQuestion: " + ex.turns[t].first;
    GenerationRequest q;
    q.prompt = prompt_ids_.at(i);
    q.max_new_tokens = o_.max_new_tokens;
    // keep: the context is compressed once on its own, and the budget is a share of it.
    if (o_.question_mode == "keep") {
      q.context_tokens = question_start(c.tokenizer, prompt_text, question, /*with_bos=*/true);
      q.budget_tokens = q.context_tokens;
    }
    if (o_.protect_question)
      q.protect_from = question_start(c.tokenizer, prompt_text, question, /*with_bos=*/true);
    return q;
  }

  Json record(size_t i, const GenerationRequest& /*request*/, const GenerationResult& r,
              Json fields, const UnitContext& c) const override {
    const auto [e, t] = units_[i];
    const SyntheticExample& ex = examples_[e];
    const std::string pred = c.tokenizer.decode(r.tokens, /*skip_special=*/true);
    const std::string answer = ex.turns[t].second;
    fields.update({{"id", ex.id},
                   {"task", ex.task},
                   {"turn", t},
                   {"pred", pred},
                   {"answer", answer},
                   {"correct", first_line_trimmed(pred) == answer}});
    return fields;
  }

  Json aggregate(const std::vector<Json>& records) const override {
    std::map<std::string, std::pair<int64_t, int64_t>> per_task;  // task -> (correct, total)
    double peak_sum = 0, prefill_rate = 0, decode_rate = 0;
    int64_t max_attended = -1;
    for (const auto& record : records) {
      auto& [correct, count] = per_task[record["task"].get<std::string>()];
      correct += record["correct"].get<bool>() ? 1 : 0;
      count += 1;
      peak_sum += record["peak_kv_bytes"].get<double>();
      max_attended = std::max(max_attended, record.value("max_attended_entries", int64_t{-1}));
      prefill_rate += record["prefill_tokens_per_s"].get<double>();
      decode_rate += record["decode_tokens_per_s"].get<double>();
    }
    const auto n = static_cast<double>(std::max<size_t>(records.size(), 1));
    Json metrics = Json::object();
    Json intervals = Json::object();  // 95% Wilson intervals over the questions
    int64_t all_correct = 0, all = 0;
    for (const auto& [task, ct] : per_task) {
      metrics["em_" + task] =
          100.0 * static_cast<double>(ct.first) / static_cast<double>(ct.second);
      const auto [lo, hi] = wilson_interval_percent(ct.first, ct.second);
      intervals["em_" + task] = {lo, hi};
      all_correct += ct.first;
      all += ct.second;
    }
    metrics["em"] =
        100.0 * static_cast<double>(all_correct) / static_cast<double>(std::max<int64_t>(all, 1));
    if (all > 0) {
      const auto [lo, hi] = wilson_interval_percent(all_correct, all);
      intervals["em"] = {lo, hi};
    }
    metrics["intervals"] = intervals;
    metrics["peak_kv_bytes"] = peak_sum / n;
    // The worst case over the predictions: at most budget + buffer + 1 per head (docs/evaluation.md).
    metrics["max_attended_entries"] = max_attended;
    metrics["question_mode"] = o_.question_mode;
    metrics["prefill_tokens_per_s"] = prefill_rate / n;
    metrics["decode_tokens_per_s"] = decode_rate / n;
    return metrics;
  }

  PlotSpec plot() const override {
    PlotSpec spec{"synthetic tasks", "exact match (%)", {{"em", "all tasks"}}, "peak_kv_bytes"};
    for (const auto& task : o_.tasks) spec.panels.push_back({"em_" + task, task});
    return spec;
  }
  std::optional<bool> unit_correct(const Json& record) const override {
    return record.at("correct").get<bool>();
  }
  std::vector<std::string> table_columns() const override {
    std::vector<std::string> columns = {"em", "em_vs_full"};
    for (const auto& task : o_.tasks) columns.push_back("em_" + task);
    columns.push_back("peak_kv_bytes");
    columns.push_back("max_attended_entries");
    return columns;
  }

 private:
  SyntheticEvalOptions o_;
  std::vector<SyntheticExample> examples_;
  std::vector<std::pair<size_t, size_t>> units_;  // (example, turn)
  // Every (policy, budget) cell asks for the same prompts: each is encoded once, in prepare
  // (encoding it for each of the demo's 34 cells was 2% of its sweep).
  std::vector<std::vector<int64_t>> prompt_ids_;  // per unit
};

}  // namespace

int run_synthetic_eval(const SyntheticEvalOptions& o) {
  SyntheticBenchmark benchmark(o);
  return run_sweep(benchmark, o.sweep);
}

}  // namespace retain
