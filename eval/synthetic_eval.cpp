#include "eval/synthetic_eval.h"

#include <c10/core/InferenceMode.h>

#include <fstream>
#include <map>
#include <set>

#include "checkpoints/gate_file.h"
#include "core/device.h"
#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "core/progress.h"
#include "data/synthetic.h"
#include "eval/cache_factory.h"
#include "eval/plot.h"
#include "eval/scores.h"
#include "eval/sweep.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "model/tokenizer.h"

namespace retain {

std::string first_line_trimmed(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : line.substr(b, e - b + 1);
}

namespace {

std::string run_key(const std::string& policy, const Json& budget, const std::string& id,
                    size_t turn) {
  return str_cat(policy, "|", budget.dump(), "|", id, "|", turn);
}

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

}  // namespace

int run_synthetic_eval(const SyntheticEvalOptions& o) {
  RETAIN_CHECK(!o.out.empty(), "eval synthetic: --out is required");
  const auto cells = sweep_cells(o.policies, o.budgets, "eval synthetic");
  // Read the task file before the model: a malformed line fails in a second, not after loading.
  std::vector<SyntheticExample> file_examples;
  if (!o.data.empty()) file_examples = read_task_file(o.data);
  EvalModel m = load_eval_model(o.model, o.gates, true, o.policies);
  const Decoder& model = *m.model;
  const Tokenizer& tokenizer = *m.tokenizer;

  std::vector<SyntheticExample> examples;
  for (const auto& task : o.tasks) {
    auto part = o.data.empty() ? make_synthetic(task, o.count, o.context_words, o.seed)
                               : examples_of_task(file_examples, task);
    RETAIN_CHECK(!part.empty(), "eval synthetic: ", o.data, " has no example of task '", task, "'");
    if (o.limit > 0 && static_cast<int64_t>(part.size()) > o.limit)
      part.resize(static_cast<size_t>(o.limit));
    examples.insert(examples.end(), part.begin(), part.end());
  }

  const fs::path out = start_run_dir(o.out, Json{{"benchmark", "synthetic"},
                                                 {"model", o.model.model_dir},
                                                 {"policies", o.policies},
                                                 {"budgets", o.budgets},
                                                 {"gates", o.gates},
                                                 {"chunk", o.chunk},
                                                 {"tasks", o.tasks},
                                                 {"data", o.data},
                                                 {"count", o.count},
                                                 {"context_words", o.context_words},
                                                 {"seed", o.seed},
                                                 {"limit", o.limit},
                                                 {"max_new_tokens", o.max_new_tokens},
                                                 {"protect_question", o.protect_question},
                                                 {"question_mode", o.question_mode}});

  // Resume: every line already written is a finished (policy, budget, example, turn).
  PredictionLog log(out / "predictions.jsonl", [](const Json& j) {
    return run_key(j.at("policy"), j.at("budget"), j.at("id"), j.at("turn").get<size_t>());
  });

  int64_t total = 0;
  for (const auto& ex : examples) total += static_cast<int64_t>(ex.turns.size());
  ProgressBar bar("synthetic", total * static_cast<int64_t>(cells.size()), "q");
  c10::InferenceMode guard;
  std::vector<ScoreRow> rows;
  for (const auto& cell : cells) {
    PolicySpec policy = parse_policy(cell.policy);
    std::map<std::string, std::pair<int64_t, int64_t>> per_task;  // task -> (correct, total)
    double peak_sum = 0, prefill_rate = 0, decode_rate = 0;
    int64_t n = 0, max_attended = -1;
    for (const auto& ex : examples) {
      for (size_t t = 0; t < ex.turns.size(); ++t) {
        const std::string key = run_key(cell.policy, cell.budget, ex.id, t);
        Json record;
        if (const Json* previous = log.find(key)) {
          record = *previous;
        } else {
          const std::string prompt_text = synthetic_prompt(ex, t);
          const std::string question = "\nQuestion: " + ex.turns[t].first;
          auto prompt = tokenizer.encode_prompt(prompt_text);
          const auto prompt_len = static_cast<int64_t>(prompt.size());
          const bool keep = o.question_mode == "keep";
          // keep: the budget is a share of the context, which is compressed once on its own.
          const int64_t context_len =
              keep ? question_start(tokenizer, prompt_text, question, /*with_bos=*/true)
                   : prompt_len;
          auto cache = make_kv_cache(model.config(), policy,
                                     cell.budget.is_null() ? 0.0 : cell.budget.get<double>(),
                                     context_len, o.chunk, m.gates_for(policy));
          if (o.protect_question)
            protect_question(*cache, tokenizer, prompt_text, question, /*with_bos=*/true);
          SamplingOptions sampling;
          sampling.max_new_tokens = o.max_new_tokens;
          sampling.prefill_chunk = o.chunk;
          if (tokenizer.eos_id()) sampling.stop_ids = {*tokenizer.eos_id()};
          std::vector<int64_t> rest = prompt;
          if (keep && context_len > 0) {
            prefill(model, {prompt.begin(), prompt.begin() + context_len}, *cache, 0, o.chunk);
            cache->compress_context();
            rest.assign(prompt.begin() + context_len, prompt.end());
            sampling.start_position = context_len;
          }
          GenerationResult r = generate(model, rest, *cache, sampling);
          std::string pred = tokenizer.decode(r.tokens, /*skip_special=*/true);
          const int64_t peak = cache->peak_bytes();
          const std::string answer = ex.turns[t].second;
          record = {
              {"policy", cell.policy},
              {"budget", cell.budget},
              {"id", ex.id},
              {"task", ex.task},
              {"turn", t},
              {"pred", pred},
              {"answer", answer},
              {"correct", first_line_trimmed(pred) == answer},
              {"prompt_tokens", prompt_len},
              {"peak_kv_bytes", peak},
              // The most entries one generating query read in a KV head, and in all of them.
              {"max_attended_entries", r.max_attended_entries},
              {"max_attended_total", r.max_attended_total},
              // After the last step: with buffer 0 an evicting cache is back at its budget.
              {"live_kv_bytes", cache->live_bytes()},
              {"budget_kv_bytes", cache->budget_bytes()},
              {"prefill_tokens_per_s",
               r.prefill_seconds > 0 ? static_cast<double>(prompt_len) / r.prefill_seconds : 0.0},
              {"decode_tokens_per_s",
               r.decode_seconds > 0 && r.tokens.size() > 1
                   ? static_cast<double>(r.tokens.size() - 1) / r.decode_seconds
                   : 0.0}};
          log.append(record);
        }
        auto& [correct, count] = per_task[ex.task];
        correct += record["correct"].get<bool>() ? 1 : 0;
        count += 1;
        peak_sum += record["peak_kv_bytes"].get<double>();
        max_attended = std::max(max_attended, record.value("max_attended_entries", int64_t{-1}));
        prefill_rate += record["prefill_tokens_per_s"].get<double>();
        decode_rate += record["decode_tokens_per_s"].get<double>();
        ++n;
        bar.update(1);
      }
    }
    Json metrics = Json::object();
    int64_t all_correct = 0, all = 0;
    for (const auto& [task, ct] : per_task) {
      metrics["em_" + task] =
          100.0 * static_cast<double>(ct.first) / static_cast<double>(ct.second);
      all_correct += ct.first;
      all += ct.second;
    }
    metrics["em"] =
        100.0 * static_cast<double>(all_correct) / static_cast<double>(std::max<int64_t>(all, 1));
    metrics["peak_kv_bytes"] = peak_sum / static_cast<double>(std::max<int64_t>(n, 1));
    // The worst case over the predictions: at most budget + buffer + 1 per head (see README).
    metrics["max_attended_entries"] = max_attended;
    metrics["question_mode"] = o.question_mode;
    metrics["prefill_tokens_per_s"] = prefill_rate / static_cast<double>(std::max<int64_t>(n, 1));
    metrics["decode_tokens_per_s"] = decode_rate / static_cast<double>(std::max<int64_t>(n, 1));
    std::optional<double> budget;
    if (!cell.budget.is_null()) budget = cell.budget.get<double>();
    rows.push_back({cell.policy, budget, metrics});
  }
  bar.finish();
  write_scores(out, "synthetic", rows);
  write_score_plot(out / "plot.png", rows, "em", "synthetic: exact match vs budget");
  std::vector<std::string> columns = {"em"};
  for (const auto& task : o.tasks) columns.push_back("em_" + task);
  columns.push_back("peak_kv_bytes");
  columns.push_back("max_attended_entries");
  print_score_table(rows, columns);
  log_info("wrote ", (out / "scores.json").string());
  return 0;
}

}  // namespace retain
