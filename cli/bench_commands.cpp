// bench tokenize | kernels | decode | train | vision | serve.
#include "cli/commands.h"
#include "cli/flags.h"
#include "eval/bench_decode.h"
#include "kernels/bench_kernels.h"
#include "model/tokenizers/tokenize_command.h"
#include "model/vision/bench_vision.h"
#include "serve/bench_serve.h"
#include "trainer/bench_train.h"

namespace retain::cli {

namespace {

void register_bench_tokenize(CLI::App* bench, Commands& commands) {
  auto o = std::make_shared<BenchTokenizeOptions>();
  auto* cmd = bench->add_subcommand("tokenize", "tokenizer encode throughput");
  cmd->add_option("--model", o->model_dir, "model directory")->required();
  cmd->add_option("--file", o->file, "UTF-8 text file")->required();
  cmd->add_option("--repeat", o->repeat)->check(kPositive)->capture_default_str();
  commands.add(cmd, [o] { return run_bench_tokenize_command(*o); });
}

void register_bench_kernels(CLI::App* bench, Commands& commands) {
  auto o = std::make_shared<BenchKernelsOptions>();
  auto* cmd = bench->add_subcommand("kernels", "CUDA kernels vs SDPA / bandwidth");
  cmd->add_option("--seq", o->seqs, "attention lengths")->check(kPositive)->capture_default_str();
  cmd->add_option("--decode-len", o->decode_len)->check(kPositive)->capture_default_str();
  cmd->add_option("--iters", o->iters)->check(kPositive)->capture_default_str();
  auto names =
      std::make_shared<std::vector<std::string>>(std::vector<std::string>{"wmma", "triton"});
  cmd->add_option("--kernels", *names, "retention attention implementations: wmma triton")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "also one JSON line per length and implementation");
  commands.add(cmd, [o, names] {
    o->kernels.clear();
    for (const auto& n : *names)
      o->kernels.push_back(parse_retention_kernels(n, "bench kernels --kernels"));
    return run_bench_kernels_command(*o);
  });
}

void register_bench_decode(CLI::App* bench, Commands& commands) {
  auto o = std::make_shared<BenchDecodeOptions>();
  auto* cmd = bench->add_subcommand(
      "decode", "batched long-context generation under a policy: tokens/s, KV bytes, roofline");
  add_bench_model_flags(cmd, o->model);
  add_bench_tensor_parallel_flag(cmd, o->model);
  cmd->add_option("--context", o->context, "prompt tokens per sequence")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--budget", o->budget,
                  "KV entries per head (>= 1) or a fraction of the prompt (< 1)")
      ->capture_default_str();
  cmd->add_option("--batch", o->batch)->check(kPositive)->capture_default_str();
  cmd->add_option("--new-tokens", o->new_tokens)->check(kPositive)->capture_default_str();
  cmd->add_option("--policy", o->policy,
                  "eviction policy, name:key=value,... (`retain policies` lists them)")
      ->capture_default_str();
  cmd->add_option("--chunk", o->chunk, "prefill chunk in tokens (0: whole prompt)")
      ->check(kNonNegative)
      ->capture_default_str();
  cmd->add_option("--decode", o->decode,
                  "decode steps: auto (CUDA graphs where the policy allows), eager or static")
      ->check(CLI::IsMember({"auto", "eager", "static"}))
      ->capture_default_str();
  cmd->add_option("--prompts-file", o->prompts_file,
                  "a JSON array of prompts (arrays of token ids, all the same length) instead of "
                  "random ones; sets --batch and --context (what scripts/peers/bench_decode.py "
                  "gives retain and the peers alike)");
  cmd->add_flag("--json", o->json, "one JSON object instead of the table");
  commands.add(cmd, [o] { return run_bench_decode_command(*o); });
}

void register_bench_train(CLI::App* bench, Commands& commands) {
  auto o = std::make_shared<BenchTrainOptions>();
  auto* cmd = bench->add_subcommand(
      "train", "one gate-training step at long context: tokens/s, MFU, memory, time split");
  add_bench_model_flags(cmd, o->model);
  add_bench_tensor_parallel_flag(cmd, o->model);
  cmd->add_option("--seq", o->seq, "tokens per sequence")->check(kPositive)->capture_default_str();
  cmd->add_option("--batch", o->batch)->check(kPositive)->capture_default_str();
  cmd->add_option("--gates", o->gates, "mlp2 | mlp3")->capture_default_str();
  cmd->add_option("--gate-width", o->gate_width)->check(kPositive)->capture_default_str();
  cmd->add_option("--memory", o->memory, "capacity budget M")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--logit-block", o->logit_block)->check(kPositive)->capture_default_str();
  cmd->add_option("--checkpointing", o->checkpointing,
                  "recompute student layers in the backward pass (true | false)")
      ->capture_default_str();
  cmd->add_option("--attention", o->attention, "retention kernels: wmma | triton | reference")
      ->capture_default_str();
  cmd->add_option("--iters", o->iters)->check(kPositive)->capture_default_str();
  cmd->add_option("--warmup", o->warmup)->check(kNonNegative)->capture_default_str();
  cmd->add_flag("--json", o->json, "one JSON object instead of the table");
  commands.add(cmd, [o] { return run_bench_train_command(*o); });
}

void register_bench_vision(CLI::App* bench, Commands& commands) {
  auto o = std::make_shared<BenchVisionOptions>();
  o->model.preset = "qwen3-vl-4b";
  auto* cmd = bench->add_subcommand(
      "vision", "vision-language models: preprocessing, vision tower and prefill with an image");
  add_bench_model_flags(cmd, o->model);
  cmd->add_option("--size", o->sizes, "image size WxH (repeatable)")->capture_default_str();
  // A clip instead of the sizes: --video and the video processor's flags.
  add_video_flags(cmd, o->videos, o->video);
  cmd->add_option("--text-tokens", o->text_tokens, "text tokens around the image")
      ->check(kNonNegative)
      ->capture_default_str();
  cmd->add_option("--repeat", o->repeat, "timed runs after a warm-up (best reported)")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "one JSON object instead of the table");
  commands.add(cmd, [o] { return run_bench_vision_command(*o); });
}

void register_bench_serve(CLI::App* bench, Commands& commands) {
  auto o = std::make_shared<BenchServeOptions>();
  auto* cmd = bench->add_subcommand(
      "serve", "the serving engine under concurrency beside sequential generate: tok/s, latency");
  add_bench_model_flags(cmd, o->model);
  cmd->add_option("--requests", o->requests)->check(kPositive)->capture_default_str();
  cmd->add_option("--concurrency", o->concurrency, "clients sending requests at once")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "mean prompt length (0.5x to 1.5x)")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--new-tokens", o->new_tokens, "mean max_tokens (0.5x to 1.5x)")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--policy", o->policy, "eviction policy (`retain policies`)")
      ->capture_default_str();
  cmd->add_option("--budget", o->budget, "KV entries per head (>= 1) or a fraction (< 1)")
      ->capture_default_str();
  cmd->add_option("--chunk", o->chunk, "prefill chunk in tokens")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--max-batch", o->max_batch, "requests running at once")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--kv-memory", o->kv_memory, "K/V bytes the engine may reserve (0: no bound)")
      ->capture_default_str();
  cmd->add_option("--decode", o->decode,
                  "the engine's decode steps for the policy's requests: auto (static rows replayed "
                  "as CUDA graphs where the device allows), eager or static")
      ->check(CLI::IsMember({"auto", "eager", "static"}))
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "one JSON object instead of the table");
  commands.add(cmd, [o] { return run_bench_serve_command(*o); });
}

}  // namespace

void register_bench_commands(CLI::App& app, Commands& commands) {
  auto* bench = app.add_subcommand("bench", "throughput benchmarks");
  bench->require_subcommand(1);
  register_bench_tokenize(bench, commands);
  register_bench_kernels(bench, commands);
  register_bench_decode(bench, commands);
  register_bench_train(bench, commands);
  register_bench_vision(bench, commands);
  register_bench_serve(bench, commands);
}

}  // namespace retain::cli
