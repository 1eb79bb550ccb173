// Seeded synthetic long-context tasks, as text (so any tokenizer works), each a context and one or
// more (question, answer) turns answered by exact match:
//   kv       key-value retrieval: "Key <hex>: value <number>." facts among distractor sentences;
//            "What is the value of key <hex>?"
//   vars     multi-hop variable tracking: "VAR a = 4821." then chains "VAR b = VAR a." ...;
//            "What is the value of VAR <last>?"
//   needle   one "The secret code is <number>." sentence in filler text; "What is the secret code?"
//   multi    several key-value facts, questions about different keys on the same context
// The context grows with filler until it reaches `context_words` words (about 1.3 tokens each
// for English BPE tokenizers). Keys and variable names are distinct within an example.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"

namespace retain {

// The shape of the tasks. The defaults suit real LLMs (6-hex-digit keys, 4-digit values); a tiny
// model trained from scratch (the demo) uses short keys and values its tokenizer keeps whole.
struct SyntheticSpec {
  int64_t key_chars = 6;  // characters of a key or variable name (1..16)
  // The characters keys are made of. Hex by default; the demo uses consonants so that no key is
  // also a number (a value) or an English word its tiny model reads elsewhere.
  std::string key_alphabet = "0123456789abcdef";
  int64_t value_digits = 4;     // digits of a value, no leading zero (1..9)
  int64_t kv_facts = 8;         // facts in a `kv` context
  int64_t multi_facts = 6;      // facts in a `multi` context
  int64_t multi_facts_max = 0;  // > multi_facts: each example draws its count from the range
  int64_t multi_questions =
      3;                 // questions of a `multi` example (distinct keys, at most one per fact)
  int64_t var_hops = 3;  // assignments from the value to the asked variable in `vars`

  Json to_json() const;
  // Reads the keys present in `j` over the defaults; unknown keys and out-of-range values are
  // errors naming `where`.
  static SyntheticSpec from_json(const Json& j, const std::string& where);
  void validate(const std::string& where) const;
};

struct SyntheticExample {
  std::string id;
  std::string task;
  std::string context;
  std::vector<std::pair<std::string, std::string>> turns;  // (question, answer)
};

const std::vector<std::string>& synthetic_task_names();

// `count` examples of `task`, each from its own random stream (adding examples never changes
// earlier ones). With `context_words_max` > `context_words` each example's length is drawn
// uniformly from [context_words, context_words_max].
std::vector<SyntheticExample> make_synthetic(const std::string& task, int64_t count,
                                             int64_t context_words, uint64_t seed,
                                             const SyntheticSpec& spec = {},
                                             int64_t context_words_max = 0);

// The prompt of turn `turn` (earlier turns' questions and answers follow the context).
std::string synthetic_prompt(const SyntheticExample& example, size_t turn);

// The whole example as one training document: the last turn's prompt followed by its answer.
// `answer_spans`, when given, receives one byte range per turn: from the ':' that ends
// "Answer:" (the position that predicts the answer) through the answer and the newline after it.
std::string synthetic_document(const SyntheticExample& example,
                               std::vector<std::pair<int64_t, int64_t>>* answer_spans = nullptr);

// A task file line: {"id", "task", "context", "turns": [{"question", "answer"}]}.
Json synthetic_to_json(const SyntheticExample& example);
SyntheticExample synthetic_from_json(const Json& j, const std::string& where);

}  // namespace retain
