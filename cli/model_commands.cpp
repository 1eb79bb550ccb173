// init-model, generate, tokenize.
#include "cli/commands.h"
#include "cli/flags.h"
#include "eval/generate_command.h"
#include "model/init_model.h"
#include "model/tokenizers/tokenize_command.h"

namespace retain::cli {

namespace {

void register_init_model(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<InitModelOptions>();
  auto* cmd = app.add_subcommand("init-model", "write an HF-format model dir with random weights");
  cmd->add_option("--arch", o->arch, "llama | mistral | qwen2 | qwen3 | qwen2_5_vl | qwen3_vl");
  cmd->add_option("--preset", o->preset,
                  "tiny | small | llama3-8b | qwen3-4b | qwen2.5-vl-7b | qwen3-vl-4b | ...")
      ->required();
  cmd->add_option("--seed", o->seed, "weight seed")->capture_default_str();
  cmd->add_option("--set", o->sets, "config.json edit key=value (repeatable)");
  cmd->add_option("--dtype", o->dtype, "float32 | bfloat16 | float16");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "SentencePiece tokenizer.model to ship (sets vocab_size, bos/eos ids)");
  cmd->add_option("--out", o->out, "output directory")->required();
  cmd->add_flag("--force", o->force, "replace an existing output directory");
  commands.add(cmd, [o] {
    init_model(*o);
    return 0;
  });
}

void register_generate(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<GenerateCommandOptions>();
  auto* cmd = app.add_subcommand("generate", "generate text from a prompt");
  add_model_flags(cmd, o->model);
  cmd->add_option("--prompt", o->prompt, "prompt text (needs the model's tokenizer)");
  cmd->add_option("--prompt-ids", o->prompt_ids, "prompt token ids, e.g. 1,2,3");
  cmd->add_option("--prompts-file", o->prompts_file, "one prompt per line, generated as one batch");
  cmd->add_option("--image", o->images,
                  "image file (JPEG, PNG, WebP; repeatable) for a vision-language model: at each "
                  "<image> in the prompt, else before it");
  add_video_flags(cmd, o->videos, o->video);
  cmd->add_option("--stop", o->stops, "stop string (repeatable); the output ends before it");
  cmd->add_option("--max-new-tokens", o->max_new_tokens)
      ->check(kNonNegative)
      ->capture_default_str();
  cmd->add_option("--temperature", o->temperature, "0 = greedy")
      ->check(kNonNegative)
      ->capture_default_str();
  cmd->add_option("--top-p", o->top_p, "in (0, 1]")->check(kPositive)->capture_default_str();
  cmd->add_option("--top-k", o->top_k, "sample among the k most likely tokens (0: all)")
      ->check(kNonNegative)
      ->capture_default_str();
  cmd->add_option("--seed", o->seed)->capture_default_str();
  cmd->add_flag("--ignore-eos", o->ignore_eos, "do not stop at EOS");
  cmd->add_flag("--keep-special-tokens", o->keep_special_tokens,
                "show special tokens in the text (the EOS or end-of-turn token that ended "
                "generation is never shown)");
  cmd->add_flag("--json", o->json, "print JSON with ids and rates");
  add_chat_flags(cmd, o->chat);
  cmd->add_option("--policy", o->policy,
                  "eviction policy, name:key=value,... (`retain policies` lists them)")
      ->capture_default_str();
  cmd->add_option("--budget", o->budget,
                  "KV entries per head (>= 1) or a fraction of the prompt (< 1)");
  cmd->add_option("--gates", o->gates, "gate file for trimkv / dbtrimkv");
  cmd->add_option("--chunk", o->chunk, "prefill chunk in tokens (0: the whole prompt)")
      ->check(kNonNegative);
  add_tensor_parallel_flags(cmd, o->model);
  commands.add(cmd, [o] { return run_generate_command(*o); });
}

void register_tokenize(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<TokenizeCommandOptions>();
  auto* cmd = app.add_subcommand("tokenize", "show the token ids of a text, or decode ids");
  cmd->add_option("--model", o->model_dir, "model directory (tokenizer.json or tokenizer.model)")
      ->required();
  cmd->add_option("--text", o->text, "text to tokenize");
  cmd->add_option("--file", o->file, "UTF-8 file to tokenize");
  cmd->add_flag("--ids", o->ids_only, "print only the comma-separated ids");
  cmd->add_option("--decode", o->decode,
                  "comma-separated ids to turn back into text (instead of --text/--file)");
  cmd->add_option("--image", o->images,
                  "image file (repeatable): show the prompt with each image's tokens expanded "
                  "(vision-language models)");
  add_video_flags(cmd, o->videos, o->video);
  cmd->add_flag("--skip-special", o->skip_special,
                "with --decode: leave out special tokens (BOS, EOS, ...)");
  cmd->add_flag("--as-prompt", o->as_prompt,
                "the ids a generation prompt gets (no trailing EOS), not the full encoding");
  cmd->add_flag(
      "--explain", o->explain,
      "print which pipeline runs (as transformers 5 builds it) and where BOS/EOS come from");
  add_chat_flags(cmd, o->chat);
  commands.add(cmd, [o] { return run_tokenize_command(*o); });
}

}  // namespace

void register_model_commands(CLI::App& app, Commands& commands) {
  register_init_model(app, commands);
  register_generate(app, commands);
  register_tokenize(app, commands);
}

}  // namespace retain::cli
