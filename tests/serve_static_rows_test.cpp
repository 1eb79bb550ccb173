// Static decode rows for the serving engine (serve/slot_batch.h): a request that moves into a row
// of the fixed batch keeps, after every step, exactly the entries its own cache keeps decoding
// alone, and its logits match, whichever rows join, leave and are reused around it; the engine's
// requests in rows generate what they generate alone beside eager ones; what cannot share rows
// is refused with the reason.
#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>

#include <map>

#include "eval/cache_factory.h"
#include "eviction_fixtures.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "serve/engine.h"
#include "serve/slot_batch.h"
#include "test_util.h"

namespace retain {
namespace {

using namespace eviction_testing;
using namespace std::chrono_literals;

Decoder fixture_model() {
  return Decoder::load(testing::fixture_dir("hf") / "qwen2_bias_yarn", {});
}

std::vector<int64_t> ramp(int64_t first, int64_t n) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(first + (i * 37) % 300);
  return ids;
}

// The prompt read as the engine (and generate) reads it: all but the last token in chunks counted
// back from it, then the last token alone after the cut. Returns its logits (V).
at::Tensor read_prompt(const Decoder& model, KvCache& cache, const std::vector<int64_t>& prompt,
                       int64_t chunk) {
  const auto body = static_cast<int64_t>(prompt.size()) - 1;
  auto forward = [&](int64_t begin, int64_t len) {
    auto ids =
        at::tensor(std::vector<int64_t>(prompt.begin() + begin, prompt.begin() + begin + len),
                   at::kLong)
            .view({1, len});
    auto positions = at::arange(begin, begin + len, at::kLong).view({1, len});
    return model.forward_hidden(ids, positions, ForwardContext{&cache});
  };
  for (int64_t read = 0; read < body;) {
    const int64_t len = read == 0 && body % chunk != 0 ? body % chunk : chunk;
    forward(read, len);
    read += len;
  }
  cache.begin_generating_step();
  auto hidden = forward(body, 1);
  cache.end_prefill();
  return model.logits(hidden.select(1, 0))[0];
}

// Every (layer, KV head)'s live positions of row `row`.
std::vector<std::vector<int64_t>> kept(const BudgetedKvCache& cache, int64_t row,
                                       const ModelConfig& c) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t l = 0; l < c.num_layers; ++l)
    for (int64_t h = 0; h < c.num_kv_heads; ++h) out.push_back(cache.live_positions(l, row, h));
  return out;
}

// A request decoding alone, eagerly: its greedy tokens, and after each decode step its logits
// and kept positions. `moved` is a copy of its cache right after the prompt (what joins a row).
struct Alone {
  std::vector<int64_t> tokens;  // tokens[s] is read by decode step s
  std::vector<at::Tensor> logits;
  std::vector<std::vector<std::vector<int64_t>>> kept;
  std::unique_ptr<KvCache> moved;
  int64_t prompt = 0;
};

Alone decode_alone(const Decoder& model, const PolicySpec& spec, int64_t budget,
                   const std::vector<int64_t>& prompt, int64_t chunk, int64_t steps,
                   LearnedModules learned) {
  Alone a;
  a.prompt = static_cast<int64_t>(prompt.size());
  auto cache = make_kv_cache(model.config(), spec, budget, a.prompt, chunk, learned);
  a.tokens.push_back(read_prompt(model, *cache, prompt, chunk).argmax().item<int64_t>());
  a.moved = cache->clone();
  auto& budgeted = dynamic_cast<BudgetedKvCache&>(*cache);
  for (int64_t s = 0; s < steps; ++s) {
    auto token = at::full({1, 1}, a.tokens.back(), at::kLong);
    auto position = at::full({1, 1}, a.prompt + s, at::kLong);
    auto logits =
        model.logits(model.forward_hidden(token, position, ForwardContext{cache.get()})).view(-1);
    a.logits.push_back(logits);
    a.kept.push_back(kept(budgeted, 0, model.config()));
    a.tokens.push_back(logits.argmax().item<int64_t>());
  }
  return a;
}

// Three requests move into two rows, teacher-forced with the tokens they pick alone: the first
// leaves at step 5 and the third takes its row at step 6 (a reused row); the second runs beside
// both. Prompts shorter and longer than budget + buffer, so rows evict at different steps. After
// every step each request's logits match its own cache's, and it keeps the same entries.
void expect_rows_follow_alone(const Decoder& model, const std::vector<std::string>& policies,
                              LearnedModules learned, const std::string& mode, double tolerance) {
  c10::InferenceMode guard;
  const ModelConfig& c = model.config();
  const int64_t chunk = 4, budget = 3;
  struct Plan {
    std::vector<int64_t> prompt;
    int64_t join, steps;  // the global step it joins at, how many steps it decodes
  };
  const std::vector<Plan> plans = {{ramp(5, 14), 0, 5}, {ramp(40, 3), 2, 9}, {ramp(90, 23), 6, 6}};
  for (const std::string& text : policies) {
    SCOPED_TRACE(text);
    const PolicySpec spec = parse_policy(text);
    std::vector<Alone> alone;
    for (const Plan& p : plans)
      alone.push_back(decode_alone(model, spec, budget, p.prompt, chunk, p.steps, learned));

    SlotBatch rows(model, SlotPolicy{spec, static_cast<double>(budget), learned}, 2, chunk);
    EXPECT_EQ(rows.mode(), mode);
    std::map<size_t, int64_t> row_of;  // running request -> its row
    std::map<size_t, int64_t> done;    // request -> decode steps taken
    for (int64_t step = 0; step < 12; ++step) {
      for (size_t i = 0; i < plans.size(); ++i)
        if (plans[i].join == step) {
          const int64_t row = rows.join(dynamic_cast<const BudgetedKvCache&>(*alone[i].moved));
          ASSERT_GE(row, 0) << "request " << i << " found no free row at step " << step;
          row_of[i] = row;
        }
      if (row_of.empty()) continue;
      std::vector<int64_t> tokens(2, 0), positions(2, -1);
      for (auto [i, row] : row_of) {
        tokens[row] = alone[i].tokens[done[i]];
        positions[row] = alone[i].prompt + done[i];
      }
      const at::Tensor logits = rows.step(tokens, positions).to(at::kCPU);
      for (auto it = row_of.begin(); it != row_of.end();) {
        const auto [i, row] = *it;
        const int64_t s = done[i]++;
        SCOPED_TRACE("request " + std::to_string(i) + ", its step " + std::to_string(s));
        const at::Tensor want = alone[i].logits[s].to(at::kCPU);
        EXPECT_TRUE(at::allclose(logits[row], want, tolerance, tolerance))
            << (logits[row] - want).abs().max().item<float>();
        EXPECT_EQ(kept(rows.cache(), row, c), alone[i].kept[s]);
        if (done[i] == plans[i].steps) {
          rows.leave(row);
          it = row_of.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (size_t i = 0; i < plans.size(); ++i) EXPECT_EQ(done[i], plans[i].steps) << i;
    EXPECT_EQ(rows.occupied(), 0);
    if (mode == "cuda-graph") {
      EXPECT_GE(rows.graph_captures(), 1);
    }
  }
}

TEST(StaticRows, EachRowKeepsWhatItsOwnCacheKeepsAfterEveryStep) {
  Decoder model = fixture_model();
  auto gates = probe_gates(model.config(), true);
  expect_rows_follow_alone(
      model,
      {"h2o:buffer=2", "snapkv:buffer=1", "tova:buffer=1", "expected_attention:buffer=2",
       "knorm:alloc=adakv,buffer=1", "streaming:buffer=1", "trimkv:buffer=1", "dbtrimkv:buffer=2"},
      gates.get(), "static", 1e-4);
}

// The same rows replayed as CUDA graphs (the budgeted cache's decode kernel inside) against each
// request's own cache decoding eagerly on the same GPU: the batch of rows may pick other cuBLAS
// kernels than a batch of one, hence the looser logits bound; the kept entries are the same.
TEST(StaticRows, GraphRowsKeepWhatTheirOwnCachesKeep_CUDA) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  Decoder model =
      Decoder::load(testing::fixture_dir("hf") / "qwen2_bias_yarn", {at::kFloat, at::kCUDA});
  GateConfig g;
  g.width = 16;
  g.bias_init = 2.0;  // betas spread over (0.5, 1): scores that rank tokens clearly apart
  g.init_std = 0.5;
  GateBank gates(g, model.config(), at::kCUDA, 11);
  expect_rows_follow_alone(model, {"h2o:buffer=2", "snapkv:buffer=1", "dbtrimkv:buffer=2"}, &gates,
                           "cuda-graph", 1e-3);

  // A request whose dbtrimkv head is wider than the rows joins after the step was captured: the
  // rows widen, the step is captured again, and the new row decodes as its own cache does.
  // (The CPU test's probe gates, copied to the GPU: they keep one head wide.)
  c10::InferenceMode guard;
  auto probe = probe_gates(model.config(), true);
  GateBank wide_gates(probe->config(), model.config(), at::kCUDA, 0);
  wide_gates.load(probe->named_parameters(), "the probe gates");
  const PolicySpec spec = parse_policy("dbtrimkv:buffer=0");
  const int64_t budget = 3, chunk = 2;
  Alone narrow = decode_alone(model, spec, budget, ramp(5, 4), chunk, 4, &wide_gates);
  Alone wide = decode_alone(model, spec, budget, ramp(5, 40), chunk, 1, &wide_gates);
  SlotBatch rows(model, SlotPolicy{spec, static_cast<double>(budget), &wide_gates}, 2, chunk);
  const int64_t first = rows.join(dynamic_cast<const BudgetedKvCache&>(*narrow.moved));
  std::vector<int64_t> tokens(2, 0), positions(2, -1);
  for (int64_t s = 0; s < 3; ++s) {  // an eager warm-up step, a capture, a replay
    tokens[first] = narrow.tokens[s];
    positions[first] = narrow.prompt + s;
    rows.step(tokens, positions);
  }
  ASSERT_EQ(rows.graph_captures(), 1);
  const int64_t second = rows.join(dynamic_cast<const BudgetedKvCache&>(*wide.moved));
  ASSERT_EQ(rows.reallocations(), 1) << "the wide request did not widen the rows";
  tokens[first] = narrow.tokens[3];
  positions[first] = narrow.prompt + 3;
  tokens[second] = wide.tokens[0];
  positions[second] = wide.prompt;
  const at::Tensor logits = rows.step(tokens, positions).to(at::kCPU);
  EXPECT_EQ(rows.graph_captures(), 2);
  EXPECT_TRUE(at::allclose(logits[second], wide.logits[0].to(at::kCPU), 1e-3, 1e-3));
  EXPECT_TRUE(at::allclose(logits[first], narrow.logits[3].to(at::kCPU), 1e-3, 1e-3));
  EXPECT_EQ(kept(rows.cache(), second, model.config()), wide.kept[0]);
}

std::vector<int64_t> generate_alone(const Decoder& model, const ServeRequest& r, int64_t chunk) {
  c10::InferenceMode guard;
  SamplingOptions o;
  o.max_new_tokens = r.max_new_tokens;
  o.temperature = r.temperature;
  o.seed = r.seed;
  o.prefill_chunk = chunk;
  o.decode = DecodeMode::kEager;
  auto cache = make_kv_cache(model.config(), r.policy, r.budget,
                             static_cast<int64_t>(r.prompt.size()), chunk, r.learned);
  return generate(model, r.prompt, *cache, o).tokens;
}

ServeRequest request(std::vector<int64_t> prompt, const std::string& policy, double budget,
                     int64_t max_new, double temperature, uint64_t seed, const GateBank* gates) {
  ServeRequest r;
  r.prompt = std::move(prompt);
  r.policy = parse_policy(policy);
  r.budget = budget;
  r.max_new_tokens = max_new;
  r.temperature = temperature;
  r.seed = seed;
  r.learned = gates;
  return r;
}

TEST(StaticRows, EngineRequestsInRowsGenerateWhatTheyGenerateAlone) {
  Decoder model = fixture_model();
  auto gates = probe_gates(model.config(), true);
  const int64_t chunk = 4;
  EngineOptions options;
  options.chunk = chunk;
  options.max_batch = 3;
  options.decode = DecodeMode::kStatic;
  options.slots = SlotPolicy{parse_policy("dbtrimkv:buffer=2"), 3, gates.get()};
  ServeEngine engine(model, options);
  ASSERT_EQ(engine.static_rows(), 3) << engine.static_rows_refused();
  // Four with the server's policy (greedy and sampled; one with a fraction resolving to the rows'
  // budget), one with the same policy at another budget and one with another policy (both
  // eager), joining and leaving mid-generation.
  const std::vector<ServeRequest> requests = {
      request(ramp(5, 14), "dbtrimkv:buffer=2", 3, 10, 0, 0, gates.get()),
      request(ramp(40, 9), "dbtrimkv:buffer=2", 3, 12, 0.8, 7, gates.get()),
      request(ramp(90, 30), "h2o:buffer=2", 4, 9, 0, 0, gates.get()),
      request(ramp(7, 21), "dbtrimkv:buffer=2", 5, 7, 0, 0, gates.get()),
      request(ramp(11, 12), "dbtrimkv:buffer=2", 0.25, 8, 0, 0, gates.get()),
      request(ramp(3, 6), "dbtrimkv:buffer=2", 3, 11, 1.0, 3, gates.get()),
  };
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (size_t i = 0; i < requests.size(); ++i) {
    handles.push_back(engine.submit(requests[i]));
    // Two at once, then each after the previous has a few tokens.
    if (i >= 1) {
      RequestEvent e;
      do e = handles[i - 1]->wait(e.tokens.size(), 5000ms);
      while (!e.finished && e.tokens.size() < 3);
    }
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i) + " " + requests[i].policy.text);
    const RequestEvent end = handles[i]->wait_end();
    EXPECT_EQ(end.finish_reason, "length");
    EXPECT_EQ(end.tokens, generate_alone(model, requests[i], chunk));
  }
  const EngineStats stats = engine.stats();
  EXPECT_EQ(stats.static_rows_joined, 4);
  EXPECT_EQ(stats.static_rows, 3);
  EXPECT_EQ(stats.static_rows_occupied, 0);
  EXPECT_EQ(stats.requests_finished, 6);
}

// dbtrimkv keeps a global budget, so one head may hold far more than budget + buffer + chunk
// entries: a request with such a head widens the rows' buffers as it joins (for every row), which
// a captured step must see (the join counts a reallocation: SlotBatch recaptures).
TEST(StaticRows, AWideDbtrimkvHeadWidensTheRowsAsItJoins) {
  c10::InferenceMode guard;
  Decoder model = fixture_model();
  auto gates = probe_gates(model.config(), true);
  const PolicySpec spec = parse_policy("dbtrimkv:buffer=0");
  const int64_t budget = 3, chunk = 2;
  const std::vector<int64_t> prompt = ramp(5, 40);
  Alone alone = decode_alone(model, spec, budget, prompt, chunk, 1, gates.get());
  const auto& source = dynamic_cast<const BudgetedKvCache&>(*alone.moved);
  int64_t widest = 0;
  for (int64_t l = 0; l < model.config().num_layers; ++l)
    widest = std::max(widest, source.lengths(l).max().item<int64_t>());
  const int64_t capacity = budget + spec.buffer + chunk;
  ASSERT_GT(widest, capacity) << "the fixture's gates no longer keep one head wide";
  SlotBatch rows(model, SlotPolicy{spec, static_cast<double>(budget), gates.get()}, 2, chunk);
  const SlotPolicy slots{spec, static_cast<double>(budget), gates.get()};
  EXPECT_EQ(rows.allocated_bytes(), 2 * SlotBatch::row_bytes(model, slots, chunk));
  const int64_t row = rows.join(source);
  EXPECT_EQ(rows.reallocations(), 1);
  EXPECT_GT(rows.allocated_bytes(), 2 * SlotBatch::row_bytes(model, slots, chunk));
  // The widened row still decodes as the request alone.
  std::vector<int64_t> tokens(2, 0), positions(2, -1);
  tokens[row] = alone.tokens[0];
  positions[row] = alone.prompt;
  const at::Tensor logits = rows.step(tokens, positions);
  EXPECT_TRUE(at::allclose(logits[row], alone.logits[0], 1e-4, 1e-4));
  EXPECT_EQ(kept(rows.cache(), row, model.config()), alone.kept[0]);
}

TEST(StaticRows, WhatCannotShareRowsIsRefusedWithTheReason) {
  c10::InferenceMode guard;
  Decoder model = fixture_model();
  auto slots = [](const std::string& policy, double budget) {
    return SlotPolicy{parse_policy(policy), budget, {}};
  };
  EXPECT_NE(SlotBatch::unsupported(model, slots("full", 0)).find("keeps every entry"),
            std::string::npos);
  EXPECT_NE(SlotBatch::unsupported(model, slots("knorm", 0.2)).find("fraction"), std::string::npos);
  EXPECT_NE(SlotBatch::unsupported(model, slots("random", 4)).find("cannot decode statically"),
            std::string::npos);
  EXPECT_EQ(SlotBatch::unsupported(model, slots("knorm", 4)), "");
  EXPECT_ERROR_CONTAINS(SlotBatch refused(model, slots("full", 0), 2, 4), "keeps every entry");

  // A cache of another policy or budget cannot move into the rows.
  SlotBatch rows(model, slots("knorm:buffer=1", 4), 2, 4);
  auto other = make_kv_cache(model.config(), parse_policy("knorm:buffer=2"), 4, 9, 4, {});
  read_prompt(model, *other, ramp(5, 9), 4);
  EXPECT_ERROR_CONTAINS(rows.join(dynamic_cast<const BudgetedKvCache&>(*other)),
                        "cannot move into rows of policy 'knorm:buffer=1'");
  auto budget = make_kv_cache(model.config(), parse_policy("knorm:buffer=1"), 5, 9, 4, {});
  read_prompt(model, *budget, ramp(5, 9), 4);
  EXPECT_ERROR_CONTAINS(rows.join(dynamic_cast<const BudgetedKvCache&>(*budget)),
                        "budget 5 cannot move into rows of budget 4");
  EXPECT_ERROR_CONTAINS(rows.leave(0), "row 0 is not occupied");
  EXPECT_EQ(rows.occupied(), 0);
  // Every row taken: the next request finds none (and decodes eagerly in the engine).
  auto same = make_kv_cache(model.config(), parse_policy("knorm:buffer=1"), 4, 9, 4, {});
  read_prompt(model, *same, ramp(5, 9), 4);
  const auto& moved = dynamic_cast<const BudgetedKvCache&>(*same);
  EXPECT_EQ(rows.join(moved), 0);
  EXPECT_EQ(rows.join(moved), 1);
  EXPECT_EQ(rows.join(moved), -1);
  EXPECT_EQ(rows.occupied(), 2);
  EXPECT_EQ(rows.reallocations(), 0);

  // The engine: automatic static decode needs CUDA graphs; rows limited to half of --kv-memory.
  EngineOptions options;
  options.chunk = 4;
  options.slots = slots("knorm:buffer=1", 4);
  {
    ServeEngine automatic(model, options);
    EXPECT_EQ(automatic.static_rows(), 0);
    EXPECT_NE(automatic.static_rows_refused().find("CUDA graphs"), std::string::npos);
  }
  options.decode = DecodeMode::kStatic;
  const int64_t row = SlotBatch::row_bytes(model, *options.slots, 4);
  options.kv_memory = 5 * row;
  ServeEngine limited(model, options);
  EXPECT_EQ(limited.static_rows(), 2);
  EXPECT_EQ(limited.static_rows_bytes(), 2 * row);
  // A request must fit beside the rows.
  ServeRequest big = request(ramp(5, 9), "full", 0, 1000, 0, 0, nullptr);
  EXPECT_ERROR_CONTAINS(limited.submit(big), "less the");
}

}  // namespace
}  // namespace retain
