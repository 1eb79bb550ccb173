// eval ppl | synthetic | ruler | longbench | longbench-v2 | mmmu | mmstar | videomme | math | dialogue | score,
// and
// policies.
#include <iostream>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/error.h"
#include "eval/benchmarks/dialogue.h"
#include "eval/benchmarks/longbench.h"
#include "eval/benchmarks/longbench_v2.h"
#include "eval/benchmarks/math.h"
#include "eval/benchmarks/mmmu.h"
#include "eval/benchmarks/mmstar.h"
#include "eval/benchmarks/ruler.h"
#include "eval/benchmarks/synthetic.h"
#include "eval/benchmarks/videomme.h"
#include "eval/policies/policy_registry.h"
#include "eval/ppl_command.h"
#include "eval/score_command.h"

namespace retain::cli {

namespace {

void register_ppl(CLI::App* eval, Commands& commands) {
  auto o = std::make_shared<PplCommandOptions>();
  auto sweep = std::make_shared<SweepFlags>();
  auto* cmd = eval->add_subcommand("ppl", "perplexity of a text file or of JSONL documents");
  add_model_flags(cmd, o->model);
  auto* text = cmd->add_option("--text", o->text_file, "UTF-8 text file");
  auto* jsonl = cmd->add_option("--jsonl", o->jsonl_file,
                                "documents, one JSON object per line (each its own cache)");
  text->excludes(jsonl);
  cmd->add_option("--field", o->field, "with --jsonl: the field holding the text")
      ->capture_default_str();
  cmd->add_option("--score-spans", o->score_spans,
                  "with --jsonl: score only the tokens of this field's [begin, end] byte ranges "
                  "(retain synth's answer_spans)");
  cmd->add_option("--max-length", o->max_length, "window length (0: whole text)")
      ->check(kNonNegative);
  cmd->add_option("--stride", o->stride, "window stride (0: max-length)")->check(kNonNegative);
  // Without --policy: the full cache in sliding windows; with: each policy's streamed cache
  // (--budget below 1 is a fraction of the text: 0.3 = 70% eviction).
  add_sweep_flags(cmd, *sweep, o->gates, o->chunk, o->out_dir, nullptr, "");
  commands.add(cmd, [o, sweep] {
    o->policies = sweep->policies();
    o->budgets = sweep->budgets();
    return run_ppl_command(*o);
  });
}

void register_synthetic(CLI::App* eval, Commands& commands) {
  auto o = std::make_shared<SyntheticEvalOptions>();
  auto tasks = std::make_shared<std::string>("kv,vars,needle,multi");
  auto* cmd =
      eval->add_subcommand("synthetic", "seeded long-context tasks under eviction policies");
  auto sweep = add_sweep_command_flags(cmd, o->sweep, &o->limit,
                                       "run only the first N examples per task", true);
  cmd->add_option("--tasks", *tasks, "kv,vars,needle,multi")->capture_default_str();
  cmd->add_option("--data", o->data,
                  "task file (retain synth's heldout.jsonl) instead of generated tasks");
  cmd->add_option("--count", o->count, "examples per task")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--words", o->context_words, "context length in words")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--seed", o->seed)->capture_default_str();
  cmd->add_option("--max-new-tokens", o->max_new_tokens)->check(kPositive)->capture_default_str();
  cmd->add_flag("--protect-question", o->protect_question,
                "never evict the question while reading the prompt");
  cmd->add_option("--question-mode", o->question_mode,
                  "evict: the question is part of the budgeted stream; keep: kvpress's "
                  "semantics, the context is compressed once and the question kept on top")
      ->check(CLI::IsMember({"evict", "keep"}))
      ->capture_default_str();
  commands.add(cmd, [o, sweep, tasks] {
    sweep->apply_to(o->sweep);
    o->tasks = split_list(*tasks);
    return run_synthetic_eval(*o);
  });
}

void register_longbench(CLI::App* eval, Commands& commands) {
  auto o = std::make_shared<LongBenchOptions>();
  auto datasets = std::make_shared<std::string>();
  auto* cmd = eval->add_subcommand("longbench", "LongBench / LongBench-E under eviction policies");
  add_chat_flags(cmd, o->chat);
  auto sweep =
      add_sweep_command_flags(cmd, o->sweep, &o->limit, "examples per dataset (0: all)", true);
  cmd->add_option("--data", o->data_dir,
                  "LongBench directory (data/*.jsonl, config/dataset2*.json)")
      ->required();
  cmd->add_option("--datasets", *datasets,
                  "comma-separated datasets (default: the 16 English + code tasks)");
  cmd->add_flag("--e", o->e, "LongBench-E (data/<dataset>_e.jsonl, 13 tasks)");
  cmd->add_option("--max-length", o->max_length,
                  "prompt tokens kept by middle truncation (0: model max)");
  cmd->add_flag("--protect-question", o->protect_question,
                "never evict the question (the template after {context}) while reading the prompt");
  commands.add(cmd, [o, sweep, datasets] {
    sweep->apply_to(o->sweep);
    o->datasets = split_list(*datasets);
    return run_longbench_eval(*o);
  });
}

void register_longbench_v2(CLI::App* eval, Commands& commands) {
  auto o = std::make_shared<LongBenchV2Options>();
  auto* cmd =
      eval->add_subcommand("longbench-v2", "LongBench v2 multiple choice under eviction policies");
  add_chat_flags(cmd, o->chat);
  auto sweep = add_sweep_command_flags(cmd, o->sweep, &o->limit, "records (0: all)", true);
  cmd->add_option("--data", o->data, "LongBench v2 data (JSON array or JSONL)")->required();
  cmd->add_option("--template", o->template_file,
                  "prompt template (default: prompts/0shot.txt next to --data)");
  cmd->add_option("--max-length", o->max_length,
                  "prompt tokens kept by middle truncation (0: model max)");
  cmd->add_option("--max-new-tokens", o->max_new_tokens)->check(kPositive)->capture_default_str();
  commands.add(cmd, [o, sweep] {
    sweep->apply_to(o->sweep);
    return run_longbench_v2_eval(*o);
  });
}

void register_mmmu(CLI::App* eval, Commands& commands) {
  auto o = std::make_shared<MmmuOptions>();
  auto subjects = std::make_shared<std::string>();
  auto* cmd = eval->add_subcommand(
      "mmmu", "MMMU on a vision-language model under eviction policies (official scoring)");
  add_chat_flags(cmd, o->chat);
  auto sweep =
      add_sweep_command_flags(cmd, o->sweep, &o->limit, "questions per subject (0: all)", true);
  cmd->add_option("--data", o->data,
                  "MMMU's parquet release directory (<Subject>/<split>-*.parquet), a parquet "
                  "file, or a JSONL file / a directory holding <split>.jsonl")
      ->required();
  cmd->add_option("--split", o->split, "validation | dev")->capture_default_str();
  cmd->add_option("--subjects", *subjects, "comma-separated subjects (default: all 30)");
  cmd->add_option("--images", o->images,
                  "inline: each image where the text says <image N>; first: all images before "
                  "the text, the tags left in it")
      ->check(CLI::IsMember({"inline", "first"}))
      ->capture_default_str();
  cmd->add_option("--max-pixels", o->max_pixels,
                  "resize images to at most this many pixels (0: preprocessor_config.json's)")
      ->check(kNonNegative);
  cmd->add_option("--budget-scope", o->budget_scope,
                  "all: the budget bounds every token; images: it bounds the image tokens (each "
                  "prompt's text tokens are added, as DBTrimKV's VLM evaluation does)")
      ->check(CLI::IsMember({"all", "images"}))
      ->capture_default_str();
  cmd->add_option("--max-new-tokens", o->max_new_tokens)->check(kPositive)->capture_default_str();
  commands.add(cmd, [o, sweep, subjects] {
    sweep->apply_to(o->sweep);
    o->subjects = split_list(*subjects);
    return run_mmmu_eval(*o);
  });
}

void register_mmstar(CLI::App* eval, Commands& commands) {
  auto o = std::make_shared<MmstarOptions>();
  auto* cmd = eval->add_subcommand(
      "mmstar", "MMStar on a vision-language model under eviction policies (official scoring)");
  add_chat_flags(cmd, o->chat);
  auto sweep = add_sweep_command_flags(cmd, o->sweep, &o->limit, "questions (0: all)", true);
  cmd->add_option("--data", o->data,
                  "MMStar's mmstar.parquet, a directory holding it, or mmstar.jsonl")
      ->required();
  cmd->add_option("--max-pixels", o->max_pixels,
                  "resize images to at most this many pixels (0: preprocessor_config.json's)")
      ->check(kNonNegative);
  cmd->add_option("--budget-scope", o->budget_scope,
                  "all: the budget bounds every token; images: it bounds the image tokens (each "
                  "prompt's text tokens are added, as DBTrimKV's VLM evaluation does)")
      ->check(CLI::IsMember({"all", "images"}))
      ->capture_default_str();
  cmd->add_option("--max-new-tokens", o->max_new_tokens)->check(kPositive)->capture_default_str();
  commands.add(cmd, [o, sweep] {
    sweep->apply_to(o->sweep);
    return run_mmstar_eval(*o);
  });
}

void register_videomme(CLI::App* eval, Commands& commands) {
  auto o = std::make_shared<VideoMmeOptions>();
  auto* cmd = eval->add_subcommand(
      "videomme",
      "Video-MME on a vision-language model under eviction policies (lmms-eval's task)");
  add_chat_flags(cmd, o->chat);
  auto sweep = add_sweep_command_flags(cmd, o->sweep, &o->limit, "questions (0: all)", true);
  cmd->add_option("--data", o->data,
                  "Video-MME's directory (videomme/test-*.parquet, data/<videoID>.mp4, "
                  "subtitle/<videoID>.srt) or its parquet")
      ->required();
  cmd->add_flag("--subtitles", o->subtitles,
                "with the frame-aligned subtitles (lmms-eval's videomme_w_subtitle)");
  cmd->add_option("--prompt-format", o->prompt_format,
                  "auto (by the model: Qwen3-VL qwen3_vl, else default) | default | qwen3_vl: "
                  "lmms-eval's prompt kwargs")
      ->check(CLI::IsMember({"auto", "default", "qwen3_vl"}))
      ->capture_default_str();
  cmd->add_option("--subtitle-frames", o->subtitle_frames,
                  "frames the subtitles are aligned with (frame_num; 0: lmms-eval's, 32 or 768 "
                  "for qwen3_vl; -1: every frame)");
  cmd->add_option("--fps", o->video.fps,
                  "sample this many frames per second (default: the model's video processor)")
      ->check(kPositive);
  cmd->add_option("--max-frames", o->video.max_frames, "at most this many frames per video")
      ->check(kPositive);
  cmd->add_option("--video-max-pixels", o->video.max_pixels,
                  "the video processor's pixel budget (size.longest_edge)")
      ->check(kPositive);
  auto durations = std::make_shared<std::string>();
  cmd->add_option("--duration", *durations, "comma-separated: short, medium, long (default: all)");
  cmd->add_option("--budget-scope", o->budget_scope,
                  "all: the budget bounds every token; images: it bounds the video tokens")
      ->check(CLI::IsMember({"all", "images"}))
      ->capture_default_str();
  cmd->add_option("--max-new-tokens", o->max_new_tokens)->check(kPositive)->capture_default_str();
  commands.add(cmd, [o, sweep, durations] {
    sweep->apply_to(o->sweep);
    if (!durations->empty()) o->durations = split_list(*durations);
    return run_videomme_eval(*o);
  });
}

void register_math(CLI::App* eval, Commands& commands) {
  auto o = std::make_shared<MathOptions>();
  auto* cmd = eval->add_subcommand(
      "math", "GSM8K, MATH-500 or AIME with long generations under eviction (pass@1, maj@N)");
  add_chat_flags(cmd, o->chat);
  auto sweep = add_sweep_command_flags(cmd, o->sweep, &o->limit, "problems (0: all)", true);
  cmd->add_option("--data", o->data,
                  "the release's .jsonl / .parquet (GSM8K: question, answer; MATH-500: problem, "
                  "answer; AIME: problem, answer), or a directory of them")
      ->required();
  cmd->add_option("--benchmark", o->benchmark, "gsm8k | math500 | aime")
      ->required()
      ->check(CLI::IsMember({"gsm8k", "math500", "aime"}));
  cmd->add_option("--instruction", o->instruction,
                  "appended to each problem after a newline (\"\": none)")
      ->capture_default_str();
  cmd->add_option("--samples", o->samples, "generations per problem (pass@1 is their mean)")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--temperature", o->sweep.temperature, "0: greedy")
      ->check(kNonNegative)
      ->capture_default_str();
  cmd->add_option("--top-p", o->sweep.top_p, "nucleus sampling mass, in (0, 1]")
      ->capture_default_str();
  cmd->add_option("--top-k", o->sweep.top_k, "sample among the k most likely tokens (0: all)")
      ->check(kNonNegative)
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "sample s of every problem draws with seed + s")
      ->capture_default_str();
  cmd->add_option("--max-new-tokens", o->max_new_tokens)->check(kPositive)->capture_default_str();
  commands.add(cmd, [o, sweep] {
    sweep->apply_to(o->sweep);
    return run_math_eval(*o);
  });
}

void register_dialogue(CLI::App* eval, Commands& commands) {
  auto o = std::make_shared<DialogueOptions>();
  auto* cmd = eval->add_subcommand("dialogue",
                                   "multi-turn questions over one context, the cache persisting");
  auto sweep = add_sweep_command_flags(cmd, o->sweep, &o->limit, "records (0: all)", false);
  cmd->add_option("--data", o->data, "jsonl of {id, context, multi_turns: [{input, answer}]}")
      ->required();
  cmd->add_option("--history", o->history, "gold | own")->capture_default_str();
  cmd->add_option("--max-new-tokens", o->max_new_tokens)->check(kPositive)->capture_default_str();
  commands.add(cmd, [o, sweep] {
    sweep->apply_to(o->sweep);
    return run_dialogue_eval(*o);
  });
}

void register_score(CLI::App* eval, Commands& commands) {
  auto o = std::make_shared<ScoreCommandOptions>();
  auto* cmd =
      eval->add_subcommand("score", "recompute scores from a predictions.jsonl, without a model");
  cmd->add_option("--benchmark", o->benchmark,
                  "longbench | longbench-v2 | mmmu | mmstar | math | ruler | videomme")
      ->required();
  cmd->add_option("--predictions", o->predictions, "predictions.jsonl")->required();
  cmd->add_flag("--e", o->e, "LongBench-E length buckets");
  cmd->add_option("--out", o->out, "output directory (default: the predictions' directory)");
  commands.add(cmd, [o] { return run_score_command(*o); });
}

void register_policies(CLI::App& app, Commands& commands) {
  auto markdown = std::make_shared<bool>(false);
  auto* cmd =
      app.add_subcommand("policies", "list the eviction policies with their options and defaults");
  cmd->add_flag("--markdown", *markdown, "as docs/evaluation.md's table");
  commands.add(cmd, [markdown] {
    std::cout << (*markdown ? policy_table_markdown() : policy_help() + "\n");
    return 0;
  });
}

void register_ruler(CLI::App* eval, Commands& commands) {
  auto o = std::make_shared<RulerEvalOptions>();
  auto tasks = std::make_shared<std::string>();
  auto lengths = std::make_shared<std::string>("4096");
  auto* cmd = eval->add_subcommand(
      "ruler", "RULER's 13 tasks at given lengths in the model's tokens, under eviction policies");
  add_chat_flags(cmd, o->chat);
  auto sweep = add_sweep_command_flags(cmd, o->sweep, nullptr, "", true);
  cmd->add_option("--lengths", *lengths, "comma-separated target lengths in tokens")
      ->capture_default_str();
  cmd->add_option("--tasks", *tasks,
                  "comma-separated tasks (default: all 13; qa_1 / qa_2 need --squad / --hotpotqa)");
  cmd->add_option("--samples", o->samples, "samples per task and length (RULER: 500)")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--seed", o->seed)->capture_default_str();
  cmd->add_option("--essays", o->essays,
                  "essay haystack: a text file or RULER's PaulGrahamEssays.json (default: the "
                  "noise sentences)");
  cmd->add_option("--squad", o->squad, "SQuAD v2.0 dev JSON (for qa_1)");
  cmd->add_option("--hotpotqa", o->hotpotqa, "HotpotQA dev distractor JSON (for qa_2)");
  cmd->add_option("--question-mode", o->question_mode,
                  "keep (kvpress's setting): the context is compressed once, the question and "
                  "answer prefix kept on top; evict: they are part of the budgeted stream")
      ->check(CLI::IsMember({"evict", "keep"}))
      ->capture_default_str();
  commands.add(cmd, [o, sweep, tasks, lengths] {
    sweep->apply_to(o->sweep);
    o->tasks = split_list(*tasks);
    o->lengths.clear();
    for (const auto& item : split_list(*lengths)) {
      size_t used = 0;
      int64_t value = 0;
      try {
        value = std::stoll(item, &used);
      } catch (...) {
        used = 0;
      }
      if (used != item.size() || item.empty())
        fail("--lengths: expected token counts like 4096,8192, found '", item, "'");
      o->lengths.push_back(value);
    }
    return run_ruler_eval(*o);
  });
}

}  // namespace

void register_eval_commands(CLI::App& app, Commands& commands) {
  auto* eval = app.add_subcommand("eval", "evaluate a model");
  eval->require_subcommand(1);
  register_ppl(eval, commands);
  register_synthetic(eval, commands);
  register_ruler(eval, commands);
  register_longbench(eval, commands);
  register_longbench_v2(eval, commands);
  register_mmmu(eval, commands);
  register_mmstar(eval, commands);
  register_videomme(eval, commands);
  register_math(eval, commands);
  register_dialogue(eval, commands);
  register_score(eval, commands);
  register_policies(app, commands);
}

}  // namespace retain::cli
