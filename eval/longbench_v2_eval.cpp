#include "eval/longbench_v2_eval.h"

#include <c10/core/InferenceMode.h>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "core/progress.h"
#include "eval/cache_factory.h"
#include "eval/score_command.h"
#include "eval/sweep.h"
#include "model/chat_template.h"
#include "model/generate.h"

namespace retain {

namespace {

std::vector<Json> read_records(const std::string& path) {
  std::string text = read_text_file(path);
  size_t first = text.find_first_not_of(" \t\r\n");
  RETAIN_CHECK(first != std::string::npos, path, ": empty");
  std::vector<Json> out;
  if (text[first] == '[') {
    for (auto& j : parse_json(text, path)) out.push_back(j);
    return out;
  }
  std::istringstream in(text);
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n)
    if (line.find_first_not_of(" \t\r") != std::string::npos)
      out.push_back(parse_json(line, str_cat(path, ":", n)));
  return out;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

}  // namespace

int run_longbench_v2_eval(const LongBenchV2Options& o) {
  RETAIN_CHECK(!o.out.empty(), "eval longbench-v2: --out is required");
  fs::path template_path = o.template_file.empty()
                               ? fs::path(o.data).parent_path() / "prompts" / "0shot.txt"
                               : fs::path(o.template_file);
  RETAIN_CHECK(fs::exists(template_path), template_path.string(),
               " is missing: pass --template with LongBench v2's prompts/0shot.txt");
  const std::string templ = read_text_file(template_path);
  for (const char* field : {"$DOC$", "$Q$", "$C_A$", "$C_B$", "$C_C$", "$C_D$"})
    RETAIN_CHECK(templ.find(field) != std::string::npos, template_path.string(),
                 ": the template lacks ", field);
  auto records = read_records(o.data);
  if (o.limit > 0 && static_cast<int64_t>(records.size()) > o.limit)
    records.resize(static_cast<size_t>(o.limit));
  const auto cells = sweep_cells(o.policies, o.budgets, "eval longbench-v2");
  EvalModel m = load_eval_model(o.model, o.gates, true, o.policies);
  const Decoder& model = *m.model;
  const Tokenizer& tokenizer = *m.tokenizer;
  const int64_t max_length =
      o.max_length > 0 ? o.max_length : model.config().max_position_embeddings;
  const bool use_chat = o.chat.chat || (!o.chat.no_chat && has_chat_template(o.model.model_dir));
  std::optional<ChatTemplate> tmpl;
  if (use_chat) tmpl = load_chat_template(o.model.model_dir, o.chat.chat_template);

  const fs::path out = start_run_dir(o.out, Json({{"benchmark", "longbench-v2"},
                                                  {"model", o.model.model_dir},
                                                  {"data", o.data},
                                                  {"template", template_path.string()},
                                                  {"max_length", max_length},
                                                  {"chat", use_chat},
                                                  {"policies", o.policies},
                                                  {"budgets", o.budgets},
                                                  {"gates", o.gates},
                                                  {"chunk", o.chunk},
                                                  {"limit", o.limit}}));
  PredictionLog log(out / "predictions.jsonl", [](const Json& j) {
    return str_cat(j["policy"].get<std::string>(), "|", j["budget"].dump(), "|",
                   j["_id"].get<std::string>());
  });
  ProgressBar bar("longbench-v2", static_cast<int64_t>(records.size() * cells.size()), "q");
  c10::InferenceMode guard;
  for (const auto& cell : cells) {
    PolicySpec policy = parse_policy(cell.policy);
    for (size_t i = 0; i < records.size(); ++i) {
      const Json& r = records[i];
      const std::string where = str_cat(o.data, " record ", i);
      const std::string id =
          r.contains("_id") ? json_get<std::string>(r, "_id", where) : str_cat(i);
      if (log.find(str_cat(cell.policy, "|", cell.budget.dump(), "|", id)) != nullptr) {
        bar.update(1);
        continue;
      }
      std::string prompt = templ;
      prompt = replace_all(prompt, "$DOC$", json_get<std::string>(r, "context", where));
      prompt = replace_all(prompt, "$Q$", json_get<std::string>(r, "question", where));
      for (const char* c : {"A", "B", "C", "D"})
        prompt = replace_all(prompt, str_cat("$C_", c, "$"),
                             json_get<std::string>(r, str_cat("choice_", c), where));
      auto ids = tokenizer.encode(prompt);
      if (static_cast<int64_t>(ids.size()) >
          max_length) {  // pred.py: first and last max_len // 2 tokens
        const int64_t half = max_length / 2;
        prompt = tokenizer.decode(std::vector<int64_t>(ids.begin(), ids.begin() + half), true) +
                 tokenizer.decode(std::vector<int64_t>(ids.end() - half, ids.end()), true);
      }
      ids = tmpl ? tokenizer.encode(tmpl->render({{"user", prompt}}, ChatOptions{}))
                 : tokenizer.encode_prompt(prompt);
      SamplingOptions sampling;
      sampling.max_new_tokens = o.max_new_tokens;
      sampling.prefill_chunk = o.chunk;
      if (tokenizer.eos_id()) sampling.stop_ids.push_back(*tokenizer.eos_id());
      for (int64_t eos : model.config().eos_token_ids) sampling.stop_ids.push_back(eos);
      auto cache = make_kv_cache(model.config(), policy,
                                 cell.budget.is_null() ? 0.0 : cell.budget.get<double>(),
                                 static_cast<int64_t>(ids.size()), o.chunk, m.gates_for(policy));
      GenerationResult g = generate(model, ids, *cache, sampling);
      const std::string response = tokenizer.decode(g.tokens, true);
      log.append({{"policy", cell.policy},
                  {"budget", cell.budget},
                  {"_id", id},
                  {"difficulty", r.value("difficulty", "hard")},
                  {"length", r.value("length", "long")},
                  {"answer", json_get<std::string>(r, "answer", where)},
                  {"response", response},
                  {"pred", extract_choice(response)},
                  {"prompt_tokens", ids.size()},
                  {"peak_kv_bytes", cache->peak_bytes()},
                  {"max_attended_entries", g.max_attended_entries},
                  {"max_attended_total", g.max_attended_total}});
      bar.update(1);
    }
  }
  bar.finish();
  ScoreCommandOptions score;
  score.benchmark = "longbench-v2";
  score.predictions = (out / "predictions.jsonl").string();
  score.out = out.string();
  return run_score_command(score);
}

}  // namespace retain
