// Flag groups several commands share, and the parsers and validators behind them.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "eval/sweep.h"
#include "model/bench_model.h"
#include "model/prompt.h"
#include "model/vision/video_options.h"

namespace retain::cli {

// --model --device --dtype --threads --gates-dir
void add_model_flags(CLI::App* cmd, ModelFlags& flags);
// The base model of `bench decode` / `bench train`: a directory or a preset made on the device.
// --tp N and --dist-timeout, for the commands that run a tensor-parallel model.
void add_tensor_parallel_flags(CLI::App* cmd, ModelFlags& flags);
// --tp N for `bench decode` and `bench train`.
void add_bench_tensor_parallel_flag(CLI::App* cmd, BenchModelOptions& o);
void add_bench_model_flags(CLI::App* cmd, BenchModelOptions& o);
// --chat --no-chat --chat-template --system --no-thinking
void add_chat_flags(CLI::App* cmd, ChatFlags& flags);
// --video (repeatable) and the video processor's flags.
void add_video_flags(CLI::App* cmd, std::vector<std::string>& videos, VideoOptions& options);

// What every evaluation sweep takes: --policy, --budget (as written; see policies() and
// budgets()), --gates, --chunk, --out and, where `limit` is given, --limit.
struct SweepFlags {
  std::string policy_list, budget_list;
  std::vector<std::string> policies() const;
  std::vector<double> budgets() const;
  // Parses --policy and --budget into the sweep's settings (in the command's handler).
  void apply_to(SweepSettings& settings) const {
    settings.policies = policies();
    settings.budgets = budgets();
  }
};
void add_sweep_flags(CLI::App* cmd, SweepFlags& sweep, std::string& gates, int64_t& chunk,
                     std::string& out, int64_t* limit, const std::string& limit_help);
// Every flag a benchmark's sweep command shares, into its SweepSettings: the model's (--model
// --device --dtype --threads --gates-dir), --tp, the sweep's (--policy --budget --gates --chunk
// --out, --limit where `limit` is given) and, for `batched` benchmarks (single generations),
// --batch-size, --workers, --no-shared-context and --shared-context-gib. The handler calls
// apply_to on what it returns.
std::shared_ptr<SweepFlags> add_sweep_command_flags(CLI::App* cmd, SweepSettings& settings,
                                                    int64_t* limit, const std::string& limit_help,
                                                    bool batched);
// --batch-size of the sweeps whose examples are single generations, and --workers.
void add_batch_flags(CLI::App* cmd, int64_t& batch_size, int& workers);
// --no-shared-context and --shared-context-gib (SweepSettings::share_context,
// shared_context_gib).
void add_shared_context_flags(CLI::App* cmd, SweepSettings& sweep);

// "a,b,,c" -> {a, b, c}.
std::vector<std::string> split_list(const std::string& text);
// "h2o:window=64,buffer=8,streaming": an item with '=' but no ':' continues the previous policy.
std::vector<std::string> split_policies(const std::string& text);
// Entries per KV head (an integer >= 1) or a fraction of the prompt in (0, 1), each checked.
std::vector<double> parse_budgets(const std::string& text);

// A number, finite, >= 0 (kNonNegative) or > 0 (kPositive); the message says what was expected
// and what was found.
extern const CLI::Validator kNonNegative;
extern const CLI::Validator kPositive;

}  // namespace retain::cli
