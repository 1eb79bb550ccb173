// `retain synth`: writes a seeded synthetic corpus with the harness's task generator
// (data/synthetic.h), so a tiny model can be trained and evaluated with nothing downloaded:
//   OUT/train.jsonl     {"text", "id", "task", "answer_spans"} training documents (context + every
//                       question and answer); answer_spans are the byte ranges `retain prep
//                       --label-spans answer_spans` turns into answer-only labels
//   OUT/heldout.jsonl   held-out tasks for `retain eval synthetic --data` (another seed; none
//                       with --heldout-count 0)
//   OUT/tokenizer.model a SentencePiece BPE tokenizer trained on the training text (--vocab-size)
//   OUT/synth.json      what was asked and what came out (counts, words, the task spec)
// Everything is written to OUT.tmp and renamed at the end: OUT exists only when complete.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/synthetic.h"

namespace retain {

struct SynthOptions {
  std::string out;
  SyntheticSpec spec;
  uint64_t seed = 0;          // training corpus
  uint64_t heldout_seed = 1;  // held-out tasks; must differ from `seed`
  std::vector<std::string> train_tasks = {"kv", "vars", "needle", "multi"};
  // The training corpus in parts, each `count` documents per task with contexts of
  // [words_min, words_max] words: e.g. many short documents, dense in questions, where a model
  // learns retrieval quickly, and fewer long ones that teach it the demo length.
  struct TrainPart {
    int64_t count = 100;
    int64_t words_min = 600, words_max = 600;
  };
  std::vector<TrainPart> train_parts = {TrainPart{}};
  int64_t train_multi_questions = 0;  // questions of a training `multi` document (0: the spec's)
  // Facts of a training `multi` document, drawn per document (0: the spec's): a range from 1
  // mixes plain copying with real retrieval, which a model from scratch learns far sooner.
  int64_t train_multi_facts_min = 0, train_multi_facts_max = 0;
  std::vector<std::string> heldout_tasks = {"kv", "vars", "needle", "multi"};
  int64_t heldout_count = 20;  // examples per task (0: no held-out file)
  // When > 0, instead of heldout_count: each task gets the fewest examples that ask at least
  // this many questions (a multi example asks spec.multi_questions), so every task's score
  // rests on as many answers.
  int64_t heldout_questions = 0;
  int64_t heldout_words = 600;
  int64_t vocab_size = 0;  // 0: no tokenizer
  // Strings the tokenizer always keeps as one piece (SentencePiece user-defined symbols, the
  // longest match winning), besides ". : ? =". A space is written as a space. E.g. "?\nAnswer:"
  // makes a question's key the token right before the answer: a tiny model then learns retrieval
  // as plain associative recall.
  std::vector<std::string> tokenizer_pieces;
  bool force = false;  // replace an existing OUT
};

// "600" or "200:900" (a uniform range) -> (min, max).
std::pair<int64_t, int64_t> parse_count_range(const std::string& text, const std::string& flag);

int run_synth(const SynthOptions& options);

}  // namespace retain
