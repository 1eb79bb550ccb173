#include "eval/benchmarks/dialogue.h"

#include <array>
#include <fstream>
#include <map>

#include "core/error.h"
#include "core/json.h"
#include "eval/benchmarks/benchmark.h"
#include "eval/benchmarks/data_files.h"
#include "eval/benchmarks/synthetic.h"
#include "eval/metrics.h"
#include "model/tokenizers/tokenizer.h"

namespace retain {

namespace {

class Dialogue final : public Benchmark {
 public:
  explicit Dialogue(const DialogueOptions& o) : o_(o) {}

  std::string name() const override { return "dialogue"; }
  // A conversation is one unit: its turns depend on each other, so resuming redoes unfinished ones.
  std::string unit_name() const override { return "conv"; }

  void load_data() override {
    RETAIN_CHECK(o_.history == "gold" || o_.history == "own",
                 "eval dialogue: --history must be gold or own, found '", o_.history, "'");
    dialogues_ = read_dialogue_file(o_.data, o_.limit);
  }

  Json config() const override {
    return {{"data", o_.data},
            {"history", o_.history},
            {"max_new_tokens", o_.max_new_tokens},
            {"limit", o_.limit}};
  }

  size_t units() const override { return dialogues_.size(); }
  std::string unit_key(size_t i) const override { return dialogues_[i].id; }
  std::string record_key(const Json& j) const override { return j.at("id").get<std::string>(); }

  // A conversation's turns depend on its earlier answers (own history) or on the cache its gold
  // history left: it runs whole, one conversation at a time.
  bool single_generation() const override { return false; }
  Json run(size_t i, const UnitContext& c) const override {
    const DialogueRecord& d = dialogues_[i];
    auto context_ids = c.tokenizer.encode_prompt(d.context);
    auto cache = c.make_cache(static_cast<int64_t>(context_ids.size()));
    int64_t position = 0;
    std::vector<int64_t> pending = context_ids;  // tokens to feed before the next question
    Json turns = Json::array();
    for (size_t t = 0; t < d.turns.size(); ++t) {
      auto question = c.tokenizer.encode("\n\nQuestion: " + d.turns[t].first + "\nAnswer:");
      std::vector<int64_t> input = pending;
      input.insert(input.end(), question.begin(), question.end());
      SamplingOptions sampling = c.sampling(o_.max_new_tokens);
      sampling.start_position = position;
      std::unique_ptr<KvCache> branch;
      KvCache& target = o_.history == "gold" ? *(branch = cache->clone()) : *cache;
      GenerationResult g = generate(c.model, input, target, sampling);
      const std::string pred = c.tokenizer.decode(g.tokens, true);
      if (o_.history == "own") {
        // The cache holds the input and every generated token but the last.
        position += static_cast<int64_t>(input.size() + g.tokens.size()) - 1;
        pending = {g.tokens.back()};
      } else {
        // The answer came from a copy; the shared cache continues with the gold answer.
        auto gold = c.tokenizer.encode(" " + d.turns[t].second.front());
        input.insert(input.end(), gold.begin(), gold.end());
        prefill(c.model, input, *cache, position, c.chunk);
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
    return {{"id", d.id},
            {"history", o_.history},
            {"turns", turns},
            {"peak_kv_bytes", cache->peak_bytes()}};
  }

  Json aggregate(const std::vector<Json>& records) const override {
    std::map<size_t, std::array<double, 3>> per_turn;  // turn -> em, f1, rouge sums
    std::map<size_t, int64_t> turn_counts;
    for (const auto& record : records)
      for (const auto& t : record["turns"]) {
        auto index = t["turn"].get<size_t>();
        per_turn[index][0] += t["em"].get<double>();
        per_turn[index][1] += t["f1"].get<double>();
        per_turn[index][2] += t["rouge_l"].get<double>();
        turn_counts[index] += 1;
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
    return metrics;
  }
  PlotSpec plot() const override {
    return {"dialogue",
            "score (x 100)",
            {{"f1", "F1"}, {"em", "exact match"}, {"rouge_l", "ROUGE-L"}},
            "",
            true};
  }

 private:
  DialogueOptions o_;
  std::vector<DialogueRecord> dialogues_;
};

}  // namespace

int run_dialogue_eval(const DialogueOptions& o) {
  Dialogue benchmark(o);
  return run_sweep(benchmark, o.sweep);
}

}  // namespace retain
