// synth, prep.
#include <tuple>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/error.h"
#include "data/prep.h"
#include "data/synth_command.h"

namespace retain::cli {

namespace {

// The synth flags that are lists or ranges, as written; turned into SynthOptions when it runs.
struct SynthLists {
  std::string train_tasks = "kv,vars,needle,multi", heldout_tasks = train_tasks;
  std::string train_words = "600", heldout_words = "600", train_multi_facts, train_count = "100";
  std::string tokenizer_pieces;
};

void register_synth(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<SynthOptions>();
  auto lists = std::make_shared<SynthLists>();
  auto* cmd = app.add_subcommand(
      "synth", "write a seeded synthetic corpus, held-out tasks and a SentencePiece tokenizer");
  cmd->add_option("--out", o->out, "output directory (must not exist)")->required();
  cmd->add_option("--seed", o->seed, "seed of the training corpus")->capture_default_str();
  cmd->add_option("--heldout-seed", o->heldout_seed, "seed of the held-out tasks")
      ->capture_default_str();
  cmd->add_option("--train-tasks", lists->train_tasks, "kv,vars,needle,multi")
      ->capture_default_str();
  cmd->add_option("--train-count", lists->train_count,
                  "training documents per task; a list (e.g. 3000,200) makes several parts")
      ->capture_default_str();
  cmd->add_option("--train-words", lists->train_words,
                  "context words: N or MIN:MAX, one per --train-count part (e.g. 10:60,300:900)")
      ->capture_default_str();
  cmd->add_option("--train-multi-questions", o->train_multi_questions,
                  "questions per training multi document (0: --multi-questions)");
  cmd->add_option("--train-multi-facts", lists->train_multi_facts,
                  "facts per training multi document: N or MIN:MAX (default: --multi-facts)");
  cmd->add_option("--heldout-tasks", lists->heldout_tasks, "kv,vars,needle,multi")
      ->capture_default_str();
  cmd->add_option("--heldout-count", o->heldout_count, "held-out examples per task")
      ->check(kNonNegative)
      ->capture_default_str();
  cmd->add_option("--heldout-questions", o->heldout_questions,
                  "instead of --heldout-count: the fewest examples per task that ask at least N "
                  "questions (a multi example asks --multi-questions)")
      ->check(kNonNegative);
  cmd->add_option("--heldout-words", lists->heldout_words, "held-out context words")
      ->capture_default_str();
  cmd->add_option("--key-chars", o->spec.key_chars, "characters of a key")->capture_default_str();
  cmd->add_option("--key-alphabet", o->spec.key_alphabet, "characters keys are made of")
      ->capture_default_str();
  cmd->add_option("--value-digits", o->spec.value_digits, "digits of a value")
      ->capture_default_str();
  cmd->add_option("--kv-facts", o->spec.kv_facts, "facts in a kv context")->capture_default_str();
  cmd->add_option("--multi-facts", o->spec.multi_facts, "facts in a multi context")
      ->capture_default_str();
  cmd->add_option("--multi-questions", o->spec.multi_questions, "questions of a multi example")
      ->capture_default_str();
  cmd->add_option("--var-hops", o->spec.var_hops, "assignments in a vars chain")
      ->capture_default_str();
  cmd->add_option("--vocab-size", o->vocab_size,
                  "train a SentencePiece BPE tokenizer of at most N pieces (0: none)")
      ->check(kNonNegative)
      ->capture_default_str();
  cmd->add_option("--tokenizer-pieces", lists->tokenizer_pieces,
                  "comma-separated strings the tokenizer keeps as one piece each (besides . : ? "
                  "=), e.g. a template's \"?\\nAnswer:\"");
  cmd->add_flag("--force", o->force, "replace an existing output directory");
  commands.add(cmd, [o, lists] {
    SynthOptions& synth = *o;
    synth.tokenizer_pieces = split_list(lists->tokenizer_pieces);
    synth.train_tasks = split_list(lists->train_tasks);
    synth.heldout_tasks = split_list(lists->heldout_tasks);
    const auto counts = split_list(lists->train_count), words = split_list(lists->train_words);
    RETAIN_CHECK(counts.size() == words.size(), "synth: --train-count has ", counts.size(),
                 " parts but --train-words has ", words.size());
    synth.train_parts.clear();
    for (size_t p = 0; p < counts.size(); ++p) {
      SynthOptions::TrainPart part;
      part.count = parse_count_range(counts[p], "--train-count").first;
      std::tie(part.words_min, part.words_max) = parse_count_range(words[p], "--train-words");
      synth.train_parts.push_back(part);
    }
    auto heldout_words = parse_count_range(lists->heldout_words, "--heldout-words");
    RETAIN_CHECK(heldout_words.first == heldout_words.second,
                 "--heldout-words: expected one word count, found the range '",
                 lists->heldout_words, "'");
    synth.heldout_words = heldout_words.first;
    if (!lists->train_multi_facts.empty())
      std::tie(synth.train_multi_facts_min, synth.train_multi_facts_max) =
          parse_count_range(lists->train_multi_facts, "--train-multi-facts");
    return run_synth(synth);
  });
}

void register_prep(CLI::App& app, Commands& commands) {
  auto o = std::make_shared<PrepOptions>();
  auto* cmd = app.add_subcommand("prep", "tokenize text into HDF5 token shards");
  cmd->add_option("--tokenizer", o->tokenizer_dir, "model directory whose tokenizer to use")
      ->required();
  cmd->add_option("--input", o->inputs, "input files")->required();
  cmd->add_option("--out", o->out, "output directory (new or empty)")->required();
  cmd->add_option("--format", o->format,
                  "text | jsonl | chat | math (problem + solution or messages rows, JSONL or "
                  "parquet)")
      ->capture_default_str();
  cmd->add_option("--instruction", o->instruction,
                  "math: appended to each problem after a newline (default: eval math's boxed "
                  "instruction; \"\": none)");
  cmd->add_option("--field", o->field, "jsonl field holding the text")->capture_default_str();
  cmd->add_option("--label-spans", o->label_spans,
                  "jsonl field of [begin, end] byte ranges: only their tokens are labels");
  cmd->add_option("--chat-template", o->chat_template,
                  "chat: a Jinja chat template file (or chatml) instead of the model dir's");
  cmd->add_option("--shard-tokens", o->shard_tokens, "tokens per shard")
      ->check(kPositive)
      ->capture_default_str();
  cmd->add_option("--max-docs", o->max_docs, "stop after N documents (0: all)")
      ->check(kNonNegative);
  commands.add(cmd, [o] {
    run_prep(*o);
    return 0;
  });
}

}  // namespace

void register_data_commands(CLI::App& app, Commands& commands) {
  register_synth(app, commands);
  register_prep(app, commands);
}

}  // namespace retain::cli
