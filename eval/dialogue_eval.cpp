#include "eval/dialogue_eval.h"

#include <c10/core/InferenceMode.h>

#include <fstream>

#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "core/progress.h"
#include "eval/cache_factory.h"
#include "eval/metrics.h"
#include "eval/plot.h"
#include "eval/scores.h"
#include "eval/sweep.h"
#include "eval/synthetic_eval.h"
#include "model/generate.h"

namespace retain {

namespace {

struct Conversation {
  std::string id, context;
  std::vector<std::pair<std::string, std::vector<std::string>>> turns;  // question, answers
};

std::vector<Conversation> read_dialogues(const std::string& path, int64_t limit) {
  std::ifstream in(path);
  RETAIN_CHECK(in.good(), path, ": cannot open");
  std::vector<Conversation> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (limit > 0 && static_cast<int64_t>(out.size()) >= limit) break;
    const std::string where = str_cat(path, ":", n);
    Json j = parse_json(line, where);
    RETAIN_CHECK(j.is_object(), where, ": expected a JSON object");
    Conversation c;
    c.id = j.contains("id") ? (j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump())
                            : str_cat("line", n);
    c.context = json_get<std::string>(j, "context", where);
    const Json& turns = j.at("multi_turns");
    RETAIN_CHECK(turns.is_array() && !turns.empty(), where,
                 ": multi_turns must be a non-empty array");
    for (const auto& t : turns) {
      const Json& a = t.at("answer");
      std::vector<std::string> answers =
          a.is_array() ? a.get<std::vector<std::string>>()
                       : std::vector<std::string>{a.is_string() ? a.get<std::string>() : a.dump()};
      c.turns.emplace_back(json_get<std::string>(t, "input", where), answers);
    }
    out.push_back(std::move(c));
  }
  RETAIN_CHECK(!out.empty(), path, ": no dialogue records");
  return out;
}

}  // namespace

int run_dialogue_eval(const DialogueOptions& o) {
  RETAIN_CHECK(!o.out.empty(), "eval dialogue: --out is required");
  RETAIN_CHECK(o.history == "gold" || o.history == "own",
               "eval dialogue: --history must be gold or own, found '", o.history, "'");
  const auto cells = sweep_cells(o.policies, o.budgets, "eval dialogue");
  auto dialogues = read_dialogues(o.data, o.limit);
  EvalModel m = load_eval_model(o.model, o.gates, true, o.policies);
  const Decoder& model = *m.model;
  const Tokenizer& tokenizer = *m.tokenizer;

  const fs::path out = start_run_dir(o.out, Json({{"benchmark", "dialogue"},
                                                  {"model", o.model.model_dir},
                                                  {"data", o.data},
                                                  {"history", o.history},
                                                  {"policies", o.policies},
                                                  {"budgets", o.budgets},
                                                  {"gates", o.gates},
                                                  {"chunk", o.chunk},
                                                  {"max_new_tokens", o.max_new_tokens},
                                                  {"limit", o.limit}}));
  // A conversation is one unit: its turns depend on each other, so resumption redoes unfinished
  // ones.
  PredictionLog log(out / "predictions.jsonl", [](const Json& j) {
    return str_cat(j["policy"].get<std::string>(), "|", j["budget"].dump(), "|",
                   j["id"].get<std::string>());
  });
  ProgressBar bar("dialogue", static_cast<int64_t>(dialogues.size() * cells.size()), "conv");
  c10::InferenceMode guard;
  std::vector<ScoreRow> rows;
  for (const auto& cell : cells) {
    PolicySpec policy = parse_policy(cell.policy);
    std::map<size_t, std::array<double, 3>> per_turn;  // turn -> em, f1, rouge sums
    std::map<size_t, int64_t> turn_counts;
    for (const auto& d : dialogues) {
      const std::string key = str_cat(cell.policy, "|", cell.budget.dump(), "|", d.id);
      Json record;
      if (const Json* previous = log.find(key)) {
        record = *previous;
      } else {
        auto context_ids = tokenizer.encode_prompt(d.context);
        auto cache = make_kv_cache(
            model.config(), policy, cell.budget.is_null() ? 0.0 : cell.budget.get<double>(),
            static_cast<int64_t>(context_ids.size()), o.chunk, m.gates_for(policy));
        int64_t position = 0;
        std::vector<int64_t> pending = context_ids;  // tokens to feed before the next question
        Json turns = Json::array();
        for (size_t t = 0; t < d.turns.size(); ++t) {
          auto question = tokenizer.encode("\n\nQuestion: " + d.turns[t].first + "\nAnswer:");
          std::vector<int64_t> input = pending;
          input.insert(input.end(), question.begin(), question.end());
          SamplingOptions sampling;
          sampling.max_new_tokens = o.max_new_tokens;
          sampling.prefill_chunk = o.chunk;
          sampling.start_position = position;
          if (tokenizer.eos_id()) sampling.stop_ids = {*tokenizer.eos_id()};
          std::unique_ptr<KvCache> branch;
          KvCache& target = o.history == "gold" ? *(branch = cache->clone()) : *cache;
          GenerationResult g = generate(model, input, target, sampling);
          const std::string pred = tokenizer.decode(g.tokens, true);
          if (o.history == "own") {
            // The cache holds the input and every generated token but the last.
            position += static_cast<int64_t>(input.size() + g.tokens.size()) - 1;
            pending = {g.tokens.back()};
          } else {
            // The answer came from a copy; the shared cache continues with the gold answer.
            auto gold = tokenizer.encode(" " + d.turns[t].second.front());
            input.insert(input.end(), gold.begin(), gold.end());
            prefill(model, input, *cache, position, o.chunk);
            position += static_cast<int64_t>(input.size());
            pending.clear();
          }
          double em = 0, f1 = 0, rouge = 0;
          for (const auto& a : d.turns[t].second) {
            em = std::max(em, exact_match_score(first_line_trimmed(pred), a));
            f1 = std::max(f1, qa_f1_score(pred, a));
            rouge = std::max(rouge, rouge_l_score(pred, a));
          }
          turns.push_back({{"turn", t},
                           {"pred", pred},
                           {"answers", d.turns[t].second},
                           {"em", em},
                           {"f1", f1},
                           {"rouge_l", rouge},
                           {"max_attended_entries", g.max_attended_entries},
                           {"max_attended_total", g.max_attended_total}});
        }
        record = {{"policy", cell.policy},
                  {"budget", cell.budget},
                  {"id", d.id},
                  {"history", o.history},
                  {"turns", turns},
                  {"peak_kv_bytes", cache->peak_bytes()}};
        log.append(record);
      }
      for (const auto& t : record["turns"]) {
        auto index = t["turn"].get<size_t>();
        per_turn[index][0] += t["em"].get<double>();
        per_turn[index][1] += t["f1"].get<double>();
        per_turn[index][2] += t["rouge_l"].get<double>();
        turn_counts[index] += 1;
      }
      bar.update(1);
    }
    Json metrics = Json::object();
    std::array<double, 3> all{};
    int64_t all_n = 0;
    const char* names[] = {"em", "f1", "rouge_l"};
    for (const auto& [turn, sums] : per_turn) {
      for (int k = 0; k < 3; ++k) {
        metrics[str_cat(names[k], "_turn", turn + 1)] =
            python_round(100 * sums[k] / static_cast<double>(turn_counts[turn]), 2);
        all[k] += sums[k];
      }
      all_n += turn_counts[turn];
    }
    for (int k = 0; k < 3; ++k)
      metrics[names[k]] =
          python_round(100 * all[k] / static_cast<double>(std::max<int64_t>(all_n, 1)), 2);
    std::optional<double> b;
    if (cell.budget.is_number()) b = cell.budget.get<double>();
    rows.push_back({cell.policy, b, metrics});
  }
  bar.finish();
  write_scores(out, "dialogue", rows);
  write_score_plot(out / "plot.png", rows, "f1", "dialogue: F1 vs budget");
  print_score_table(rows);
  log_info("wrote ", (out / "scores.json").string());
  return 0;
}

}  // namespace retain
