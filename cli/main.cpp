// `retain`: subcommand dispatch only. Every subcommand parses its flags into an options struct
// and calls a library function; errors from anywhere end here as one message and exit code 1.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>

#include "checkpoints/export.h"
#include "checkpoints/gate_file.h"
#include "core/config_args.h"
#include "core/cpu_isa.h"
#include "core/error.h"
#include "data/prep.h"
#include "data/synth_command.h"
#include "eval/bench_decode.h"
#include "eval/benchmarks/dialogue.h"
#include "eval/benchmarks/longbench.h"
#include "eval/benchmarks/longbench_v2.h"
#include "eval/benchmarks/synthetic.h"
#include "eval/commands.h"
#include "eval/policies/policy_registry.h"
#include "eval/score_command.h"
#include "kernels/bench_kernels.h"
#include "kernels/device_info.h"
#include "model/init_model.h"
#include "trainer/bench_train.h"
#include "trainer/launch.h"
#include "trainer/trainer.h"

namespace {

void add_model_flags(CLI::App* cmd, retain::ModelFlags& flags) {
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

// The base model of `bench decode` / `bench train`: a directory or a preset made on the device.
void add_bench_model_flags(CLI::App* cmd, retain::BenchModelOptions& o) {
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

void add_chat_flags(CLI::App* cmd, retain::ChatFlags& flags) {
  cmd->add_flag("--chat", flags.chat, "render the prompt with the model's chat template");
  cmd->add_flag("--no-chat", flags.no_chat, "use the raw prompt (BOS + text)");
  cmd->add_option("--chat-template", flags.chat_template,
                  "llama3 | llama3.1 | chatml | qwen2 | qwen2.5 | qwen3 | mistral | llama2");
  cmd->add_option("--system", flags.system, "system message (chat only)");
  cmd->add_flag("--no-thinking", flags.no_thinking, "qwen3: enable_thinking=false");
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

// "h2o:window=64,buffer=8,streaming": an item with '=' but no ':' continues the previous policy.
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

// Checked while the command line is parsed, before a run creates anything: entries per KV head
// (an integer >= 1) or a fraction of the prompt in (0, 1).
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
      retain::fail(
          "--budget: expected entries per KV head (an integer >= 1) or a fraction of the "
          "prompt in (0, 1), found '",
          b, "'");
    out.push_back(value);
  }
  return out;
}

// A number, finite, >= 0 (or > 0): the message says what was expected and what was found.
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
const CLI::Validator kNonNegative = number_at_least(0, false);
const CLI::Validator kPositive = number_at_least(0, true);

int run_env() {
  std::cout << "retain (LibTorch " << TORCH_VERSION << ")\n"
            << "CPU threads: " << at::get_num_threads() << "\n"
            << "CUDA sources compiled: " << (retain::cuda_sources_compiled() ? "yes" : "no") << "\n"
            << "CUDA available to LibTorch: " << (at::hasCUDA() ? "yes" : "no") << "\n";
  if (retain::cuda_sources_compiled()) std::cout << retain::cuda_device_summary();
  return 0;
}

// Replaces every `--config FILE.yaml` with the flags the file holds for the subcommand it follows
// (core/config_args.h). The subcommand is found by walking the words before it.
std::vector<std::string> expand_config_files(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> out = {argv[0]};
  CLI::App* current = &app;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string path;
    if (arg == "--config") {
      if (i + 1 >= argc) retain::fail("--config needs a YAML file");
      path = argv[++i];
    } else if (arg.rfind("--config=", 0) == 0) {
      path = arg.substr(9);
    } else {
      for (CLI::App* sub : current->get_subcommands([](CLI::App*) { return true; }))
        if (sub->check_name(arg)) {
          current = sub;
          break;
        }
      out.push_back(arg);
      continue;
    }
    std::vector<std::string> names;
    for (const CLI::Option* opt : current->get_options())
      for (const auto& n : opt->get_lnames()) names.push_back(n);
    auto lookup = [&](const std::string& name) -> std::optional<retain::ConfigFlag> {
      const CLI::Option* opt = current->get_option_no_throw("--" + name);
      if (opt == nullptr || name == "help") return std::nullopt;
      return retain::ConfigFlag{opt->get_items_expected_max() == 0,
                                opt->get_items_expected_max() > 1};
    };
    for (auto& a : retain::config_file_args(path, lookup, names)) out.push_back(std::move(a));
  }
  return out;
}

}  // namespace

// `retain launch --nproc N [--master-port P] -- COMMAND...`: parsed by hand, because everything
// after `--` belongs to the launched command (CLI11 would try to parse it).
int launch_main(int argc, char** argv) {
  int nproc = 0, port = 0;
  int i = 2;
  auto int_arg = [&](const char* flag) {
    if (i + 1 >= argc) retain::fail("launch: ", flag, " needs a value");
    try {
      return std::stoi(argv[++i]);
    } catch (const std::exception&) {
      retain::fail("launch: ", flag, " expects an integer, found '", argv[i], "'");
    }
  };
  for (; i < argc && std::string(argv[i]) != "--"; ++i) {
    std::string a = argv[i];
    if (a == "--nproc")
      nproc = int_arg("--nproc");
    else if (a == "--master-port")
      port = int_arg("--master-port");
    else
      retain::fail("launch: unknown option '", a,
                   "' (usage: retain launch --nproc N [--master-port P] -- COMMAND...)");
  }
  RETAIN_CHECK(nproc > 0, "launch: --nproc N is required");
  RETAIN_CHECK(i < argc, "launch: missing `--` before the command to run");
  return retain::run_launch(nproc, port, std::vector<std::string>(argv + i + 1, argv + argc));
}

int main(int argc, char** argv) {
  retain::configure_cpu_isa();
  if (argc > 1 && std::string(argv[1]) == "launch") {
    try {
      return launch_main(argc, argv);
    } catch (const std::exception& e) {
      std::cerr << "retain: error: " << e.what() << std::endl;
      return 1;
    }
  }
  CLI::App app{"retain: learned KV-cache retention for frozen LLMs"};
  app.footer(
      "Also: retain launch --nproc N [--master-port P] -- COMMAND...   (N local ranks, "
      "torchrun-style)\nEvery subcommand takes --config FILE.yaml: a map of its flag names to "
      "values; "
      "flags after it override the file.");
  app.require_subcommand(1);
  // A flag given twice (a --config file's, then the command line's) takes the last value.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);

  retain::InitModelOptions init;
  auto* init_cmd =
      app.add_subcommand("init-model", "write an HF-format model dir with random weights");
  init_cmd->add_option("--arch", init.arch, "llama | mistral | qwen2 | qwen3");
  init_cmd->add_option("--preset", init.preset, "tiny | small | llama3-8b | qwen3-4b | ...")
      ->required();
  init_cmd->add_option("--seed", init.seed, "weight seed")->capture_default_str();
  init_cmd->add_option("--set", init.sets, "config.json edit key=value (repeatable)");
  init_cmd->add_option("--dtype", init.dtype, "float32 | bfloat16 | float16");
  init_cmd->add_option("--tokenizer", init.tokenizer,
                       "SentencePiece tokenizer.model to ship (sets vocab_size, bos/eos ids)");
  init_cmd->add_option("--out", init.out, "output directory")->required();

  retain::SynthOptions synth;
  std::string synth_train_tasks = "kv,vars,needle,multi", synth_heldout_tasks = synth_train_tasks;
  std::string synth_train_words = "600", synth_heldout_words = "600", synth_train_multi_facts,
              synth_train_count = "100";
  auto* synth_cmd = app.add_subcommand(
      "synth", "write a seeded synthetic corpus, held-out tasks and a SentencePiece tokenizer");
  synth_cmd->add_option("--out", synth.out, "output directory (must not exist)")->required();
  synth_cmd->add_option("--seed", synth.seed, "seed of the training corpus")->capture_default_str();
  synth_cmd->add_option("--heldout-seed", synth.heldout_seed, "seed of the held-out tasks")
      ->capture_default_str();
  synth_cmd->add_option("--train-tasks", synth_train_tasks, "kv,vars,needle,multi")
      ->capture_default_str();
  synth_cmd
      ->add_option("--train-count", synth_train_count,
                   "training documents per task; a list (e.g. 3000,200) makes several parts")
      ->capture_default_str();
  synth_cmd
      ->add_option("--train-words", synth_train_words,
                   "context words: N or MIN:MAX, one per --train-count part (e.g. 10:60,300:900)")
      ->capture_default_str();
  synth_cmd->add_option("--train-multi-questions", synth.train_multi_questions,
                        "questions per training multi document (0: --multi-questions)");
  synth_cmd->add_option("--train-multi-facts", synth_train_multi_facts,
                        "facts per training multi document: N or MIN:MAX (default: --multi-facts)");
  synth_cmd->add_option("--heldout-tasks", synth_heldout_tasks, "kv,vars,needle,multi")
      ->capture_default_str();
  synth_cmd->add_option("--heldout-count", synth.heldout_count, "held-out examples per task")
      ->capture_default_str();
  synth_cmd->add_option("--heldout-words", synth_heldout_words, "held-out context words")
      ->capture_default_str();
  synth_cmd->add_option("--key-chars", synth.spec.key_chars, "characters of a key")
      ->capture_default_str();
  synth_cmd->add_option("--key-alphabet", synth.spec.key_alphabet, "characters keys are made of")
      ->capture_default_str();
  synth_cmd->add_option("--value-digits", synth.spec.value_digits, "digits of a value")
      ->capture_default_str();
  synth_cmd->add_option("--kv-facts", synth.spec.kv_facts, "facts in a kv context")
      ->capture_default_str();
  synth_cmd->add_option("--multi-facts", synth.spec.multi_facts, "facts in a multi context")
      ->capture_default_str();
  synth_cmd
      ->add_option("--multi-questions", synth.spec.multi_questions, "questions of a multi example")
      ->capture_default_str();
  synth_cmd->add_option("--var-hops", synth.spec.var_hops, "assignments in a vars chain")
      ->capture_default_str();
  synth_cmd
      ->add_option("--vocab-size", synth.vocab_size,
                   "train a SentencePiece BPE tokenizer of at most N pieces (0: none)")
      ->capture_default_str();
  synth_cmd->add_flag("--force", synth.force, "replace an existing output directory");
  init_cmd->add_flag("--force", init.force, "replace an existing output directory");

  retain::GenerateCommandOptions gen;
  auto* gen_cmd = app.add_subcommand("generate", "generate text from a prompt");
  add_model_flags(gen_cmd, gen.model);
  gen_cmd->add_option("--prompt", gen.prompt, "prompt text (needs the model's tokenizer)");
  gen_cmd->add_option("--prompt-ids", gen.prompt_ids, "prompt token ids, e.g. 1,2,3");
  gen_cmd->add_option("--prompts-file", gen.prompts_file,
                      "one prompt per line, generated as one batch");
  gen_cmd->add_option("--stop", gen.stops, "stop string (repeatable); the output ends before it");
  gen_cmd->add_option("--max-new-tokens", gen.max_new_tokens)
      ->check(kNonNegative)
      ->capture_default_str();
  gen_cmd->add_option("--temperature", gen.temperature, "0 = greedy")
      ->check(kNonNegative)
      ->capture_default_str();
  gen_cmd->add_option("--top-p", gen.top_p, "in (0, 1]")->check(kPositive)->capture_default_str();
  gen_cmd->add_option("--seed", gen.seed)->capture_default_str();
  gen_cmd->add_flag("--ignore-eos", gen.ignore_eos, "do not stop at EOS");
  gen_cmd->add_flag("--json", gen.json, "print JSON with ids and rates");
  add_chat_flags(gen_cmd, gen.chat);
  gen_cmd
      ->add_option("--policy", gen.policy,
                   "eviction policy, name:key=value,... (`retain policies` lists them)")
      ->capture_default_str();
  gen_cmd->add_option("--budget", gen.budget,
                      "KV entries per head (>= 1) or a fraction of the prompt (< 1)");
  gen_cmd->add_option("--gates", gen.gates, "gate file for trimkv / dbtrimkv");
  gen_cmd->add_option("--chunk", gen.chunk, "prefill chunk in tokens (0: the whole prompt)")
      ->check(kNonNegative);

  retain::TokenizeCommandOptions tok;
  auto* tok_cmd = app.add_subcommand("tokenize", "show the token ids of a text, or decode ids");
  tok_cmd
      ->add_option("--model", tok.model_dir, "model directory (tokenizer.json or tokenizer.model)")
      ->required();
  tok_cmd->add_option("--text", tok.text, "text to tokenize");
  tok_cmd->add_option("--file", tok.file, "UTF-8 file to tokenize");
  tok_cmd->add_flag("--ids", tok.ids_only, "print only the comma-separated ids");
  tok_cmd->add_option("--decode", tok.decode,
                      "comma-separated ids to turn back into text (instead of --text/--file)");
  tok_cmd->add_flag("--skip-special", tok.skip_special,
                    "with --decode: leave out special tokens (BOS, EOS, ...)");
  add_chat_flags(tok_cmd, tok.chat);

  auto* eval_cmd = app.add_subcommand("eval", "evaluate a model");
  eval_cmd->require_subcommand(1);
  retain::PplCommandOptions ppl;
  auto* ppl_cmd = eval_cmd->add_subcommand("ppl", "perplexity of a text file");
  add_model_flags(ppl_cmd, ppl.model);
  ppl_cmd->add_option("--text", ppl.text_file, "UTF-8 text file")->required();
  ppl_cmd->add_option("--max-length", ppl.max_length, "window length (0: whole text)");
  ppl_cmd->add_option("--stride", ppl.stride, "window stride (0: max-length)");
  ppl_cmd->add_option("--out", ppl.out_dir, "output directory for scores.json/csv")->required();
  std::string ppl_policies, ppl_budgets;
  ppl_cmd->add_option("--policy", ppl_policies,
                      "comma-separated policies: stream the text through each policy's cache "
                      "(`retain policies` lists them)");
  ppl_cmd->add_option("--budget", ppl_budgets,
                      "comma-separated budgets (< 1: fraction of the text, 0.3 = 70% eviction)");
  ppl_cmd->add_option("--gates", ppl.gates, "gate file for trimkv / dbtrimkv");
  ppl_cmd->add_option("--chunk", ppl.chunk, "tokens per streamed chunk")
      ->check(kNonNegative)
      ->capture_default_str();

  retain::SyntheticEvalOptions syn;
  std::string syn_policies = "full", syn_budgets, syn_tasks = "kv,vars,needle,multi";
  auto* syn_cmd =
      eval_cmd->add_subcommand("synthetic", "seeded long-context tasks under eviction policies");
  add_model_flags(syn_cmd, syn.model);
  syn_cmd
      ->add_option("--policy", syn_policies,
                   "comma-separated policies (`retain policies` lists them)")
      ->capture_default_str();
  syn_cmd->add_option("--budget", syn_budgets,
                      "comma-separated budgets (entries per head, or < 1: fraction of the prompt)");
  syn_cmd->add_option("--gates", syn.gates, "gate file for trimkv / dbtrimkv");
  syn_cmd->add_option("--chunk", syn.chunk, "prefill chunk")
      ->check(kNonNegative)
      ->capture_default_str();
  syn_cmd->add_option("--tasks", syn_tasks, "kv,vars,needle,multi")->capture_default_str();
  syn_cmd->add_option("--data", syn.data,
                      "task file (retain synth's heldout.jsonl) instead of generated tasks");
  syn_cmd->add_option("--count", syn.count, "examples per task")
      ->check(kPositive)
      ->capture_default_str();
  syn_cmd->add_option("--words", syn.context_words, "context length in words")
      ->capture_default_str();
  syn_cmd->add_option("--seed", syn.seed)->capture_default_str();
  syn_cmd->add_option("--limit", syn.limit, "run only the first N examples per task")
      ->check(kNonNegative);
  syn_cmd->add_option("--max-new-tokens", syn.max_new_tokens)
      ->check(kPositive)
      ->capture_default_str();
  syn_cmd->add_option("--out", syn.out, "output directory")->required();
  syn_cmd->add_flag("--protect-question", syn.protect_question,
                    "never evict the question while reading the prompt");
  syn_cmd
      ->add_option("--question-mode", syn.question_mode,
                   "evict: the question is part of the budgeted stream; keep: kvpress's "
                   "semantics, the context is compressed once and the question kept on top")
      ->check(CLI::IsMember({"evict", "keep"}))
      ->capture_default_str();

  retain::LongBenchOptions lb;
  std::string lb_policies = "full", lb_budgets, lb_datasets;
  auto* lb_cmd =
      eval_cmd->add_subcommand("longbench", "LongBench / LongBench-E under eviction policies");
  add_model_flags(lb_cmd, lb.model);
  add_chat_flags(lb_cmd, lb.chat);
  lb_cmd
      ->add_option("--data", lb.data_dir,
                   "LongBench directory (data/*.jsonl, config/dataset2*.json)")
      ->required();
  lb_cmd->add_option("--datasets", lb_datasets,
                     "comma-separated datasets (default: the 16 English + code tasks)");
  lb_cmd->add_flag("--e", lb.e, "LongBench-E (data/<dataset>_e.jsonl, 13 tasks)");
  lb_cmd->add_option("--max-length", lb.max_length,
                     "prompt tokens kept by middle truncation (0: model max)");
  lb_cmd
      ->add_option("--policy", lb_policies,
                   "comma-separated policies (`retain policies` lists them)")
      ->capture_default_str();
  lb_cmd->add_option("--budget", lb_budgets, "comma-separated budgets");
  lb_cmd->add_option("--gates", lb.gates, "gate file for trimkv / dbtrimkv");
  lb_cmd->add_option("--chunk", lb.chunk, "prefill chunk")
      ->check(kNonNegative)
      ->capture_default_str();
  lb_cmd->add_option("--limit", lb.limit, "examples per dataset (0: all)")->check(kNonNegative);
  lb_cmd->add_option("--out", lb.out, "output directory")->required();
  lb_cmd->add_flag("--protect-question", lb.protect_question,
                   "never evict the question while reading the prompt");

  retain::LongBenchV2Options lb2;
  std::string lb2_policies = "full", lb2_budgets;
  auto* lb2_cmd = eval_cmd->add_subcommand("longbench-v2",
                                           "LongBench v2 multiple choice under eviction policies");
  add_model_flags(lb2_cmd, lb2.model);
  add_chat_flags(lb2_cmd, lb2.chat);
  lb2_cmd->add_option("--data", lb2.data, "LongBench v2 data (JSON array or JSONL)")->required();
  lb2_cmd->add_option("--template", lb2.template_file,
                      "prompt template (default: prompts/0shot.txt next to --data)");
  lb2_cmd->add_option("--max-length", lb2.max_length,
                      "prompt tokens kept by middle truncation (0: model max)");
  lb2_cmd->add_option("--max-new-tokens", lb2.max_new_tokens)
      ->check(kPositive)
      ->capture_default_str();
  lb2_cmd
      ->add_option("--policy", lb2_policies,
                   "comma-separated policies (`retain policies` lists them)")
      ->capture_default_str();
  lb2_cmd->add_option("--budget", lb2_budgets, "comma-separated budgets");
  lb2_cmd->add_option("--gates", lb2.gates, "gate file for trimkv / dbtrimkv");
  lb2_cmd->add_option("--chunk", lb2.chunk, "prefill chunk")
      ->check(kNonNegative)
      ->capture_default_str();
  lb2_cmd->add_option("--limit", lb2.limit, "records (0: all)")->check(kNonNegative);
  lb2_cmd->add_option("--out", lb2.out, "output directory")->required();

  retain::DialogueOptions dlg;
  std::string dlg_policies = "full", dlg_budgets;
  auto* dlg_cmd = eval_cmd->add_subcommand(
      "dialogue", "multi-turn questions over one context, the cache persisting");
  add_model_flags(dlg_cmd, dlg.model);
  dlg_cmd->add_option("--data", dlg.data, "jsonl of {id, context, multi_turns: [{input, answer}]}")
      ->required();
  dlg_cmd->add_option("--history", dlg.history, "gold | own")->capture_default_str();
  dlg_cmd
      ->add_option("--policy", dlg_policies,
                   "comma-separated policies (`retain policies` lists them)")
      ->capture_default_str();
  dlg_cmd->add_option("--budget", dlg_budgets, "comma-separated budgets");
  dlg_cmd->add_option("--gates", dlg.gates, "gate file for trimkv / dbtrimkv");
  dlg_cmd->add_option("--chunk", dlg.chunk, "prefill chunk")
      ->check(kNonNegative)
      ->capture_default_str();
  dlg_cmd->add_option("--max-new-tokens", dlg.max_new_tokens)
      ->check(kPositive)
      ->capture_default_str();
  dlg_cmd->add_option("--limit", dlg.limit, "records (0: all)")->check(kNonNegative);
  dlg_cmd->add_option("--out", dlg.out, "output directory")->required();

  retain::ScoreCommandOptions score;
  auto* score_cmd = eval_cmd->add_subcommand(
      "score", "recompute scores from a predictions.jsonl, without a model");
  score_cmd->add_option("--benchmark", score.benchmark, "longbench | longbench-v2")->required();
  score_cmd->add_option("--predictions", score.predictions, "predictions.jsonl")->required();
  score_cmd->add_flag("--e", score.e, "LongBench-E length buckets");
  score_cmd->add_option("--out", score.out,
                        "output directory (default: the predictions' directory)");

  auto* bench_cmd = app.add_subcommand("bench", "throughput benchmarks");
  bench_cmd->require_subcommand(1);
  retain::BenchTokenizeOptions bench_tok;
  auto* bench_tok_cmd = bench_cmd->add_subcommand("tokenize", "tokenizer encode throughput");
  bench_tok_cmd->add_option("--model", bench_tok.model_dir, "model directory")->required();
  bench_tok_cmd->add_option("--file", bench_tok.file, "UTF-8 text file")->required();
  bench_tok_cmd->add_option("--repeat", bench_tok.repeat)->capture_default_str();
  retain::BenchKernelsOptions bench_kern;
  auto* bench_kern_cmd = bench_cmd->add_subcommand("kernels", "CUDA kernels vs SDPA / bandwidth");
  bench_kern_cmd->add_option("--seq", bench_kern.seqs, "attention lengths")->capture_default_str();
  bench_kern_cmd->add_option("--decode-len", bench_kern.decode_len)->capture_default_str();
  bench_kern_cmd->add_option("--iters", bench_kern.iters)->capture_default_str();
  retain::BenchDecodeOptions bench_dec;
  auto* bench_dec_cmd = bench_cmd->add_subcommand(
      "decode", "batched long-context generation under a policy: tokens/s, KV bytes, roofline");
  add_bench_model_flags(bench_dec_cmd, bench_dec.model);
  bench_dec_cmd->add_option("--context", bench_dec.context, "prompt tokens per sequence")
      ->capture_default_str();
  bench_dec_cmd
      ->add_option("--budget", bench_dec.budget,
                   "KV entries per head (>= 1) or a fraction of the prompt (< 1)")
      ->capture_default_str();
  bench_dec_cmd->add_option("--batch", bench_dec.batch)->capture_default_str();
  bench_dec_cmd->add_option("--new-tokens", bench_dec.new_tokens)->capture_default_str();
  bench_dec_cmd
      ->add_option("--policy", bench_dec.policy,
                   "eviction policy, name:key=value,... (`retain policies` lists them)")
      ->capture_default_str();
  bench_dec_cmd->add_option("--chunk", bench_dec.chunk, "prefill chunk in tokens (0: whole prompt)")
      ->capture_default_str();
  bench_dec_cmd
      ->add_option("--decode", bench_dec.decode,
                   "decode steps: auto (CUDA graphs where the policy allows), eager or static")
      ->check(CLI::IsMember({"auto", "eager", "static"}))
      ->capture_default_str();
  bench_dec_cmd->add_flag("--json", bench_dec.json, "one JSON object instead of the table");
  retain::BenchTrainOptions bench_tr;
  auto* bench_tr_cmd = bench_cmd->add_subcommand(
      "train", "one gate-training step at long context: tokens/s, MFU, memory, time split");
  add_bench_model_flags(bench_tr_cmd, bench_tr.model);
  bench_tr_cmd->add_option("--seq", bench_tr.seq, "tokens per sequence")->capture_default_str();
  bench_tr_cmd->add_option("--batch", bench_tr.batch)->capture_default_str();
  bench_tr_cmd->add_option("--gates", bench_tr.gates, "mlp2 | mlp3")->capture_default_str();
  bench_tr_cmd->add_option("--gate-width", bench_tr.gate_width)->capture_default_str();
  bench_tr_cmd->add_option("--memory", bench_tr.memory, "capacity budget M")->capture_default_str();
  bench_tr_cmd->add_option("--logit-block", bench_tr.logit_block)->capture_default_str();
  bench_tr_cmd
      ->add_option("--checkpointing", bench_tr.checkpointing,
                   "recompute student layers in the backward pass (true | false)")
      ->capture_default_str();
  bench_tr_cmd->add_option("--attention", bench_tr.attention, "kernel | reference")
      ->capture_default_str();
  bench_tr_cmd->add_option("--iters", bench_tr.iters)->capture_default_str();
  bench_tr_cmd->add_option("--warmup", bench_tr.warmup)->capture_default_str();
  bench_tr_cmd->add_flag("--json", bench_tr.json, "one JSON object instead of the table");

  retain::PrepOptions prep;
  auto* prep_cmd = app.add_subcommand("prep", "tokenize text into HDF5 token shards");
  prep_cmd->add_option("--tokenizer", prep.tokenizer_dir, "model directory whose tokenizer to use")
      ->required();
  prep_cmd->add_option("--input", prep.inputs, "input files")->required();
  prep_cmd->add_option("--out", prep.out, "output directory (new or empty)")->required();
  prep_cmd->add_option("--format", prep.format, "text | jsonl | chat")->capture_default_str();
  prep_cmd->add_option("--field", prep.field, "jsonl field holding the text")
      ->capture_default_str();
  prep_cmd->add_option("--label-spans", prep.label_spans,
                       "jsonl field of [begin, end] byte ranges: only their tokens are labels");
  prep_cmd->add_option("--shard-tokens", prep.shard_tokens, "tokens per shard")
      ->capture_default_str();
  prep_cmd->add_option("--max-docs", prep.max_docs, "stop after N documents (0: all)");

  std::string recipe;
  std::vector<std::string> train_overrides;
  auto* train_cmd =
      app.add_subcommand("train", "train retention gates (or a small base model) from a recipe");
  train_cmd->add_option("recipe", recipe, "recipe YAML")->required();
  train_cmd->add_option("overrides", train_overrides, "key.sub=value overrides");

  std::string export_dir, export_out;
  auto* export_cmd =
      app.add_subcommand("export", "write a checkpoint's gates (or base model) in usable form");
  export_cmd->add_option("checkpoint", export_dir, "RUN/step-N, or RUN for its newest step")
      ->required();
  export_cmd->add_option("--out", export_out, "gate file (.safetensors) or model directory")
      ->required();

  std::string import_in, import_model, import_out;
  auto* import_cmd =
      app.add_subcommand("import-gates", "convert official TrimKV/DBTrimKV gate weights");
  import_cmd->add_option("official", import_in, "official safetensors file")->required();
  import_cmd->add_option("--model", import_model, "the base model directory")->required();
  import_cmd->add_option("--out", import_out, "gate file to write")->required();

  auto* env_cmd = app.add_subcommand("env", "print the build and the devices retain sees");

  bool policies_markdown = false;
  auto* policies_cmd =
      app.add_subcommand("policies", "list the eviction policies with their options and defaults");
  policies_cmd->add_flag("--markdown", policies_markdown, "as docs/evaluation.md's table");

  try {
    std::vector<std::string> args = expand_config_files(app, argc, argv);
    std::vector<char*> arg_ptrs;
    for (auto& a : args) arg_ptrs.push_back(a.data());
    app.parse(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const retain::Error& e) {
    std::cerr << "retain: error: " << e.what() << std::endl;
    return 1;
  }

  try {
    if (init_cmd->parsed()) {
      retain::init_model(init);
      return 0;
    }
    if (gen_cmd->parsed()) return retain::run_generate_command(gen);
    if (synth_cmd->parsed()) {
      synth.train_tasks = split_list(synth_train_tasks);
      synth.heldout_tasks = split_list(synth_heldout_tasks);
      const auto counts = split_list(synth_train_count), words = split_list(synth_train_words);
      RETAIN_CHECK(counts.size() == words.size(), "synth: --train-count has ", counts.size(),
                   " parts but --train-words has ", words.size());
      synth.train_parts.clear();
      for (size_t p = 0; p < counts.size(); ++p) {
        retain::SynthOptions::TrainPart part;
        part.count = retain::parse_count_range(counts[p], "--train-count").first;
        std::tie(part.words_min, part.words_max) =
            retain::parse_count_range(words[p], "--train-words");
        synth.train_parts.push_back(part);
      }
      auto heldout_words = retain::parse_count_range(synth_heldout_words, "--heldout-words");
      RETAIN_CHECK(heldout_words.first == heldout_words.second,
                   "--heldout-words: expected one word count, found the range '",
                   synth_heldout_words, "'");
      synth.heldout_words = heldout_words.first;
      if (!synth_train_multi_facts.empty())
        std::tie(synth.train_multi_facts_min, synth.train_multi_facts_max) =
            retain::parse_count_range(synth_train_multi_facts, "--train-multi-facts");
      return retain::run_synth(synth);
    }
    if (score_cmd->parsed()) return retain::run_score_command(score);
    if (lb2_cmd->parsed()) {
      lb2.policies = split_policies(lb2_policies);
      lb2.budgets = parse_budgets(lb2_budgets);
      return retain::run_longbench_v2_eval(lb2);
    }
    if (dlg_cmd->parsed()) {
      dlg.policies = split_policies(dlg_policies);
      dlg.budgets = parse_budgets(dlg_budgets);
      return retain::run_dialogue_eval(dlg);
    }
    if (lb_cmd->parsed()) {
      lb.policies = split_policies(lb_policies);
      lb.budgets = parse_budgets(lb_budgets);
      lb.datasets = split_list(lb_datasets);
      return retain::run_longbench_eval(lb);
    }
    if (ppl_cmd->parsed()) {
      ppl.policies = split_policies(ppl_policies);
      ppl.budgets = parse_budgets(ppl_budgets);
      return retain::run_ppl_command(ppl);
    }
    if (syn_cmd->parsed()) {
      // "h2o:window=64,buffer=8,streaming": an item with '=' but no ':' continues the previous
      // policy.
      syn.policies.clear();
      for (const auto& item : split_list(syn_policies)) {
        if (item.find('=') != std::string::npos && item.find(':') == std::string::npos &&
            !syn.policies.empty())
          syn.policies.back() += "," + item;
        else
          syn.policies.push_back(item);
      }
      syn.tasks = split_list(syn_tasks);
      syn.budgets = parse_budgets(syn_budgets);
      return retain::run_synthetic_eval(syn);
    }
    if (tok_cmd->parsed()) return retain::run_tokenize_command(tok);
    if (bench_tok_cmd->parsed()) return retain::run_bench_tokenize_command(bench_tok);
    if (bench_kern_cmd->parsed()) return retain::run_bench_kernels_command(bench_kern);
    if (bench_dec_cmd->parsed()) return retain::run_bench_decode_command(bench_dec);
    if (bench_tr_cmd->parsed()) return retain::run_bench_train_command(bench_tr);
    if (env_cmd->parsed()) return run_env();
    if (policies_cmd->parsed()) {
      std::cout << (policies_markdown ? retain::policy_table_markdown()
                                      : retain::policy_help() + "\n");
      return 0;
    }
    if (prep_cmd->parsed()) {
      retain::run_prep(prep);
      return 0;
    }
    if (train_cmd->parsed()) return retain::run_train(recipe, train_overrides);
    if (export_cmd->parsed()) {
      retain::export_checkpoint(export_dir, export_out);
      return 0;
    }
    if (import_cmd->parsed()) {
      retain::import_official_gates(import_in, import_model, import_out);
      return 0;
    }
  } catch (const retain::Error& e) {
    std::cerr << "retain: error: " << e.what() << std::endl;
    return 1;
  } catch (const c10::Error& e) {
    std::cerr << "retain: error: " << e.what_without_backtrace() << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "retain: error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
