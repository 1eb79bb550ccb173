// What every benchmark sweep shares: the model loaded once (eval/eval_model.h), the list of
// (policy, budget) cells (`full` once, every other policy at every budget), a
// predictions.jsonl that is appended as results come and read back to resume, and the peak KV
// bytes of a cache.
#pragma once

#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/json.h"
#include "eval/eval_model.h"
#include "eval/policies/policy_registry.h"
#include "model/decoder.h"
#include "model/kv_cache.h"
#include "model/tokenizers/tokenizer.h"

namespace retain {

// Creates the run directory `out`, saves `config` (the resolved options; JSON is valid YAML) as
// out/config.yaml and prints it, so a run's log and its directory both say what it ran.
fs::path start_run_dir(const std::string& out, const Json& config);

struct SweepCell {
  std::string policy;            // the spec as given
  std::optional<double> budget;  // none for full
  PolicySpec spec;               // `policy` parsed (once, by sweep_cells)
};

// The flags every sweep takes (each benchmark's options embed one; run_sweep reads it).
struct SweepSettings {
  ModelFlags model;
  std::vector<std::string> policies = {"full"};
  std::vector<double> budgets;
  std::string gates;
  int64_t chunk = 512;
  int64_t batch_size = 1;  // units of a cell generated at once
  std::string out;
  // The cells read a unit's context once when they can (run_generations_shared), each read
  // holding at most this much of the contexts' copies (whole policies; one policy always reads).
  bool share_context = true;
  double shared_context_gib = 8.0;
  // --write-prompts: DIR/prompts.jsonl, each unit's token ids as retain reads them (what a peer
  // tool needs to read the same: scripts/peers/kvpress_ruler.py). Not in config.yaml: it changes
  // no answer, so a finished sweep can be rerun with it to write the file alone.
  bool write_prompts = false;
  // How new tokens are drawn (greedy by default; eval math samples): every cell alike, each unit
  // with its request's seed.
  double temperature = 0.0;
  double top_p = 1.0;
  int64_t top_k = 0;
};

// A benchmark's defaults: every field's, with its own prefill chunk.
inline SweepSettings sweep_defaults(int64_t chunk) {
  SweepSettings s;
  s.chunk = chunk;
  return s;
}

// Checks every policy spec and that the budgeted ones have budgets; `benchmark` names errors.
std::vector<SweepCell> sweep_cells(const std::vector<std::string>& policies,
                                   const std::vector<double>& budgets,
                                   const std::string& benchmark);

// predictions.jsonl: records already present (from a killed run) are found by key and not redone.
class PredictionLog {
 public:
  // `key` maps a record to its identity (policy, budget and the example). A reader (writer =
  // false: the other ranks of a tensor-parallel run) only reads what is there: it neither repairs
  // the file nor appends.
  PredictionLog(const fs::path& path, std::function<std::string(const Json&)> key,
                bool writer = true);
  ~PredictionLog();
  PredictionLog(const PredictionLog&) = delete;
  PredictionLog& operator=(const PredictionLog&) = delete;
  const Json* find(const std::string& key) const;
  void append(const Json& record);
  size_t resumed() const { return done_.size(); }

 private:
  std::function<std::string(const Json&)> key_;
  std::map<std::string, Json> done_;
  std::string path_;
  int fd_ = -1;
};

// --protect-question: the index of the question's first token in the encoded `text` (with_bos:
// the prompt starts with BOS when the tokenizer adds one, as encode_prompt makes it; a rendered
// chat template has none): the token count of the text before the last occurrence of `question`,
// which must be a suffix boundary of `text`.
int64_t question_start(const Tokenizer& tokenizer, const std::string& text,
                       const std::string& question, bool with_bos);
// For each byte offset of `bytes`, the index in the encoded `text` (with_bos as above) of the
// token that holds that byte: where a passage starting there begins (a word's token usually
// carries the space before it). Found in the whole text's encoding, by decoding its prefixes:
// counting the tokens of the text before the passage instead would be off where the cut changes
// how the text splits (GPT-2's pre-tokenizer splits "\n\n" before a word as two tokens, at the
// end of a text as one).
std::vector<int64_t> token_indices_at(const Tokenizer& tokenizer, const std::string& text,
                                      const std::vector<size_t>& bytes, bool with_bos);

// What generation stops at: the tokenizer's EOS (when it has one) and config.json's EOS ids, for
// every benchmark and `generate`.
std::vector<int64_t> stop_ids(const ModelConfig& config, const Tokenizer* tokenizer);

}  // namespace retain
