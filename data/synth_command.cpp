#include "data/synth_command.h"

#include <fstream>
#include <set>

#include "core/error.h"
#include "core/fs.h"
#include "core/json.h"
#include "core/log.h"
#include "model/tokenizers/sentencepiece_tokenizer.h"

namespace retain {

namespace {

void check_tasks(const std::vector<std::string>& tasks, const std::string& flag) {
  RETAIN_CHECK(!tasks.empty(), "synth: ", flag, " needs at least one task");
  for (const auto& t : tasks) {
    bool known = false;
    for (const auto& n : synthetic_task_names()) known = known || n == t;
    RETAIN_CHECK(known, "synth: ", flag, ": task '", t,
                 "' is not known (expected kv, vars, needle or multi)");
  }
}

// SentencePiece reads sentences of at most a few kB: the corpus is cut at line and sentence ends.
void add_sentences(const std::string& text, std::vector<std::string>& out) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find_first_of("\n.?", start);
    end = end == std::string::npos ? text.size() : end + 1;
    std::string piece = text.substr(start, end - start);
    size_t b = piece.find_first_not_of(" \n");
    if (b != std::string::npos) out.push_back(piece.substr(b));
    start = end;
  }
}

}  // namespace

std::pair<int64_t, int64_t> parse_count_range(const std::string& text, const std::string& flag) {
  auto number = [&](const std::string& s) {
    try {
      size_t used = 0;
      long long v = std::stoll(s, &used);
      RETAIN_CHECK(used == s.size() && v > 0, "");
      return static_cast<int64_t>(v);
    } catch (...) {
      fail(flag, ": expected a positive count or a range MIN:MAX, found '", text, "'");
    }
  };
  auto colon = text.find(':');
  if (colon == std::string::npos) return {number(text), number(text)};
  auto range = std::make_pair(number(text.substr(0, colon)), number(text.substr(colon + 1)));
  RETAIN_CHECK(range.first <= range.second, flag, ": the range '", text, "' is empty");
  return range;
}

int run_synth(const SynthOptions& o) {
  RETAIN_CHECK(!o.out.empty(), "synth: --out is required");
  RETAIN_CHECK(o.seed != o.heldout_seed, "synth: --seed and --heldout-seed are both ", o.seed,
               ": the held-out tasks would repeat the training corpus");
  RETAIN_CHECK(!o.train_parts.empty(), "synth: no training part");
  for (const auto& part : o.train_parts)
    RETAIN_CHECK(part.count > 0 && part.words_min > 0 && part.words_max >= part.words_min,
                 "synth: a training part needs a positive --train-count and a --train-words "
                 "range MIN <= MAX");
  RETAIN_CHECK(o.heldout_count >= 0, "synth: --heldout-count must be >= 0 (0: no held-out file)");
  RETAIN_CHECK(o.heldout_questions >= 0,
               "synth: --heldout-questions must be >= 0 (0: use "
               "--heldout-count), found ",
               o.heldout_questions);
  RETAIN_CHECK(o.tokenizer_pieces.empty() || o.vocab_size > 0,
               "synth: --tokenizer-pieces needs a tokenizer (--vocab-size)");
  for (const auto& piece : o.tokenizer_pieces)
    RETAIN_CHECK(!piece.empty() && piece.find(',') == std::string::npos,
                 "synth: --tokenizer-pieces: a piece is empty or has a comma: '", piece, "'");
  RETAIN_CHECK(o.vocab_size == 0 || o.vocab_size >= 64, "synth: --vocab-size ", o.vocab_size,
               " is too small (at least 64, or 0 for no tokenizer)");
  check_tasks(o.train_tasks, "--train-tasks");
  check_tasks(o.heldout_tasks, "--heldout-tasks");
  o.spec.validate("synth");
  const fs::path out(o.out);
  RETAIN_CHECK(!fs::exists(out) || o.force, "synth: ", out.string(),
               " already exists (pass --force to replace it)");

  SyntheticSpec train_spec = o.spec;
  if (o.train_multi_questions > 0) train_spec.multi_questions = o.train_multi_questions;
  if (o.train_multi_facts_min > 0) {
    train_spec.multi_facts = o.train_multi_facts_min;
    train_spec.multi_facts_max = o.train_multi_facts_max;
  }
  train_spec.validate("synth --train-multi-facts");
  write_dir_atomic(out, [&](const fs::path& tmp) {
    Json summary = {
        {"seed", o.seed},
        {"heldout_seed", o.heldout_seed},
        {"spec", o.spec.to_json()},
        {"train_spec", train_spec.to_json()},
        {"train_parts",
         [&] {
           Json parts = Json::array();
           for (const auto& p : o.train_parts)
             parts.push_back({{"count", p.count}, {"words", {p.words_min, p.words_max}}});
           return parts;
         }()},
        {"heldout_words", o.heldout_words},
        {"heldout_questions", o.heldout_questions},
        {"vocab_size", o.vocab_size},
        {"tokenizer_pieces", o.tokenizer_pieces}};
    std::vector<std::string> sentences;
    int64_t train_docs = 0, train_words = 0;
    {
      std::ofstream train(tmp / "train.jsonl");
      for (size_t p = 0; p < o.train_parts.size(); ++p) {
        const auto& part = o.train_parts[p];
        // Each part its own examples: the first part keeps the plain seed, later ones derive one.
        const uint64_t seed = p == 0 ? o.seed : o.seed * 0x9E3779B97F4A7C15ull + 7919 * p + 1;
        RETAIN_CHECK(seed != o.heldout_seed, "synth: training part ", p,
                     " would reuse the held-out seed; pick another --heldout-seed");
        for (const auto& task : o.train_tasks) {
          for (const auto& ex :
               make_synthetic(task, part.count, part.words_min, seed, train_spec, part.words_max)) {
            std::vector<std::pair<int64_t, int64_t>> spans;
            const std::string doc = synthetic_document(ex, &spans);
            train << Json{{"text", doc}, {"id", ex.id}, {"task", ex.task}, {"answer_spans", spans}}
                         .dump()
                  << "\n";
            if (o.vocab_size > 0) add_sentences(doc, sentences);
            ++train_docs;
            train_words += static_cast<int64_t>(std::count(doc.begin(), doc.end(), ' ')) + 1;
          }
        }
      }
      train.close();
      RETAIN_CHECK(train.good(), (tmp / "train.jsonl").string(), ": write failed");
    }
    int64_t heldout_examples = 0;
    auto heldout_examples_of = [&](const std::string& task) -> int64_t {
      if (o.heldout_questions == 0) return o.heldout_count;
      const int64_t per_example = task == "multi" ? o.spec.multi_questions : 1;
      return (o.heldout_questions + per_example - 1) / per_example;
    };
    if (o.heldout_count > 0 || o.heldout_questions > 0) {
      std::ofstream heldout(tmp / "heldout.jsonl");
      for (const auto& task : o.heldout_tasks)
        for (const auto& ex : make_synthetic(task, heldout_examples_of(task), o.heldout_words,
                                             o.heldout_seed, o.spec)) {
          heldout << synthetic_to_json(ex).dump() << "\n";
          ++heldout_examples;
        }
      heldout.close();
      RETAIN_CHECK(heldout.good(), (tmp / "heldout.jsonl").string(), ": write failed");
    }
    summary["train_documents"] = train_docs;
    summary["train_words_written"] = train_words;
    summary["heldout_examples"] = heldout_examples;
    log_info("synth: ", train_docs, " training documents (", train_words, " words), ",
             heldout_examples, " held-out examples");
    if (o.vocab_size > 0) {
      SentencePieceTrainOptions sp;
      sp.vocab_size = static_cast<int>(o.vocab_size);
      // Keys and values are numbers and short hex strings: whole pieces, not digits, so a tiny
      // model retrieves one token per key. A corpus with fewer pieces than asked still trains.
      sp.split_digits = false;
      sp.hard_vocab_limit = false;
      sp.split_by_number = false;
      sp.user_defined_symbols = {".", ":", "?", "="};
      for (std::string piece : o.tokenizer_pieces) {
        // SentencePiece matches user-defined symbols after escaping spaces as U+2581.
        for (size_t at = 0; (at = piece.find(' ', at)) != std::string::npos;)
          piece.replace(at, 1, "\u2581");
        sp.user_defined_symbols.push_back(piece);
      }
      train_sentencepiece(sentences, sp, tmp / "tokenizer.model");
      log_info("synth: SentencePiece tokenizer trained on ", sentences.size(), " sentences");
    }
    write_json_file_atomic(tmp / "synth.json", summary);
  });
  log_info("synth: wrote ", out.string());
  return 0;
}

}  // namespace retain
