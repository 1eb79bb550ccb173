#include "data/synthetic.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include "core/error.h"

namespace retain {

namespace {

const char* const kFillerSubjects[] = {
    "The river",        "A small bird",      "The old map",  "Our team",    "The city council",
    "A quiet engineer", "The morning train", "Every garden", "The library", "A tall tree"};
const char* const kFillerVerbs[] = {"moved slowly past", "looked at", "talked about", "waited near",
                                    "walked along",      "painted",   "described",    "remembered",
                                    "carried",           "counted"};
const char* const kFillerObjects[] = {
    "the bright window", "a wooden bridge", "the long road", "the blue door",  "a quiet field",
    "the tall tower",    "the last page",   "a warm coat",   "the stone wall", "an empty box"};

class Builder {
 public:
  Builder(uint64_t seed, const SyntheticSpec& spec) : rng_(seed), spec_(spec) {}

  std::string filler_sentence() {
    return std::string(pick(kFillerSubjects)) + " " + pick(kFillerVerbs) + " " +
           pick(kFillerObjects) + ".";
  }
  // A key not used before in this example.
  std::string key() {
    const std::string& chars = spec_.key_alphabet;
    for (;;) {
      std::string key;
      for (int64_t i = 0; i < spec_.key_chars; ++i) key.push_back(chars[rng_() % chars.size()]);
      if (used_keys_.insert(key).second) return key;
    }
  }
  std::string number() {
    uint64_t low = 1;
    for (int64_t i = 1; i < spec_.value_digits; ++i) low *= 10;
    if (spec_.value_digits == 1) return std::to_string(rng_() % 10);
    return std::to_string(low + rng_() % (9 * low));
  }
  size_t index(size_t n) { return static_cast<size_t>(rng_() % n); }
  int64_t uniform(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng_() % static_cast<uint64_t>(hi - lo + 1));
  }

  // Fills with distractor sentences until `words` words, then places `facts` at random
  // sentence boundaries (keeping their order).
  std::string context(const std::vector<std::string>& facts, int64_t words) {
    std::vector<std::string> sentences;
    int64_t count = 0;
    for (const auto& f : facts) count += word_count(f);
    while (count < words) {
      sentences.push_back(filler_sentence());
      count += word_count(sentences.back());
    }
    std::vector<size_t> slots;
    for (size_t i = 0; i < facts.size(); ++i) slots.push_back(index(sentences.size() + 1));
    std::sort(slots.begin(), slots.end());
    std::string out;
    size_t next = 0;
    for (size_t s = 0; s <= sentences.size(); ++s) {
      while (next < facts.size() && slots[next] == s) out += facts[next++] + " ";
      if (s < sentences.size()) out += sentences[s] + " ";
    }
    out.pop_back();
    return out;
  }

 private:
  template <size_t N>
  const char* pick(const char* const (&words)[N]) {
    return words[rng_() % N];
  }
  static int64_t word_count(const std::string& s) {
    std::istringstream in(s);
    return std::distance(std::istream_iterator<std::string>(in),
                         std::istream_iterator<std::string>());
  }
  std::mt19937_64 rng_;
  const SyntheticSpec& spec_;
  std::set<std::string> used_keys_;
};

// How many distinct keys one example of `task` needs.
int64_t keys_needed(const std::string& task, const SyntheticSpec& spec) {
  if (task == "kv") return spec.kv_facts;
  if (task == "multi") return std::max(spec.multi_facts, spec.multi_facts_max);
  if (task == "vars") return spec.var_hops + 1 + 3;  // the chain and three distractors
  return 0;
}

}  // namespace

Json SyntheticSpec::to_json() const {
  return {
      {"key_chars", key_chars},     {"value_digits", value_digits},       {"kv_facts", kv_facts},
      {"multi_facts", multi_facts}, {"multi_questions", multi_questions}, {"var_hops", var_hops}};
}

SyntheticSpec SyntheticSpec::from_json(const Json& j, const std::string& where) {
  // Whatever the checks below miss still fails as retain::Error naming the file.
  return with_json_errors(where, [&]() -> SyntheticSpec {
    SyntheticSpec spec;
    RETAIN_CHECK(j.is_object(), where, ": the task spec must be a map, found ", j.dump());
    const Json defaults = spec.to_json();
    for (const auto& [key, value] : j.items()) {
      RETAIN_CHECK(
          defaults.contains(key), where, ": unknown task spec key '", key, "' (expected ",
          [&] {
            std::string names;
            for (const auto& [k, _] : defaults.items()) names += (names.empty() ? "" : ", ") + k;
            return names;
          }(),
          ")");
      RETAIN_CHECK(key == "key_alphabet" ? value.is_string() : value.is_number_integer(), where,
                   ": task spec key '", key, "' needs ",
                   key == "key_alphabet" ? "a string" : "an integer", ", found ", value.dump());
    }
    auto get = [&](const char* key, int64_t fallback) { return j.value(key, fallback); };
    spec.key_chars = get("key_chars", spec.key_chars);
    spec.key_alphabet = j.value("key_alphabet", spec.key_alphabet);
    spec.value_digits = get("value_digits", spec.value_digits);
    spec.kv_facts = get("kv_facts", spec.kv_facts);
    spec.multi_facts = get("multi_facts", spec.multi_facts);
    spec.multi_questions = get("multi_questions", spec.multi_questions);
    spec.multi_facts_max = get("multi_facts_max", spec.multi_facts_max);
    spec.var_hops = get("var_hops", spec.var_hops);
    spec.validate(where);
    return spec;
  });
}

void SyntheticSpec::validate(const std::string& where) const {
  RETAIN_CHECK(key_chars >= 1 && key_chars <= 16, where, ": key_chars must be in 1..16, found ",
               key_chars);
  RETAIN_CHECK(value_digits >= 1 && value_digits <= 9, where,
               ": value_digits must be in 1..9, found ", value_digits);
  RETAIN_CHECK(kv_facts >= 1 && multi_facts >= 1 && multi_questions >= 1 && var_hops >= 1, where,
               ": kv_facts, multi_facts, multi_questions and var_hops must be >= 1");
  std::set<char> distinct(key_alphabet.begin(), key_alphabet.end());
  RETAIN_CHECK(distinct.size() == key_alphabet.size() && key_alphabet.size() >= 2, where,
               ": key_alphabet '", key_alphabet, "' needs at least 2 characters, none repeated");
  for (char c : key_alphabet)
    RETAIN_CHECK(std::isalnum(static_cast<unsigned char>(c)), where, ": key_alphabet '",
                 key_alphabet, "' may only hold letters and digits");
  // Distinct keys must exist: alphabet^key_chars of them (capped to avoid overflow).
  const double key_space = std::pow(static_cast<double>(key_alphabet.size()),
                                    static_cast<double>(std::min<int64_t>(key_chars, 8)));
  for (const auto& task : synthetic_task_names())
    RETAIN_CHECK(static_cast<double>(keys_needed(task, *this)) <= key_space / 2, where, ": task ",
                 task, " needs ", keys_needed(task, *this), " distinct keys but key_chars ",
                 key_chars, " gives only ", key_space, " (at most half of them may be used)");
}

const std::vector<std::string>& synthetic_task_names() {
  static const std::vector<std::string> kNames = {"kv", "vars", "needle", "multi"};
  return kNames;
}

std::vector<SyntheticExample> make_synthetic(const std::string& task, int64_t count,
                                             int64_t context_words, uint64_t seed,
                                             const SyntheticSpec& spec, int64_t context_words_max) {
  bool known = false;
  for (const auto& n : synthetic_task_names()) known = known || n == task;
  RETAIN_CHECK(known, "synthetic: task '", task,
               "' is not known (expected kv, vars, needle or multi)");
  RETAIN_CHECK(count > 0 && context_words > 0, "synthetic: count and length must be positive");
  RETAIN_CHECK(context_words_max == 0 || context_words_max >= context_words,
               "synthetic: the longest context (", context_words_max,
               " words) is shorter than the shortest (", context_words, ")");
  spec.validate("synthetic");
  std::vector<SyntheticExample> out;
  for (int64_t e = 0; e < count; ++e) {
    // One stream per (task, example): adding examples never changes earlier ones.
    uint64_t task_hash = 1469598103934665603ull;  // FNV-1a: the same on every platform
    for (unsigned char c : task) task_hash = (task_hash ^ c) * 1099511628211ull;
    Builder b(seed * 1000003ull + task_hash % 1000 * 7919ull + static_cast<uint64_t>(e), spec);
    const int64_t words = context_words_max > context_words
                              ? b.uniform(context_words, context_words_max)
                              : context_words;
    SyntheticExample ex;
    ex.task = task;
    ex.id = task + "-" + std::to_string(e);
    if (task == "kv" || task == "multi") {
      std::vector<std::pair<std::string, std::string>> facts;
      int64_t n = task == "kv" ? spec.kv_facts : spec.multi_facts;
      if (task == "multi" && spec.multi_facts_max > spec.multi_facts)
        n = b.uniform(spec.multi_facts, spec.multi_facts_max);
      for (int64_t i = 0; i < n; ++i) facts.emplace_back(b.key(), b.number());
      std::vector<std::string> lines;
      for (const auto& [k, v] : facts) lines.push_back("Key " + k + ": value " + v + ".");
      ex.context = b.context(lines, words);
      // Questions ask distinct keys, in a random order; never more questions than facts.
      const int64_t turns = task == "kv" ? 1 : std::min(spec.multi_questions, n);
      std::vector<size_t> order(facts.size());
      std::iota(order.begin(), order.end(), 0);
      for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[b.index(i + 1)]);
      for (int64_t t = 0; t < turns; ++t) {
        const auto& [k, v] = facts[order[static_cast<size_t>(t)]];
        ex.turns.emplace_back("What is the value of key " + k + "?", v);
      }
    } else if (task == "vars") {
      std::vector<std::string> lines;
      std::string value = b.number(), name = b.key();
      lines.push_back("VAR " + name + " = " + value + ".");
      for (int64_t hop = 0; hop < spec.var_hops; ++hop) {
        std::string next = b.key();
        lines.push_back("VAR " + next + " = VAR " + name + ".");
        name = next;
      }
      // Distractor assignments with other values.
      for (int i = 0; i < 3; ++i)
        lines.insert(lines.begin() + static_cast<long>(b.index(lines.size())),
                     "VAR " + b.key() + " = " + b.number() + ".");
      ex.context = b.context(lines, words);
      ex.turns.emplace_back("What is the value of VAR " + name + "?", value);
    } else {
      std::string code = b.number();
      ex.context = b.context({"The secret code is " + code + "."}, words);
      ex.turns.emplace_back("What is the secret code?", code);
    }
    out.push_back(std::move(ex));
  }
  return out;
}

std::string synthetic_prompt(const SyntheticExample& example, size_t turn) {
  RETAIN_CHECK(turn < example.turns.size(), "synthetic: turn out of range");
  std::string prompt = example.context + "\n";
  for (size_t t = 0; t <= turn; ++t) {
    prompt += "\nQuestion: " + example.turns[t].first + "\nAnswer:";
    if (t < turn) prompt += " " + example.turns[t].second;
  }
  return prompt;
}

std::string synthetic_document(const SyntheticExample& example,
                               std::vector<std::pair<int64_t, int64_t>>* answer_spans) {
  RETAIN_CHECK(!example.turns.empty(), "synthetic: example ", example.id, " has no question");
  const std::string doc =
      synthetic_prompt(example, example.turns.size() - 1) + " " + example.turns.back().second;
  if (answer_spans != nullptr) {
    answer_spans->clear();
    // The same layout synthetic_prompt writes: "\nQuestion: Q\nAnswer: A" per turn.
    size_t at = example.context.size() + 1;
    for (const auto& [question, answer] : example.turns) {
      at += std::string("\nQuestion: ").size() + question.size() + std::string("\nAnswer").size();
      const size_t end = std::min(doc.size(), at + 2 + answer.size() + 1);  // ": A\n"
      answer_spans->emplace_back(static_cast<int64_t>(at), static_cast<int64_t>(end));
      at += 2 + answer.size();
    }
  }
  return doc;
}

Json synthetic_to_json(const SyntheticExample& example) {
  Json turns = Json::array();
  for (const auto& [q, a] : example.turns) turns.push_back({{"question", q}, {"answer", a}});
  return {
      {"id", example.id}, {"task", example.task}, {"context", example.context}, {"turns", turns}};
}

SyntheticExample synthetic_from_json(const Json& j, const std::string& where) {
  // Whatever the checks below miss still fails as retain::Error naming the file.
  return with_json_errors(where, [&]() -> SyntheticExample {
    auto text = [&](const Json& obj, const char* key, const std::string& at) {
      RETAIN_CHECK(obj.is_object() && obj.contains(key) && obj[key].is_string(), at,
                   ": expected a string field '", key, "'");
      return obj[key].get<std::string>();
    };
    SyntheticExample ex;
    ex.id = text(j, "id", where);
    ex.task = text(j, "task", where);
    ex.context = text(j, "context", where);
    RETAIN_CHECK(j.contains("turns") && j["turns"].is_array() && !j["turns"].empty(), where,
                 ": expected a non-empty array field 'turns'");
    for (size_t t = 0; t < j["turns"].size(); ++t) {
      const std::string at = str_cat(where, ": turns[", t, "]");
      ex.turns.emplace_back(text(j["turns"][t], "question", at), text(j["turns"][t], "answer", at));
    }
    return ex;
  });
}

}  // namespace retain
