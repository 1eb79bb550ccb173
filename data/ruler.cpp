#include "data/ruler.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/json.h"
#include "data/ruler_words.h"

namespace retain {

namespace {

// RULER's texts (scripts/data/synthetic/constants.py and the generators), filled in below.
constexpr const char* kNoise =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
constexpr const char* kVtInstruction =
    "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n";
constexpr const char* kCweInstruction =
    "Below is a numbered list of words. In these words, some appear more often than others. "
    "Memorize the ones that appear most often.\n";
constexpr const char* kCweQuestion =
    "Question: What are the 10 most common words in the above list?";
constexpr const char* kCwePrefix =
    " Answer: The top 10 words that appear most often in the list are:";
constexpr const char* kFweInstruction =
    "Read the following coded text and track the frequency of each coded word. Find the three "
    "most frequently appeared coded words. ";
constexpr const char* kFweQuestion =
    "Question: Do not provide any explanation. Please ignore the dots '....'. What are the three "
    "most frequently appeared words in the above coded text?";
constexpr const char* kFwePrefix =
    " Answer: According to the coded text above, the three most frequently appeared words are:";
constexpr const char* kQaInstruction =
    "Answer the question based on the given documents. Only give me the answer and do not output "
    "any other words.";

// The 40 needle depths of the essay haystack: round(linspace(0, 100, 40)).
std::vector<int64_t> needle_depths() {
  std::vector<int64_t> out;
  for (int i = 0; i < 40; ++i) out.push_back(std::llround(100.0 * i / 39.0));
  return out;
}

// A random stream per (seed, task, length, sample, attempt): a sample never depends on how many
// were drawn before it or on the length search.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  // Uniform in [0, n) (the modulo bias of a 64-bit draw is negligible for these n).
  uint64_t below(uint64_t n) { return engine_() % n; }
  int64_t between(int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo + 1)));
  }
  template <typename T>
  void shuffle(std::vector<T>& items) {  // Fisher-Yates
    for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[below(i)]);
  }
  // k distinct values of [0, n), in draw order.
  std::vector<int64_t> sample(int64_t n, int64_t k) {
    RETAIN_CHECK(k <= n, "ruler: ", k, " distinct draws from ", n, " (internal)");
    std::vector<int64_t> pool(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) pool[i] = i;
    for (int64_t i = 0; i < k; ++i)
      std::swap(pool[i], pool[i + static_cast<int64_t>(below(n - i))]);
    pool.resize(static_cast<size_t>(k));
    return pool;
  }
  std::string letters(int64_t n, char first, int span) {
    std::string out;
    for (int64_t i = 0; i < n; ++i) out += static_cast<char>(first + below(span));
    return out;
  }

 private:
  std::mt19937_64 engine_;
};

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t stream_seed(uint64_t seed, const std::string& task, int64_t length, int64_t sample,
                     int64_t attempt) {
  uint64_t h = mix(seed);
  for (char c : task) h = mix(h ^ static_cast<unsigned char>(c));
  h = mix(h ^ static_cast<uint64_t>(length));
  h = mix(h ^ static_cast<uint64_t>(sample));
  return mix(h ^ static_cast<uint64_t>(attempt));
}

std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  return out;
}

// --- needles in a haystack -----------------------------------------------------------------------

struct NiahConfig {
  std::string haystack;  // noise | essay | needle
  std::string key_type, value_type;
  int64_t keys, values, queries;
};

const std::map<std::string, NiahConfig>& niah_configs() {
  // scripts/synthetic.yaml; niah_multiquery's keys are max(keys, queries) = 4.
  static const std::map<std::string, NiahConfig> configs = {
      {"niah_single_1", {"noise", "words", "numbers", 1, 1, 1}},
      {"niah_single_2", {"essay", "words", "numbers", 1, 1, 1}},
      {"niah_single_3", {"essay", "words", "uuids", 1, 1, 1}},
      {"niah_multikey_1", {"essay", "words", "numbers", 4, 1, 1}},
      {"niah_multikey_2", {"needle", "words", "numbers", 1, 1, 1}},
      {"niah_multikey_3", {"needle", "uuids", "uuids", 1, 1, 1}},
      {"niah_multivalue", {"essay", "words", "numbers", 1, 4, 1}},
      {"niah_multiquery", {"essay", "words", "numbers", 4, 1, 4}}};
  return configs;
}

std::string draw(Rng& rng, const std::string& type) {
  if (type == "numbers") return std::to_string(rng.between(1000000, 9999999));  // 7 digits
  if (type == "uuids") {  // version 4, variant 10xx, lowercase 8-4-4-4-12
    std::string hex;
    const char* digits = "0123456789abcdef";
    for (int i = 0; i < 32; ++i) hex += digits[rng.below(16)];
    hex[12] = '4';
    hex[16] = digits[8 + rng.below(4)];
    return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
           hex.substr(16, 4) + "-" + hex.substr(20);
  }
  const auto& adjectives = ruler_adjectives();
  const auto& nouns = ruler_nouns();
  return adjectives[rng.below(adjectives.size())] + "-" + nouns[rng.below(nouns.size())];
}

// Sentences of the essay text: split after '.', '!' or '?' followed by a space (RULER uses NLTK's
// punkt, which also knows abbreviations).
std::vector<std::string> sentences_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i + 1 < text.size(); ++i)
    if ((text[i] == '.' || text[i] == '!' || text[i] == '?') && text[i + 1] == ' ') {
      out.push_back(text.substr(start, i + 1 - start));
      start = i + 2;
    }
  if (start < text.size()) out.push_back(text.substr(start));
  return out;
}

RulerSample niah(const std::string& task, int64_t units, Rng& rng, const RulerSources& sources) {
  const NiahConfig& c = niah_configs().at(task);
  const std::string haystack =
      c.haystack == "essay" && sources.essay_words.empty() ? "noise" : c.haystack;
  const std::string plural = c.value_type;  // the needles always say "numbers" / "uuids"
  std::vector<std::string> keys, needles;
  std::vector<std::vector<std::string>> values, key_needles;  // [key][value]
  std::set<std::string> used;
  for (int64_t i = 0; i < c.keys; ++i) {
    std::string key;
    do key = draw(rng, c.key_type);
    while (!used.insert(key).second);
    keys.push_back(key);
    values.emplace_back();
    key_needles.emplace_back();
    for (int64_t j = 0; j < c.values; ++j) {
      values.back().push_back(draw(rng, c.value_type));
      needles.push_back("One of the special magic " + plural + " for " + key +
                        " is: " + values.back().back() + ".");
      key_needles.back().push_back(needles.back());
    }
  }
  rng.shuffle(needles);
  const auto n = static_cast<int64_t>(needles.size());
  std::string text;
  if (haystack == "essay") {
    std::vector<std::string> words;
    const auto& pool = sources.essay_words;
    for (int64_t i = 0; i < units; ++i) words.push_back(pool[static_cast<size_t>(i) % pool.size()]);
    const auto sents = sentences_of(join(words, " "));
    const auto depths = needle_depths();
    std::vector<int64_t> at;
    for (int64_t d : rng.sample(static_cast<int64_t>(depths.size()), n))
      at.push_back(static_cast<int64_t>(sents.size()) * depths[d] / 100);
    std::sort(at.begin(), at.end());
    at.insert(at.begin(), 0);
    at.push_back(static_cast<int64_t>(sents.size()));
    std::vector<std::string> pieces;
    for (size_t i = 1; i < at.size(); ++i) {
      pieces.push_back(join({sents.begin() + at[i - 1], sents.begin() + at[i]}, " "));
      if (static_cast<int64_t>(i) - 1 < n) pieces.push_back(needles[i - 1]);
    }
    text = join(pieces, " ");
  } else {
    std::vector<std::string> lines;
    for (int64_t i = 0; i < std::max(units, n); ++i)
      lines.push_back(haystack == "noise"
                          ? std::string(kNoise)
                          : "One of the special magic " + plural + " for " + draw(rng, c.key_type) +
                                " is: " + draw(rng, c.value_type) + ".");
    auto at = rng.sample(static_cast<int64_t>(lines.size()), n);
    std::sort(at.rbegin(), at.rend());  // the first needle at the deepest index
    for (int64_t i = 0; i < n; ++i) lines.insert(lines.begin() + at[i], needles[i]);
    text = join(lines, "\n");
  }
  RulerSample s;
  s.haystack = haystack;
  std::vector<std::string> queries;
  for (int64_t i : rng.sample(c.keys, c.queries)) {
    queries.push_back(keys[i]);
    for (const auto& v : values[i]) s.outputs.push_back(v);
    for (const auto& needle : key_needles[i]) s.needles.push_back(needle);
  }
  std::string query = queries.front();
  if (queries.size() > 1) {
    query.clear();
    for (size_t i = 0; i + 1 < queries.size(); ++i) query += queries[i] + ", ";
    query += "and " + queries.back();
  }
  // One answer: RULER rewrites the template to the singular ('Some' -> 'A', 'are all' -> 'is',
  // 'are' -> 'is', "numbers" -> "number"); the needles stay plural.
  const bool single = c.queries * c.values == 1;
  const std::string type = single ? plural.substr(0, plural.size() - 1) : plural;
  s.context = std::string(single ? "A special magic " + type + " is"
                                 : "Some special magic " + type + " are") +
              " hidden within the following text. Make sure to memorize it. I will quiz you about "
              "the " +
              type + " afterwards.\n" + text + "\n";
  s.question =
      std::string(single ? "What is the special magic " : "What are all the special magic ") +
      type + " for " + query + " mentioned in the provided text?";
  s.answer_prefix = " The special magic " + type + " for " + query +
                    " mentioned in the provided text " + (single ? "is" : "are");
  return s;
}

// --- variable tracking ---------------------------------------------------------------------------

// One chain of hops + 1 distinct variables: "VAR A = 12345", then "VAR B = VAR A " ... (RULER's
// statements end in a space), hidden in `noises` lines of noise.
struct Chain {
  std::vector<std::string> names, statements;
  std::string value, text;
};

Chain variable_chain(Rng& rng, int64_t noises, int64_t name_length, int64_t hops) {
  Chain c;
  std::set<std::string> used;
  while (static_cast<int64_t>(c.names.size()) < hops + 1) {
    std::string name = rng.letters(name_length, 'A', 26);
    if (used.insert(name).second) c.names.push_back(name);
  }
  c.value = std::to_string(rng.between(10000, 99998));
  std::vector<std::string> statements = {"VAR " + c.names[0] + " = " + c.value};
  for (int64_t j = 0; j < hops; ++j)
    statements.push_back("VAR " + c.names[j + 1] + " = VAR " + c.names[j] + " ");
  // The statements in order at random lines among the noise (sorted distinct lines of the
  // result), the rest noise.
  const auto total = noises + static_cast<int64_t>(statements.size());
  auto at = rng.sample(total, static_cast<int64_t>(statements.size()));
  std::sort(at.begin(), at.end());
  std::vector<std::string> lines(static_cast<size_t>(total), kNoise);
  for (size_t j = 0; j < statements.size(); ++j) lines[at[j]] = statements[j];
  c.text = join(lines, "\n");
  c.statements = std::move(statements);
  return c;
}

std::string vt_question(const std::string& value) {
  return "Question: Find all variables that are assigned the value " + value +
         " in the text above.";
}
std::string vt_prefix(const std::string& value, int64_t count) {
  return " Answer: According to the chain(s) of variable assignment in the text above, " +
         std::to_string(count) + " variables are assigned the value " + value + ", they are: ";
}

RulerSample variable_tracking(int64_t noises, int64_t example_noises, Rng& rng) {
  constexpr int64_t kHops = 4;
  // The worked example first (3-letter names, its answer given), as RULER's one-shot example.
  const Chain example = variable_chain(rng, example_noises, 3, kHops);
  const std::string shot = kVtInstruction + example.text + "\n" + vt_question(example.value) +
                           vt_prefix(example.value, kHops + 1) + " " + join(example.names, " ") +
                           "\n";
  const Chain chain = variable_chain(rng, noises, 5, kHops);
  RulerSample s;
  s.haystack = "noise";
  s.context = shot + "\n" + kVtInstruction + chain.text + "\n";
  s.question = vt_question(chain.value);
  s.answer_prefix = vt_prefix(chain.value, kHops + 1);
  s.outputs = chain.names;
  for (const auto& line : chain.statements) s.needles.push_back(line);
  return s;
}

// --- common and frequent words -------------------------------------------------------------------

// The word pool: the adjectives, nouns and verbs (deduplicated, sorted, shuffled once with a fixed
// seed), extended with made-up two- and three-syllable words when a length needs more distinct
// words than that (RULER falls back to a large English word list there).
const std::vector<std::string>& word_pool(size_t needed) {
  static std::vector<std::string> pool = [] {
    std::set<std::string> all;
    for (const auto* list : {&ruler_nouns(), &ruler_adjectives(), &ruler_verbs()})
      all.insert(list->begin(), list->end());
    std::vector<std::string> out(all.begin(), all.end());
    Rng(42).shuffle(out);
    return out;
  }();
  static std::set<std::string> taken(pool.begin(), pool.end());
  static size_t made_up = 0;
  static const char* kSyllables[] = {"ba", "ce", "di", "fo", "gu", "ha", "je", "ki", "lo", "mu",
                                     "na", "pe", "ri", "so", "tu", "va", "we", "xi", "yo", "zu"};
  while (pool.size() < needed) {
    // Made-up word n: its syllables are the base-20 digits of n + 20 (so at least two), skipping
    // any that happens to be a real word of the pool.
    std::string word;
    for (size_t x = made_up++ + 20; x > 0; x /= 20) word = kSyllables[x % 20] + word;
    if (taken.insert(word).second) pool.push_back(word);
  }
  return pool;
}

std::string numbered(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i)
    out += (i ? " " : "") + std::to_string(i + 1) + ". " + words[i];
  return out;
}

// A numbered list where the first 10 of `distinct` words appear `common` times, the rest
// `uncommon` times, shuffled; returns (list, the 10 common words).
std::pair<std::string, std::vector<std::string>> word_list(Rng& rng, int64_t distinct,
                                                           int64_t common, int64_t uncommon) {
  const auto& pool = word_pool(static_cast<size_t>(distinct));
  std::vector<std::string> chosen;
  for (int64_t i : rng.sample(static_cast<int64_t>(pool.size()), distinct))
    chosen.push_back(pool[i]);
  std::vector<std::string> items;
  for (int64_t i = 0; i < distinct; ++i)
    for (int64_t r = 0; r < (i < 10 ? common : uncommon); ++r) items.push_back(chosen[i]);
  rng.shuffle(items);
  return {numbered(items), {chosen.begin(), chosen.begin() + std::min<int64_t>(10, distinct)}};
}

RulerSample common_words(int64_t distinct, int64_t length, Rng& rng) {
  // RULER's repeats: from 4k tokens on, the example 40 words (10 x 10, 30 x 3) and the list 30 / 3;
  // shorter, 20 words (3 / 1) and 6 / 1.
  const bool long_list = length >= 4096;
  const auto [example, example_common] =
      long_list ? word_list(rng, 40, 10, 3) : word_list(rng, 20, 3, 1);
  const auto [list, common] =
      long_list ? word_list(rng, distinct, 30, 3) : word_list(rng, distinct, 6, 1);
  RulerSample s;
  s.context = std::string(kCweInstruction) + example + "\n" + kCweQuestion + kCwePrefix + " " +
              numbered(example_common) + "\n" + kCweInstruction + list + "\n";
  s.question = kCweQuestion;
  s.answer_prefix = kCwePrefix;
  s.outputs = common;
  return s;
}

RulerSample frequent_words(int64_t words, int64_t length, Rng& rng) {
  // A vocabulary of (length - 50) / 50 coded 6-letter words; the word of rank k appears
  // floor(words k^-2 / zeta(2)) times; rank 1 is the "...." noise, ranks 2-4 are the answer.
  const int64_t vocab_size = std::max<int64_t>(5, (length - 50) / 50);
  std::set<std::string> distinct;
  while (static_cast<int64_t>(distinct.size()) < vocab_size)
    distinct.insert(rng.letters(6, 'a', 26));
  std::vector<std::string> vocab(distinct.begin(), distinct.end());
  rng.shuffle(vocab);
  vocab[0] = "...";
  const double zeta2 = M_PI * M_PI / 6;
  std::vector<std::string> items;
  for (int64_t k = 1; k <= vocab_size; ++k) {
    const auto count = static_cast<int64_t>(static_cast<double>(words) / (k * k) / zeta2);
    for (int64_t r = 0; r < count; ++r) items.push_back(vocab[k - 1]);
  }
  rng.shuffle(items);
  RulerSample s;
  s.context = std::string(kFweInstruction) + join(items, " ") + "\n";
  s.question = kFweQuestion;
  s.answer_prefix = kFwePrefix;
  s.outputs = {vocab[1], vocab[2], vocab[3]};
  return s;
}

// --- question answering --------------------------------------------------------------------------

RulerSample question_answering(const RulerQa& qa, const std::vector<std::string>& all_docs,
                               int64_t documents, Rng& rng) {
  std::vector<std::string> docs = qa.gold;
  const auto wanted = std::max<int64_t>(documents, static_cast<int64_t>(docs.size()));
  const auto extra = wanted - static_cast<int64_t>(docs.size());
  if (extra <= static_cast<int64_t>(qa.other.size())) {
    for (int64_t i : rng.sample(static_cast<int64_t>(qa.other.size()), extra))
      docs.push_back(qa.other[i]);
  } else {
    docs.insert(docs.end(), qa.other.begin(), qa.other.end());
    std::set<std::string> taken(docs.begin(), docs.end());
    std::vector<std::string> rest;
    for (const auto& d : all_docs)
      if (!taken.count(d)) rest.push_back(d);
    const int64_t more = std::min<int64_t>(wanted - static_cast<int64_t>(docs.size()),
                                           static_cast<int64_t>(rest.size()));
    for (int64_t i : rng.sample(static_cast<int64_t>(rest.size()), more)) docs.push_back(rest[i]);
  }
  rng.shuffle(docs);
  std::vector<std::string> numbered_docs;
  for (size_t i = 0; i < docs.size(); ++i)
    numbered_docs.push_back("Document " + std::to_string(i + 1) + ":\n" + docs[i]);
  RulerSample s;
  s.context = std::string(kQaInstruction) + "\n\nThe following are given documents.\n\n" +
              join(numbered_docs, "\n\n") + "\n\n";
  s.question = std::string(kQaInstruction) + "\n\nQuestion: " + qa.question;
  s.answer_prefix = " Answer:";
  s.outputs = qa.answers;
  s.needles = qa.gold;
  return s;
}

// --- length fitting ------------------------------------------------------------------------------

// The largest size (haystack units, words or documents) whose prompt plus the answer budget fits
// `length`, by binary search from an estimate as RULER's scripts search (on sample 0's stream);
// `make(size, rng)` builds a sample of that size.
int64_t fit_size(const std::function<RulerSample(int64_t, Rng&)>& make, int64_t incremental,
                 int64_t length, int64_t max_new_tokens, uint64_t seed_of_sample0,
                 const std::function<int64_t(const std::string&)>& count_tokens) {
  auto fits = [&](int64_t size) {
    Rng rng(seed_of_sample0);
    return count_tokens(make(size, rng).prompt()) + max_new_tokens <= length;
  };
  Rng probe(seed_of_sample0);
  const double per_unit = std::max(
      1e-3, static_cast<double>(count_tokens(make(incremental, probe).prompt())) / incremental);
  int64_t lo = incremental,
          hi = std::max<int64_t>(static_cast<int64_t>(static_cast<double>(length) / per_unit * 3),
                                 2 * incremental);
  // A task with a large fixed part (cwe's 300 common items) makes the estimate low: double the
  // bound until it no longer fits.
  while (fits(hi) && hi < (int64_t{1} << 26)) {
    lo = hi;
    hi *= 2;
  }
  int64_t best = incremental;
  while (lo <= hi) {
    const int64_t mid = (lo + hi) / 2;
    if (fits(mid)) {
      best = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return best;
}

}  // namespace

RulerSources read_ruler_sources(const std::string& essays, const std::string& squad,
                                const std::string& hotpotqa) {
  RulerSources s;
  if (!essays.empty()) {
    std::string text = read_text_file(essays);
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '{') {  // RULER's PaulGrahamEssays.json
      const Json j = parse_json(text, essays);
      text = json_get<std::string>(j, "text", essays);
    }
    std::istringstream in(text);
    for (std::string w; in >> w;) s.essay_words.push_back(w);
    RETAIN_CHECK(s.essay_words.size() >= 100, "eval ruler: --essays ", essays, " holds ",
                 s.essay_words.size(), " words; a haystack needs at least 100");
  }
  if (!squad.empty()) {
    // SQuAD v2.0: {"data": [{"paragraphs": [{"context", "qas": [{"question", "answers":
    // [{"text"}], "is_impossible"}]}]}]}; unanswerable questions are left out, as RULER does.
    const Json j = parse_json(read_text_file(squad), squad);
    std::set<std::string> docs;
    with_json_errors(squad, [&] {
      for (const auto& article : j.at("data")) {
        std::vector<std::string> paragraphs;
        for (const auto& p : article.at("paragraphs")) paragraphs.push_back(p.at("context"));
        for (const auto& p : article.at("paragraphs")) {
          const std::string context = p.at("context");
          docs.insert(context);
          for (const auto& q : p.at("qas")) {
            if (q.value("is_impossible", false)) continue;
            RulerQa qa;
            qa.question = q.at("question");
            for (const auto& a : q.at("answers")) qa.answers.push_back(a.at("text"));
            if (qa.answers.empty()) continue;
            qa.gold = {context};
            for (const auto& other : paragraphs)
              if (other != context) qa.other.push_back(other);
            s.squad.push_back(std::move(qa));
          }
        }
      }
      return 0;
    });
    RETAIN_CHECK(!s.squad.empty(), "eval ruler: --squad ", squad, " holds no answerable question");
    s.squad_docs.assign(docs.begin(), docs.end());
  }
  if (!hotpotqa.empty()) {
    // HotpotQA dev distractor: [{"question", "answer", "context": [[title, [sentences]]]}].
    const Json j = parse_json(read_text_file(hotpotqa), hotpotqa);
    std::set<std::string> docs;
    with_json_errors(hotpotqa, [&] {
      for (const auto& q : j) {
        RulerQa qa;
        qa.question = q.at("question");
        qa.answers = {q.at("answer").get<std::string>()};
        for (const auto& paragraph : q.at("context")) {
          std::string doc = paragraph.at(0).get<std::string>() + "\n";
          for (const auto& sentence : paragraph.at(1)) doc += sentence.get<std::string>();
          qa.gold.push_back(doc);
          docs.insert(doc);
        }
        s.hotpotqa.push_back(std::move(qa));
      }
      return 0;
    });
    RETAIN_CHECK(!s.hotpotqa.empty(), "eval ruler: --hotpotqa ", hotpotqa, " holds no question");
    s.hotpotqa_docs.assign(docs.begin(), docs.end());
  }
  return s;
}

const std::vector<std::string>& ruler_task_names() {
  static const std::vector<std::string> names = {"niah_single_1",
                                                 "niah_single_2",
                                                 "niah_single_3",
                                                 "niah_multikey_1",
                                                 "niah_multikey_2",
                                                 "niah_multikey_3",
                                                 "niah_multivalue",
                                                 "niah_multiquery",
                                                 "vt",
                                                 "cwe",
                                                 "fwe",
                                                 "qa_1",
                                                 "qa_2"};
  return names;
}

bool ruler_task_available(const std::string& task, const RulerSources& sources) {
  if (task == "qa_1") return !sources.squad.empty();
  if (task == "qa_2") return !sources.hotpotqa.empty();
  return true;
}

int64_t ruler_max_new_tokens(const std::string& task) {
  if (task.rfind("niah", 0) == 0) return 128;
  if (task == "vt") return 30;
  if (task == "cwe") return 120;
  if (task == "fwe") return 50;
  return 32;  // qa
}

bool ruler_uses_match_part(const std::string& task) { return task.rfind("qa", 0) == 0; }

std::vector<RulerSample> make_ruler(const std::string& task, int64_t length, int64_t count,
                                    uint64_t seed,
                                    const std::function<int64_t(const std::string&)>& count_tokens,
                                    const RulerSources& sources) {
  const auto& names = ruler_task_names();
  RETAIN_CHECK(std::find(names.begin(), names.end(), task) != names.end(),
               "eval ruler: unknown task '", task, "' (expected one of ", join(names, ", "), ")");
  RETAIN_CHECK(
      ruler_task_available(task, sources), "eval ruler: ", task, " needs --",
      task == "qa_1" ? "squad (SQuAD v2.0 dev JSON)" : "hotpotqa (HotpotQA dev distractor JSON)");
  const int64_t max_new = ruler_max_new_tokens(task);
  RETAIN_CHECK(length > max_new + 64, "eval ruler: length ", length, " leaves no room for a ", task,
               " prompt (", max_new, " tokens are its answer budget)");
  // What one size means and the search step, per task (RULER's `incremental`).
  std::function<RulerSample(int64_t, Rng&)> make;
  int64_t incremental = 10;
  const bool essay = niah_configs().count(task) && niah_configs().at(task).haystack == "essay" &&
                     !sources.essay_words.empty();
  if (niah_configs().count(task)) {
    incremental = essay ? 500 : length < 4096 ? 5 : 25;
    make = [&](int64_t units, Rng& rng) { return niah(task, units, rng, sources); };
  } else if (task == "vt") {
    incremental = length < 4096 ? 5 : 10;
    // The worked example's noise: as much as keeps it within 500 tokens, as RULER fits it.
    const auto example_size = [&] {
      int64_t noises = 1;
      const auto shot_tokens = [&](int64_t n) {
        Rng rng(stream_seed(seed, "vt-example", 0, 0, 0));
        return count_tokens(variable_chain(rng, n, 3, 4).text);
      };
      while (noises < 100 && shot_tokens(noises + 1) <= 400) ++noises;
      return noises;
    }();
    make = [example_size](int64_t noises, Rng& rng) {
      return variable_tracking(noises, example_size, rng);
    };
  } else if (task == "cwe") {
    make = [length](int64_t words, Rng& rng) { return common_words(words, length, rng); };
  } else if (task == "fwe") {
    incremental = std::max<int64_t>(10, (length - max_new) / 32);
    make = [length](int64_t words, Rng& rng) { return frequent_words(words, length, rng); };
  } else {
    const bool squad = task == "qa_1";
    const auto& qas = squad ? sources.squad : sources.hotpotqa;
    const auto& docs = squad ? sources.squad_docs : sources.hotpotqa_docs;
    make = [&qas, &docs](int64_t documents, Rng& rng) {
      return question_answering(qas.front(), docs, documents, rng);
    };
  }
  const int64_t size = fit_size(make, incremental, length, max_new,
                                stream_seed(seed, task, length, 0, 0), count_tokens);

  std::vector<RulerSample> out;
  for (int64_t i = 0; i < count; ++i) {
    // qa: sample i asks the i-th question (RULER takes the questions in file order).
    if (task == "qa_1" || task == "qa_2") {
      const auto& qas = task == "qa_1" ? sources.squad : sources.hotpotqa;
      const auto& docs = task == "qa_1" ? sources.squad_docs : sources.hotpotqa_docs;
      const RulerQa& qa = qas[static_cast<size_t>(i) % qas.size()];
      make = [&qa, &docs](int64_t documents, Rng& rng) {
        return question_answering(qa, docs, documents, rng);
      };
    }
    RulerSample s;
    // Too long for this sample's draw: a step smaller, as RULER retries.
    for (int64_t attempt = 0, n = size;; ++attempt, n = std::max<int64_t>(1, n - incremental)) {
      Rng rng(stream_seed(seed, task, length, i, attempt));
      s = make(n, rng);
      const int64_t tokens = count_tokens(s.prompt());
      if (tokens + max_new <= length) break;
      RETAIN_CHECK(n > 1 && attempt < 1000, "eval ruler: no ", task, " sample ", i, " fits in ",
                   length, " tokens: its smallest prompt takes ", tokens, " and the answer ",
                   max_new, "; raise --lengths");
    }
    // The needles in context order (a shuffled haystack puts them anywhere); each must be there.
    std::vector<std::pair<size_t, std::string>> placed;
    for (auto& needle : s.needles) {
      const size_t at = s.context.find(needle);
      RETAIN_CHECK(at != std::string::npos, "ruler: ", task, " sample ", i,
                   ": a needle is not in its context (internal): ", needle.substr(0, 80));
      placed.emplace_back(at, std::move(needle));
    }
    std::sort(placed.begin(), placed.end());
    s.needles.clear();
    for (auto& [at, needle] : placed) s.needles.push_back(std::move(needle));
    s.id = task + "-" + std::to_string(length) + "-" + std::to_string(i);
    s.task = task;
    s.length = length;
    s.max_new_tokens = max_new;
    if (s.haystack.empty()) s.haystack = "-";
    out.push_back(std::move(s));
  }
  return out;
}

std::string ruler_postprocess(const std::string& prediction) {
  auto strip = [](const std::string& s) {
    const size_t b = s.find_first_not_of(" \t\n\r\f\v");
    if (b == std::string::npos) return std::string();
    return s.substr(b, s.find_last_not_of(" \t\n\r\f\v") - b + 1);
  };
  std::string out = strip(prediction);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20) c = '\n';
  return strip(out);
}

double ruler_string_match(const std::string& prediction, const std::vector<std::string>& references,
                          bool all) {
  if (references.empty()) return 0;
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  const std::string pred = lower(prediction);
  int64_t found = 0;
  for (const auto& r : references) found += pred.find(lower(r)) != std::string::npos ? 1 : 0;
  if (!all) return found > 0 ? 1.0 : 0.0;
  return static_cast<double>(found) / static_cast<double>(references.size());
}

}  // namespace retain
