#include "cli/flags.h"

#include <cmath>

#include "core/error.h"

namespace retain::cli {

void add_model_flags(CLI::App* cmd, ModelFlags& flags) {
  cmd->add_option("--model", flags.model_dir, "HuggingFace model directory")->required();
  cmd->add_option("--device", flags.device, "auto | cpu | cuda | cuda:N")->capture_default_str();
  cmd->add_option("--dtype", flags.dtype,
                  "auto | fp32 | bf16 | fp16 (auto: checkpoint dtype on "
                  "CUDA, fp32 on CPU)")
      ->capture_default_str();
  cmd->add_option("--threads", flags.threads, "CPU threads (0: LibTorch's default)");
  cmd->add_option("--gates-dir", flags.gates_dir,
                  "directory that relative policy gates= paths are resolved against");
}

void add_tensor_parallel_flags(CLI::App* cmd, ModelFlags& flags) {
  cmd->add_option("--tp", flags.tensor_parallel,
                  "tensor parallel: split the model's heads over N ranks started by a launcher "
                  "(retain launch --nproc N -- ..., torchrun, srun); rank 0 prints")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--dist-timeout", flags.dist_timeout_s,
                  "seconds a rank waits for the others (--tp) before failing")
      ->check(kPositive)
      ->capture_default_str();
}

void add_bench_model_flags(CLI::App* cmd, BenchModelOptions& o) {
  auto* dir =
      cmd->add_option("--model", o.model_dir, "HuggingFace model directory (instead of --preset)");
  cmd->add_option("--preset", o.preset, "init-model preset with random weights made on the device")
      ->capture_default_str()
      ->excludes(dir);
  cmd->add_option("--arch", o.arch, "architecture of the tiny/small presets");
  cmd->add_option("--device", o.device, "auto | cpu | cuda | cuda:N")->capture_default_str();
  cmd->add_option("--dtype", o.dtype, "auto | fp32 | bf16 | fp16")->capture_default_str();
  cmd->add_option("--seed", o.seed, "weights, gates and inputs")->capture_default_str();
  cmd->add_option("--threads", o.threads, "CPU threads (0: LibTorch's default)");
}

void add_bench_tensor_parallel_flag(CLI::App* cmd, BenchModelOptions& o) {
  cmd->add_option("--tp", o.tensor_parallel,
                  "tensor parallel over N ranks started by a launcher (retain launch --nproc N "
                  "-- bench ...); figures are rank 0's share")
      ->check(kPositive)
      ->capture_default_str();
}

void add_video_flags(CLI::App* cmd, std::vector<std::string>& videos, VideoOptions& options) {
  cmd->add_option("--video", videos,
                  "video file (mp4, webm, mkv, ...: what FFmpeg reads) or a directory of frame "
                  "images (repeatable) for a vision-language model: at each <video> in the "
                  "prompt, else before it");
  cmd->add_option("--fps", options.fps,
                  "sample this many frames per second of each video (default: the model's "
                  "video processor: Qwen3-VL 2, Qwen2.5-VL every frame)")
      ->check(kPositive);
  cmd->add_option("--max-frames", options.max_frames,
                  "at most this many frames per video (default: the video processor's, 768)")
      ->check(kPositive);
  cmd->add_option("--video-max-pixels", options.max_pixels,
                  "the video processor's pixel budget (size.longest_edge: per frame for "
                  "Qwen2.5-VL, per clip for Qwen3-VL)")
      ->check(kPositive);
  cmd->add_option("--frames-fps", options.frames_fps,
                  "the rate of a video given as a directory of frames (default 24, as "
                  "transformers assumes without metadata)")
      ->check(kPositive);
}

void add_chat_flags(CLI::App* cmd, ChatFlags& flags) {
  cmd->add_flag("--chat", flags.chat, "render the prompt with the model's chat template");
  cmd->add_flag("--no-chat", flags.no_chat, "use the raw prompt (BOS + text)");
  cmd->add_option("--chat-template", flags.chat_template,
                  "a Jinja chat template file (or chatml) instead of the model's template");
  cmd->add_option("--system", flags.system, "system message (chat only)");
  cmd->add_flag("--no-thinking", flags.no_thinking,
                "pass enable_thinking=False to the chat template (Qwen3 and others)");
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    size_t comma = text.find(',', start);
    std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::string> split_policies(const std::string& text) {
  std::vector<std::string> out;
  for (const auto& item : split_list(text)) {
    if (item.find('=') != std::string::npos && item.find(':') == std::string::npos && !out.empty())
      out.back() += "," + item;
    else
      out.push_back(item);
  }
  return out;
}

std::vector<double> parse_budgets(const std::string& text) {
  std::vector<double> out;
  for (const auto& b : split_list(text)) {
    double value = 0;
    try {
      size_t used = 0;
      value = std::stod(b, &used);
      if (used != b.size()) throw std::invalid_argument(b);
    } catch (const std::exception&) {
      value = std::nan("");
    }
    if (!std::isfinite(value) || value <= 0 || (value >= 1 && value != std::floor(value)))
      fail(
          "--budget: expected entries per KV head (an integer >= 1) or a fraction of the "
          "prompt in (0, 1), found '",
          b, "'");
    out.push_back(value);
  }
  return out;
}

namespace {

CLI::Validator number_at_least(double low, bool strictly) {
  const std::string expected = strictly
                                   ? "a number > " + std::to_string(static_cast<int64_t>(low))
                                   : "a number >= " + std::to_string(static_cast<int64_t>(low));
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double value = std::nan("");
        try {
          size_t used = 0;
          value = std::stod(text, &used);
          if (used != text.size()) value = std::nan("");
        } catch (const std::exception&) {
        }
        const bool ok = std::isfinite(value) && (strictly ? value > low : value >= low);
        return ok ? std::string() : "expected " + expected + ", found '" + text + "'";
      },
      strictly ? "NUMBER > 0" : "NUMBER >= 0");
}
}  // namespace

const CLI::Validator kNonNegative = number_at_least(0, false);
const CLI::Validator kPositive = number_at_least(0, true);

std::vector<std::string> SweepFlags::policies() const { return split_policies(policy_list); }
std::vector<double> SweepFlags::budgets() const { return parse_budgets(budget_list); }

void add_sweep_flags(CLI::App* cmd, SweepFlags& sweep, std::string& gates, int64_t& chunk,
                     std::string& out, int64_t* limit, const std::string& limit_help) {
  cmd->add_option("--policy", sweep.policy_list,
                  "comma-separated policies, name:key=value (`retain policies` lists them)")
      ->capture_default_str();
  cmd->add_option("--budget", sweep.budget_list,
                  "comma-separated budgets: KV entries per head (>= 1) or a fraction of the "
                  "prompt (< 1)");
  cmd->add_option("--gates", gates, "gate file for trimkv / dbtrimkv");
  cmd->add_option("--chunk", chunk, "prefill chunk in tokens")
      ->check(kNonNegative)
      ->capture_default_str();
  if (limit != nullptr) cmd->add_option("--limit", *limit, limit_help)->check(kNonNegative);
  cmd->add_option("--out", out, "output directory")->required();
}

std::shared_ptr<SweepFlags> add_sweep_command_flags(CLI::App* cmd, SweepSettings& settings,
                                                    int64_t* limit, const std::string& limit_help,
                                                    bool batched) {
  auto flags = std::make_shared<SweepFlags>(SweepFlags{"full", ""});
  add_model_flags(cmd, settings.model);
  add_tensor_parallel_flags(cmd, settings.model);
  add_sweep_flags(cmd, *flags, settings.gates, settings.chunk, settings.out, limit, limit_help);
  if (batched) {
    add_batch_flags(cmd, settings.batch_size, settings.model.workers);
    add_shared_context_flags(cmd, settings);
  }
  return flags;
}

void add_batch_flags(CLI::App* cmd, int64_t& batch_size, int& workers) {
  cmd->add_option("--batch-size", batch_size,
                  "examples of a (policy, budget) cell generated at once; each keeps its own "
                  "budget and predicts what it predicts alone")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--workers", workers,
                  "CPU: batches generated at once, the --threads split between them (a small "
                  "model keeps 1 thread busier than it splits over 2)")
      ->check(kPositive)
      ->capture_default_str();
}

void add_shared_context_flags(CLI::App* cmd, SweepSettings& sweep) {
  cmd->add_flag_callback(
      "--no-shared-context", [&sweep] { sweep.share_context = false; },
      "read each (policy, budget) cell's prompt itself (by default the cells read keep mode's "
      "context once when it fits one --chunk, and evict mode's first chunk once; the same "
      "predictions)");
  cmd->add_option("--shared-context-gib", sweep.shared_context_gib,
                  "the most GiB of K/V copies one shared read holds (every cell holds what was "
                  "read until the read ends): more policies than fit read it again")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_flag("--write-prompts", sweep.write_prompts,
                "also write DIR/prompts.jsonl: each unit's token ids, where its context ends, its "
                "stop ids and token limit (what a peer tool needs to read exactly what retain "
                "read); a finished sweep rerun with it writes the file alone");
}

}  // namespace retain::cli
