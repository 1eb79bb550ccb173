// The `retain generate` and `retain eval ppl` commands: load, run, print/write. The CLI only
// parses flags into these option structs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace retain {

struct ModelFlags {
  std::string model_dir;
  std::string device = "auto";
  std::string dtype = "auto";
  int threads = 0;  // 0: LibTorch's default
  // Relative "policy:gates=FILE" paths are resolved against this directory (default: the
  // working directory), so a sweep's recipe can name gate files by their place in a run.
  std::string gates_dir;
};

// How a text prompt becomes ids: raw (BOS + text) or through the model's chat template.
struct ChatFlags {
  bool chat = false;          // --chat: always use the template
  bool no_chat = false;       // --no-chat: never (default: use it when the model dir has one)
  std::string chat_template;  // --chat-template NAME: override the identified family
  std::optional<std::string> system;  // --system TEXT: a system message before the prompt
  bool no_thinking = false;           // --no-thinking: qwen3's enable_thinking=false
};

struct GenerateCommandOptions {
  ModelFlags model;
  ChatFlags chat;
  std::optional<std::string> prompt;
  std::optional<std::string> prompt_ids;    // "1,2,3"
  std::optional<std::string> prompts_file;  // one prompt per line, generated as one batch
  std::vector<std::string> stops;           // stop strings
  int64_t max_new_tokens = 64;
  double temperature = 0.0;
  double top_p = 1.0;
  uint64_t seed = 0;
  bool ignore_eos = false;
  bool json = false;
  std::string policy = "full";  // eviction policy spec (eval/eviction_policy.h)
  double budget = 0;            // entries per KV head, or a fraction of the prompt below 1
  std::string gates;            // gate file for trimkv / dbtrimkv
  int64_t chunk = 0;            // prefill chunk (0: the whole prompt at once)
};

struct PplCommandOptions {
  ModelFlags model;
  std::string text_file;
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

struct TokenizeCommandOptions {
  std::string model_dir;
  std::optional<std::string> text;
  std::optional<std::string> file;
  bool ids_only = false;
  std::optional<std::string> decode;  // comma-separated ids to turn back into text
  bool skip_special = false;          // with decode: drop special tokens (BOS, EOS, ...)
  ChatFlags chat;
};

struct BenchTokenizeOptions {
  std::string model_dir;
  std::string file;
  int repeat = 3;
};

int run_generate_command(const GenerateCommandOptions& options);
// Encode throughput (MB/s) of the model's tokenizer on a file, best of `repeat` runs after one
// warm-up run (which also fills the BPE cache, as it would be in a long job).
int run_bench_tokenize_command(const BenchTokenizeOptions& options);
int run_tokenize_command(const TokenizeCommandOptions& options);
int run_ppl_command(const PplCommandOptions& options);

// Parses "1,2,3" (spaces allowed); errors name `flag` and the bad item.
std::vector<int64_t> parse_id_list(const std::string& text, const std::string& flag);

}  // namespace retain
