#include "eval/longbench_eval.h"

#include <c10/core/InferenceMode.h>

#include <fstream>
#include <set>

#include "checkpoints/gate_file.h"
#include "core/device.h"
#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "core/progress.h"
#include "eval/cache_factory.h"
#include "eval/metrics.h"
#include "eval/plot.h"
#include "eval/scores.h"
#include "eval/sweep.h"
#include "model/chat_template.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "model/tokenizer.h"

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

std::string format_prompt(const std::string& templ,
                          const std::map<std::string, std::string>& fields,
                          const std::string& where) {
  std::string out;
  for (size_t i = 0; i < templ.size(); ++i) {
    char c = templ[i];
    if ((c == '{' || c == '}') && i + 1 < templ.size() && templ[i + 1] == c) {
      out.push_back(c);
      ++i;
      continue;
    }
    if (c == '}') fail(where, ": single '}' in the prompt template");
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    size_t close = templ.find('}', i);
    RETAIN_CHECK(close != std::string::npos, where, ": unclosed '{' in the prompt template");
    std::string name = templ.substr(i + 1, close - i - 1);
    auto it = fields.find(name);
    RETAIN_CHECK(it != fields.end(), where, ": the prompt template uses {", name,
                 "}, which the record lacks");
    out += it->second;
    i = close;
  }
  return out;
}

int run_longbench_eval(const LongBenchOptions& o) {
  RETAIN_CHECK(!o.out.empty(), "eval longbench: --out is required");
  fs::path data(o.data_dir);
  const fs::path prompt_file = data / "config" / "dataset2prompt.json",
                 maxlen_file = data / "config" / "dataset2maxlen.json";
  RETAIN_CHECK(fs::exists(prompt_file), prompt_file.string(),
               " is missing: --data must be a LongBench checkout with config/dataset2prompt.json");
  RETAIN_CHECK(fs::exists(maxlen_file), maxlen_file.string(),
               " is missing: --data must be a LongBench checkout");
  const Json prompts = read_json_file(prompt_file), maxlens = read_json_file(maxlen_file);
  std::vector<std::string> datasets =
      !o.datasets.empty() ? o.datasets : (o.e ? kDefaultTasksE : kDefaultTasks);
  for (const auto& d : datasets) {
    RETAIN_CHECK(longbench_metric(d).has_value(), "eval longbench: dataset '", d,
                 "' is not supported (English + code tasks)");
    RETAIN_CHECK(prompts.contains(d), prompt_file.string(), ": no prompt for dataset '", d, "'");
    RETAIN_CHECK(maxlens.contains(d), maxlen_file.string(), ": no max length for dataset '", d,
                 "'");
  }

  const auto cells = sweep_cells(o.policies, o.budgets, "eval longbench");
  EvalModel m = load_eval_model(o.model, o.gates, true, o.policies);
  const Decoder& model = *m.model;
  const Tokenizer& tokenizer = *m.tokenizer;
  const ModelConfig& config = model.config();
  const int64_t max_length = o.max_length > 0 ? o.max_length : config.max_position_embeddings;
  bool use_chat = o.chat.chat || (!o.chat.no_chat && has_chat_template(o.model.model_dir));
  std::optional<ChatTemplate> tmpl;
  if (use_chat) tmpl = load_chat_template(o.model.model_dir, o.chat.chat_template);

  struct Record {
    std::string dataset, id, prompt_text, question_text;
    Json answers, all_classes, length;
  };
  std::vector<Record> records;
  for (const auto& d : datasets) {
    fs::path file = data / "data" / (d + (o.e ? "_e" : "") + ".jsonl");
    RETAIN_CHECK(fs::exists(file), file.string(), " is missing (download LongBench's data into ",
                 (data / "data").string(), ")");
    std::ifstream in(file);
    std::string line;
    int64_t kept = 0;
    for (int64_t n = 1; std::getline(in, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      if (o.limit > 0 && kept >= o.limit) break;
      const std::string where = str_cat(file.string(), ":", n);
      Json j = parse_json(line, where);
      RETAIN_CHECK(j.is_object(), where, ": expected a JSON object");
      std::map<std::string, std::string> fields;
      for (const auto& [k, v] : j.items()) fields[k] = field_text(v);
      Record r{d,
               j.contains("_id") ? field_text(j["_id"]) : str_cat(d, "-", n),
               format_prompt(prompts[d].get<std::string>(), fields, where),
               "",
               json_get<Json>(j, "answers", where),
               j.value("all_classes", Json(nullptr)),
               j.value("length", Json(nullptr))};
      records.push_back(std::move(r));
      ++kept;
    }
  }

  const fs::path out = start_run_dir(o.out, Json({{"benchmark", "longbench"},
                                                  {"model", o.model.model_dir},
                                                  {"data", o.data_dir},
                                                  {"datasets", datasets},
                                                  {"e", o.e},
                                                  {"max_length", max_length},
                                                  {"chat", use_chat},
                                                  {"policies", o.policies},
                                                  {"budgets", o.budgets},
                                                  {"gates", o.gates},
                                                  {"chunk", o.chunk},
                                                  {"limit", o.limit},
                                                  {"protect_question", o.protect_question}}));
  PredictionLog log(out / "predictions.jsonl", [](const Json& j) {
    return str_cat(j["policy"].get<std::string>(), "|", j["budget"].dump(), "|",
                   j["dataset"].get<std::string>(), "|", j["id"].get<std::string>());
  });
  const auto newline_ids = tokenizer.encode("\n");
  ProgressBar bar("longbench", static_cast<int64_t>(records.size() * cells.size()), "ex");
  c10::InferenceMode guard;
  std::vector<ScoreRow> rows;
  for (const auto& [spec, budget] : cells) {
    PolicySpec policy = parse_policy(spec);
    std::map<std::string, std::pair<double, int64_t>> per_dataset, buckets;
    for (const auto& r : records) {
      const std::string key = str_cat(spec, "|", budget.dump(), "|", r.dataset, "|", r.id);
      Json result;
      if (const Json* previous = log.find(key)) {
        result = *previous;
      } else {
        // Middle truncation on the raw prompt, as pred.py does before the chat template.
        std::string text = r.prompt_text;
        auto ids = tokenizer.encode_prompt(text);
        if (static_cast<int64_t>(ids.size()) > max_length) {
          const int64_t half = max_length / 2;
          text = tokenizer.decode(std::vector<int64_t>(ids.begin(), ids.begin() + half), true) +
                 tokenizer.decode(std::vector<int64_t>(ids.end() - half, ids.end()), true);
        }
        const bool chat = tmpl && !kNoChat.count(r.dataset);
        const std::string rendered = chat ? tmpl->render({{"user", text}}, ChatOptions{}) : text;
        ids = chat ? tokenizer.encode(rendered) : tokenizer.encode_prompt(text);
        SamplingOptions sampling;
        sampling.max_new_tokens = maxlens[r.dataset].get<int64_t>();
        sampling.prefill_chunk = o.chunk;
        if (tokenizer.eos_id()) sampling.stop_ids.push_back(*tokenizer.eos_id());
        for (int64_t eos : model.config().eos_token_ids) sampling.stop_ids.push_back(eos);
        if (r.dataset == "samsum" && !newline_ids.empty())
          sampling.stop_ids.push_back(newline_ids.back());
        auto cache =
            make_kv_cache(model.config(), policy, budget.is_null() ? 0.0 : budget.get<double>(),
                          static_cast<int64_t>(ids.size()), o.chunk, m.gates_for(policy));
        GenerationResult g = generate(model, ids, *cache, sampling);
        const int64_t peak = cache->peak_bytes();
        result = {{"policy", spec},
                  {"budget", budget},
                  {"dataset", r.dataset},
                  {"id", r.id},
                  {"pred", tokenizer.decode(g.tokens, true)},
                  {"answers", r.answers},
                  {"all_classes", r.all_classes},
                  {"length", r.length},
                  {"prompt_tokens", ids.size()},
                  {"peak_kv_bytes", peak},
                  {"max_attended_entries", g.max_attended_entries},
                  {"max_attended_total", g.max_attended_total}};
        log.append(result);
      }
      std::vector<std::string> classes;
      if (result["all_classes"].is_array())
        classes = result["all_classes"].get<std::vector<std::string>>();
      double s = longbench_score(r.dataset, result["pred"].get<std::string>(),
                                 result["answers"].get<std::vector<std::string>>(), classes);
      per_dataset[r.dataset].first += s;
      per_dataset[r.dataset].second += 1;
      if (o.e && result["length"].is_number()) {
        auto& bucket =
            buckets[r.dataset + "/" + longbench_e_bucket(result["length"].get<double>())];
        bucket.first += s;
        bucket.second += 1;
      }
      bar.update(1);
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
    std::optional<double> b;
    if (budget.is_number()) b = budget.get<double>();
    rows.push_back({spec, b, metrics});
  }
  bar.finish();
  write_scores(out, "longbench", rows);
  write_score_plot(out / "plot.png", rows, "avg", "longbench: average score vs budget");
  print_score_table(rows);
  log_info("wrote ", (out / "scores.json").string());
  return 0;
}

}  // namespace retain
