// `retain eval ppl`: perplexity of a text file, with the full cache in sliding windows
// (transformers' definition) or streamed through each policy's cache at each budget; or of the
// documents of a JSONL file, each streamed through its own cache, optionally scored on byte
// spans only (`--score-spans answer_spans`: the answers of `retain synth`'s documents, the tokens
// whose prediction needs far context).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "eval/sweep.h"

namespace retain {

struct PplCommandOptions {
  ModelFlags model;
  std::string text_file;   // one text, or:
  std::string jsonl_file;  // one document per line, the text at `field`
  std::string field = "text";
  std::string score_spans;  // a field of [begin, end] byte ranges: only their tokens are scored
  int64_t max_length = 0;
  int64_t stride = 0;
  std::string out_dir;
  // With policies: the text streams through each policy's cache in chunks (budgets as tokens per
  // head, or below 1 a fraction of the text: 0.3 = 70% eviction).
  std::vector<std::string> policies;
  std::vector<double> budgets;
  std::string gates;
  int64_t chunk = 256;
};

int run_ppl_command(const PplCommandOptions& options);

}  // namespace retain
