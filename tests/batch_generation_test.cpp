// Generation under eviction: a padded batch equals each row alone, static (graph) decode equals
// eager, the last prompt chunk is evicted before the first token is computed, keep mode, stop
// strings.
#include <c10/core/InferenceMode.h>

#include <algorithm>

#include "eval/benchmarks/synthetic.h"
#include "eval/budgeted_cache.h"
#include "eval/cache_factory.h"
#include "eviction_fixtures.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "model/init_model.h"
#include "test_util.h"

namespace retain {
namespace {

using namespace eviction_testing;

TEST(BatchGeneration, PromptsOfDifferentLengthsEqualEachAlone) {
  c10::InferenceMode guard;
  fs::path dir = testing::fixture_dir("hf") / "qwen2_bias_yarn";
  Decoder model = Decoder::load(dir, {});
  const ModelConfig& c = model.config();
  std::vector<std::vector<int64_t>> prompts = {{5, 9, 33, 71, 2, 400, 8, 8, 13, 90, 91, 92, 7, 6},
                                               {17, 3},
                                               {250, 251, 252, 253, 254, 255, 256, 257, 258}};
  std::vector<int64_t> lengths;
  for (const auto& p : prompts) lengths.push_back(static_cast<int64_t>(p.size()));
  auto gates = probe_gates(c, true);
  // Chunks of 4 counted from each prompt's end: a row is cut at the same tokens in the batch as
  // alone. A fractional budget gives each row its own (6, 2 and 4 entries per head here).
  for (const bool static_decode : {false, true})
    for (const std::string policy :
         {"full", "h2o:buffer=2", "dbtrimkv:buffer=2", "trimkv:buffer=1", "streaming:buffer=1",
          "snapkv:buffer=0", "snapkv:pool=avg,buffer=1", "sagekv:buffer=2", "tova:buffer=1",
          "random:buffer=1", "importance:buffer=2", "knorm:buffer=2"}) {
      SCOPED_TRACE(policy + (static_decode ? " static" : " eager"));
      SamplingOptions options;
      options.max_new_tokens = 10;
      options.prefill_chunk = 4;
      options.decode = static_decode ? DecodeMode::kStatic : DecodeMode::kEager;
      std::vector<RowOptions> rows(prompts.size());
      rows[1].max_new_tokens = 4;  // rows end at different steps; the others go on
      rows[2].extra_stop_ids = {prompts[2][0]};
      PolicySpec p = parse_policy(policy);
      auto batch_cache = make_batch_kv_cache(c, p, 0.45, lengths, 4, gates.get());
      auto batch = generate_batch(model, prompts, *batch_cache, options, rows);
      const auto batch_bytes = batch_cache->row_bytes();
      for (size_t i = 0; i < prompts.size(); ++i) {
        SamplingOptions alone_options = options;
        if (rows[i].max_new_tokens >= 0) alone_options.max_new_tokens = rows[i].max_new_tokens;
        alone_options.stop_ids = rows[i].extra_stop_ids;
        auto alone_cache = make_kv_cache(c, p, 0.45, lengths[i], 4, gates.get());
        auto alone = generate(model, prompts[i], *alone_cache, alone_options);
        EXPECT_EQ(batch[i].tokens, alone.tokens) << "row " << i;
        EXPECT_EQ(batch[i].finish_reason, alone.finish_reason);
        EXPECT_EQ(batch[i].max_attended_entries, alone.max_attended_entries);
        EXPECT_EQ(batch[i].max_attended_total, alone.max_attended_total);
        const auto alone_bytes = alone_cache->row_bytes().at(0);
        EXPECT_EQ(batch_bytes[i].live, alone_bytes.live) << "row " << i;
        EXPECT_EQ(batch_bytes[i].peak, alone_bytes.peak) << "row " << i;
        EXPECT_EQ(batch_bytes[i].budget, alone_bytes.budget) << "row " << i;
        if (!p.budgeted()) continue;
        const auto& in_batch = dynamic_cast<const BudgetedKvCache&>(*batch_cache);
        const auto& by_itself = dynamic_cast<const BudgetedKvCache&>(*alone_cache);
        // knorm at layer 0: a key there is the token's projection rotated, so a token the
        // greedy decode repeats has its earlier copy's norm exactly, and rounding (a batched
        // product against one row's, which AVX-512 machines round differently even under
        // portable numerics, e.g. an AMD EPYC Zen 4) decides which copy survives: the kept
        // tokens must agree, the positions of repeated ones may swap.
        std::vector<int64_t> sequence = prompts[i];
        sequence.insert(sequence.end(), batch[i].tokens.begin(), batch[i].tokens.end());
        auto tokens_at = [&](const std::vector<int64_t>& positions) {
          std::vector<int64_t> ids;
          for (int64_t pos : positions) ids.push_back(sequence.at(static_cast<size_t>(pos)));
          std::sort(ids.begin(), ids.end());
          return ids;
        };
        for (int64_t l = 0; l < c.num_layers; ++l)
          for (int64_t h = 0; h < c.num_kv_heads; ++h) {
            const auto got = in_batch.live_positions(l, static_cast<int64_t>(i), h);
            const auto want = by_itself.live_positions(l, 0, h);
            if (p.name() == "knorm" && l == 0 && got != want)
              EXPECT_EQ(tokens_at(got), tokens_at(want))
                  << "layer 0 row " << i << " head " << h << ": positions of other tokens";
            else
              EXPECT_EQ(got, want) << "layer " << l << " row " << i << " head " << h;
          }
      }
    }
}

// Static decode (fixed buffers, eviction decided by host-side counts; what CUDA graphs replay)
// must decode exactly what eager decode does and leave the same cache, for every policy that
// supports it, across several evictions and with a row that stops early.
TEST(BatchGeneration, FullCacheStaticDecodeEqualsEager) {
  // The full cache decodes in static shapes too (sized once for the steps, a device-side slot):
  // the same tokens, bytes and entries read as eager steps, rows ending early included.
  c10::InferenceMode guard;
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "qwen2_bias_yarn", {});
  const std::vector<std::vector<int64_t>> prompts = {
      {5, 9, 33, 71, 2, 400, 8, 8, 13}, {17, 3}, {250, 251, 252, 253, 254}};
  SamplingOptions options;
  options.max_new_tokens = 30;
  options.prefill_chunk = 4;
  options.decode = DecodeMode::kEager;
  FullKvCache probe(model.config().num_layers);
  const auto first = generate_batch(model, prompts, probe, options);
  options.stop_ids = {first[1].tokens.at(6)};  // row 1 stops early; its later steps are padding
  std::vector<std::vector<GenerationResult>> runs;
  std::vector<std::unique_ptr<FullKvCache>> caches;
  for (DecodeMode mode : {DecodeMode::kEager, DecodeMode::kStatic}) {
    options.decode = mode;
    caches.push_back(std::make_unique<FullKvCache>(model.config().num_layers));
    runs.push_back(generate_batch(model, prompts, *caches.back(), options));
  }
  EXPECT_EQ(runs[1][0].decode_mode, "static");
  EXPECT_EQ(runs[0][1].finish_reason, "stop");
  for (size_t r = 0; r < prompts.size(); ++r) {
    EXPECT_EQ(runs[0][r].tokens, runs[1][r].tokens) << r;
    EXPECT_EQ(runs[0][r].max_attended_entries, runs[1][r].max_attended_entries) << r;
  }
  EXPECT_EQ(caches[0]->live_bytes(), caches[1]->live_bytes());
  const auto eager_rows = caches[0]->row_bytes(), static_rows = caches[1]->row_bytes();
  ASSERT_EQ(eager_rows.size(), static_rows.size());
  for (size_t r = 0; r < eager_rows.size(); ++r) EXPECT_EQ(eager_rows[r].live, static_rows[r].live);
  for (int64_t l = 0; l < model.config().num_layers; ++l)
    EXPECT_EQ(caches[0]->length(l), caches[1]->length(l));
  // Without the hint the buffers grow while static (each growth would capture a graph again):
  // the steps still give the eager logits.
  FullKvCache eager(model.config().num_layers), fixed(model.config().num_layers);
  const auto& prompt = prompts[0];
  const auto n = static_cast<int64_t>(prompt.size());
  auto ids = at::tensor(prompt, at::kLong).view({1, n});
  auto positions = at::arange(n, at::kLong).view({1, n});
  auto last = model.logits(model.forward_hidden(ids, positions, &eager)).select(1, n - 1);
  model.forward_hidden(ids, positions, &fixed);
  ASSERT_TRUE(fixed.begin_static_decode());
  int64_t growths = 0;
  for (int64_t step = 0; step < 40; ++step) {
    auto token = last.argmax(-1).view({1, 1});
    auto position = at::full({1, 1}, n + step, at::kLong);
    last = model.logits(model.forward_hidden(token, position, &eager)).select(1, 0);
    ForwardContext context{&fixed};
    context.ids_checked = true;
    auto fixed_logits = model.logits(model.forward_hidden(token, position, context)).select(1, 0);
    growths += fixed.end_static_step();
    EXPECT_LE((fixed_logits - last).abs().max().item<double>(), 1e-5) << step;
  }
  EXPECT_GE(growths, 2);
  fixed.end_static_decode();
  EXPECT_EQ(fixed.length(0), eager.length(0));
}

TEST(BatchGeneration, StaticDecodeEqualsEager) {
  c10::InferenceMode guard;
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "qwen2_bias_yarn", {});
  const ModelConfig& c = model.config();
  std::vector<std::vector<int64_t>> prompts = {
      {5, 9, 33, 71, 2, 400, 8, 8, 13}, {17, 3}, {250, 251, 252, 253, 254}};
  auto gates = probe_gates(c, true);
  for (const std::string policy :
       {"trimkv:buffer=3", "dbtrimkv:buffer=2", "streaming:buffer=1", "h2o:buffer=2,window=2",
        "snapkv:buffer=0,window=2", "sagekv:buffer=2,window=2,sinks=1", "knorm:buffer=4"}) {
    SCOPED_TRACE(policy);
    PolicySpec p = parse_policy(policy);
    SamplingOptions options;
    options.max_new_tokens = 24;
    options.prefill_chunk = 4;
    std::vector<std::unique_ptr<KvCache>> caches;
    std::vector<std::vector<GenerationResult>> runs;
    for (DecodeMode mode : {DecodeMode::kEager, DecodeMode::kStatic}) {
      options.decode = mode;
      caches.push_back(make_kv_cache(c, p, 6, 4, 9, gates.get()));
      if (runs.empty()) {
        runs.push_back(generate_batch(model, prompts, *caches.back(), options));
        // Row 1 stops at its 5th token; its steps at position -1 must change nothing.
        options.stop_ids = {runs[0][1].tokens.at(4)};
        caches.back() = make_kv_cache(c, p, 6, 4, 9, gates.get());
      }
      runs.push_back(generate_batch(model, prompts, *caches.back(), options));
    }
    const auto& eager = runs[1];
    const auto& fixed = runs[2];
    EXPECT_EQ(eager[0].decode_mode, "eager");
    EXPECT_EQ(fixed[0].decode_mode, "static");
    EXPECT_EQ(eager[1].finish_reason, "stop");
    for (size_t r = 0; r < prompts.size(); ++r) EXPECT_EQ(eager[r].tokens, fixed[r].tokens) << r;
    auto& a = dynamic_cast<BudgetedKvCache&>(*caches[0]);
    auto& b = dynamic_cast<BudgetedKvCache&>(*caches[1]);
    EXPECT_EQ(a.peak_bytes(), b.peak_bytes());
    for (int64_t l = 0; l < c.num_layers; ++l)
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t h = 0; h < c.num_kv_heads; ++h)
          EXPECT_EQ(a.live_positions(l, r, h), b.live_positions(l, r, h))
              << "layer " << l << " row " << r << " head " << h;
  }
  // Policies whose steps need the host every time stay eager.
  auto random_cache = make_kv_cache(c, parse_policy("random:seed=1"), 6, 4, 9, nullptr);
  SamplingOptions options;
  options.max_new_tokens = 3;
  options.decode = DecodeMode::kStatic;
  EXPECT_EQ(generate(model, prompts[0], *random_cache, options).decode_mode, "eager");
  // The full cache decodes statically (FullCacheStaticDecodeEqualsEager checks its steps).
  FullKvCache full(c.num_layers);
  EXPECT_EQ(generate(model, prompts[0], full, options).decode_mode, "static");
}

// A needle in the prompt's last chunk: before the fix, the last chunk's queries (the last one
// gives the first new token) read the whole chunk on top of the budget. Now streaming at a budget
// that excludes the needle leaves the last token the sink and the recent window only.
TEST(BatchGeneration, TheLastChunkIsEvictedBeforeTheFirstTokenIsComputed) {
  c10::InferenceMode guard;
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "llama_gqa4_llama3", {});
  std::vector<int64_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(3 + (i * 37) % 500);
  PolicySpec policy = parse_policy("streaming:sinks=1,buffer=4");
  BudgetedKvCache cache(model.config(), policy, 4, 16);
  SamplingOptions options;
  options.max_new_tokens = 1;
  options.prefill_chunk = 16;  // chunks 0-15, 16-31, 32-38, then token 39 alone
  auto r = generate(model, prompt, cache, options);
  EXPECT_EQ(r.max_attended_entries, 5);  // budget 4 + the token itself
  for (int64_t l = 0; l < model.config().num_layers; ++l)
    for (int64_t h = 0; h < model.config().num_kv_heads; ++h)
      EXPECT_EQ(cache.live_positions(l, 0, h), (std::vector<int64_t>{0, 36, 37, 38, 39}));
  // The full cache records everything it read: the prompt and every token decoded but the last.
  FullKvCache full(model.config().num_layers);
  options.max_new_tokens = 3;
  auto f = generate(model, prompt, full, options);
  EXPECT_EQ(f.max_attended_entries, 42);
  EXPECT_EQ(f.max_attended_total, 42 * model.config().num_layers * model.config().num_kv_heads);
}

// Streaming ranks by position alone, so what it keeps cannot depend on the chunk size (the other
// policies rank by values that depend on what earlier chunks read, see "The bound" in docs/evaluation.md).
TEST(BatchGeneration, StreamingKeepsTheSameEntriesWhateverTheChunk) {
  c10::InferenceMode guard;
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "llama_gqa4_llama3", {});
  std::vector<int64_t> prompt;
  for (int i = 0; i < 45; ++i) prompt.push_back(3 + (i * 37) % 500);
  std::vector<std::vector<int64_t>> first;
  for (int64_t chunk : {1, 7, 64, 0}) {
    BudgetedKvCache cache(model.config(), parse_policy("streaming:sinks=2,buffer=3"), 6,
                          chunk > 0 ? chunk : 64);
    SamplingOptions options;
    options.max_new_tokens = 1;
    options.prefill_chunk = chunk;
    generate(model, prompt, cache, options);
    std::vector<std::vector<int64_t>> kept;
    for (int64_t l = 0; l < model.config().num_layers; ++l)
      for (int64_t h = 0; h < model.config().num_kv_heads; ++h)
        kept.push_back(cache.live_positions(l, 0, h));
    EXPECT_EQ(kept.front(), (std::vector<int64_t>{0, 1, 40, 41, 42, 43, 44})) << chunk;
    if (first.empty()) first = kept;
    EXPECT_EQ(kept, first) << "chunk " << chunk;
  }
}

// --question-mode keep (kvpress's semantics): the context alone is compressed to the budget once,
// then the question and every generated token stay on top, never evicted.
TEST(BatchGeneration, KeepModeCompressesTheContextOnceAndKeepsTheQuestion) {
  c10::InferenceMode guard;
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "llama_gqa4_llama3", {});
  const ModelConfig& c = model.config();
  auto gates = probe_gates(c, true);
  std::vector<int64_t> context, question = {7, 8, 9, 10, 11, 12};
  for (int i = 0; i < 40; ++i) context.push_back(3 + (i * 37) % 500);
  for (const std::string spec : {"snapkv:window=4,buffer=0", "streaming:buffer=0", "dbtrimkv"}) {
    SCOPED_TRACE(spec);
    PolicySpec policy = parse_policy(spec);
    BudgetedKvCache cache(c, policy, 8, 16, gates.get());
    prefill(model, context, cache, 0, 16);
    cache.compress_context();
    int64_t total = 0;
    std::vector<std::vector<int64_t>> kept;
    for (int64_t l = 0; l < c.num_layers; ++l)
      for (int64_t h = 0; h < c.num_kv_heads; ++h) {
        kept.push_back(cache.live_positions(l, 0, h));
        total += static_cast<int64_t>(kept.back().size());
        if (!policy.global()) {
          EXPECT_EQ(kept.back().size(), 8u);
        }
      }
    EXPECT_EQ(total, c.num_layers * c.num_kv_heads * 8);
    SamplingOptions options;
    options.max_new_tokens = 5;
    options.prefill_chunk = 4;
    options.start_position = 40;
    auto r = generate(model, question, cache, options);
    ASSERT_EQ(r.tokens.size(), 5u);
    // The question (40-45) and the decoded tokens but the last (46-49) on top of the context.
    size_t i = 0;
    for (int64_t l = 0; l < c.num_layers; ++l)
      for (int64_t h = 0; h < c.num_kv_heads; ++h, ++i) {
        auto want = kept[i];
        for (int64_t p = 40; p < 50; ++p) want.push_back(p);
        EXPECT_EQ(cache.live_positions(l, 0, h), want) << "layer " << l << " head " << h;
      }
    EXPECT_EQ(r.max_attended_total, c.num_layers * c.num_kv_heads * (8 + 10));
    if (!policy.global()) {
      EXPECT_EQ(r.max_attended_entries, 8 + 10);
    }
  }
}

TEST(BatchGeneration, StopStringsEndGeneration) {
  c10::InferenceMode guard;
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "llama_tied_mha", {});
  SamplingOptions options;
  options.max_new_tokens = 20;
  FullKvCache cache(model.config().num_layers);
  auto free_run = generate(model, {3, 4, 5}, cache, options);
  ASSERT_EQ(free_run.tokens.size(), 20u);
  // Stop once the "text" (ids joined) contains the third generated id.
  options.detokenize.decode = [](const std::vector<int64_t>& ids) {
    std::string s;
    for (auto id : ids) s += "<" + std::to_string(id) + ">";
    return s;
  };
  options.stop_strings = {"<" + std::to_string(free_run.tokens[2]) + ">"};
  FullKvCache again(model.config().num_layers);
  auto stopped = generate(model, {3, 4, 5}, again, options);
  EXPECT_EQ(stopped.finish_reason, "stop");
  EXPECT_LE(stopped.tokens.size(), 3u);
  EXPECT_EQ(cut_at_stop("answer\nmore", {"\n", "Question:"}), "answer");
  EXPECT_EQ(cut_at_stop("no stop", {"\n"}), "no stop");
}

}  // namespace
}  // namespace retain
