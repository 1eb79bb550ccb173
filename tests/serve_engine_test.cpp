// The serving engine: a request's tokens equal generate() alone whatever runs beside it (joining
// and leaving at different steps, other policies and budgets, sampled rows); admission keeps the
// reserved KV bytes within --kv-memory; cancellation and a failing request leave the others
// running; the OpenAI layer's checks and streamed text.
#include <c10/core/InferenceMode.h>

#include <thread>

#include "eval/cache_factory.h"
#include "eviction_fixtures.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "model/tokenizers/incremental_detokenizer.h"
#include "serve/access.h"
#include "serve/byte_size.h"
#include "serve/engine.h"
#include "serve/openai_api.h"
#include "test_util.h"

namespace retain {
namespace {

using namespace eviction_testing;
using namespace std::chrono_literals;

RequestEvent wait_end(const RequestHandle& h) { return h.wait_end(); }

RequestEvent wait_tokens(const RequestHandle& h, size_t n) {
  RequestEvent e;
  do e = h.wait(e.tokens.size(), 5000ms);
  while (!e.finished && e.tokens.size() < n);
  return e;
}

struct Case {
  std::vector<int64_t> prompt;
  std::string policy;
  double budget;
  int64_t max_new;
  double temperature;
  uint64_t seed;
};

std::vector<int64_t> alone(const Decoder& model, const Case& c, const GateBank* gates,
                           int64_t chunk) {
  c10::InferenceMode guard;
  SamplingOptions o;
  o.max_new_tokens = c.max_new;
  o.temperature = c.temperature;
  o.seed = c.seed;
  o.prefill_chunk = chunk;
  o.decode = DecodeMode::kEager;
  auto cache = make_kv_cache(model.config(), parse_policy(c.policy), c.budget,
                             static_cast<int64_t>(c.prompt.size()), chunk, gates);
  return generate(model, c.prompt, *cache, o).tokens;
}

ServeRequest request_for(const Case& c, const GateBank* gates) {
  ServeRequest r;
  r.prompt = c.prompt;
  r.policy = parse_policy(c.policy);
  r.budget = c.budget;
  r.max_new_tokens = c.max_new;
  r.temperature = c.temperature;
  r.seed = c.seed;
  r.learned = gates;
  return r;
}

std::vector<int64_t> ramp(int64_t first, int64_t n) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(first + (i * 37) % 300);
  return ids;
}

TEST(ServeEngine, EachRequestGeneratesWhatItGeneratesAlone) {
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "qwen2_bias_yarn", {});
  auto gates = probe_gates(model.config(), true);
  const std::vector<Case> cases = {
      {ramp(5, 14), "full", 0, 10, 0, 0},
      {{17, 3}, "h2o:buffer=2", 4, 6, 0, 0},
      {ramp(40, 9), "dbtrimkv:buffer=2", 3, 12, 0.8, 7},
      {ramp(90, 30), "snapkv:buffer=0", 5, 9, 0, 0},
      {ramp(7, 21), "streaming:buffer=1", 0.3, 11, 1.0, 3},
  };
  const int64_t chunk = 4;
  EngineOptions options;
  options.chunk = chunk;
  options.max_batch = 8;
  ServeEngine engine(model, options);
  // Two start at once; the third joins once the first has 3 tokens, the fourth once the second
  // ended, the fifth at once after that: rows join and leave mid-generation.
  auto h0 = engine.submit(request_for(cases[0], gates.get()));
  auto h1 = engine.submit(request_for(cases[1], gates.get()));
  wait_tokens(*h0, 3);
  auto h2 = engine.submit(request_for(cases[2], gates.get()));
  wait_end(*h1);
  auto h3 = engine.submit(request_for(cases[3], gates.get()));
  auto h4 = engine.submit(request_for(cases[4], gates.get()));
  const std::vector<std::shared_ptr<RequestHandle>> handles = {h0, h1, h2, h3, h4};
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].policy);
    const RequestEvent end = wait_end(*handles[i]);
    EXPECT_EQ(end.finish_reason, "length");
    EXPECT_EQ(end.tokens, alone(model, cases[i], gates.get(), chunk));
  }
  const EngineStats stats = engine.stats();
  EXPECT_EQ(stats.requests_finished, 5);
  EXPECT_EQ(stats.generated_tokens, 10 + 6 + 12 + 9 + 11);
  EXPECT_EQ(stats.time_to_first_token.count, 5);
  EXPECT_EQ(stats.running, 0);
}

TEST(ServeEngine, AdmissionKeepsTheReservedBytesWithinTheBound) {
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "qwen2_bias_yarn", {});
  EngineOptions options;
  options.chunk = 4;
  ServeRequest a = request_for({ramp(5, 12), "knorm:buffer=1", 4, 8, 0, 0}, nullptr);
  ServeRequest b = request_for({ramp(50, 10), "full", 0, 8, 0, 0}, nullptr);
  {
    ServeEngine probe(model, options);
    // knorm holds at most budget + buffer + min(chunk, prompt) entries per head; full all tokens.
    const ModelConfig& c = model.config();
    const int64_t per_token = 2 * c.num_layers * c.num_kv_heads * c.head_dim * 4;
    EXPECT_EQ(probe.reservation(a), (4 + 1 + 4) * per_token);
    EXPECT_EQ(probe.reservation(b), (10 + 8) * per_token);
    // Room for either alone, not for both: the second waits for the first to end.
    options.kv_memory = probe.reservation(b) + probe.reservation(a) - 1;
  }
  ServeEngine engine(model, options);
  auto ha = engine.submit(a);
  auto hb = engine.submit(b);
  int64_t most_running = 0;
  while (!(ha->wait(0, 0ms).finished && hb->wait(0, 0ms).finished)) {
    const EngineStats s = engine.stats();
    EXPECT_LE(s.reserved_kv_bytes, options.kv_memory);
    most_running = std::max(most_running, s.running);
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(most_running, 1);
  EXPECT_EQ(wait_end(*ha).tokens.size(), 8u);
  EXPECT_EQ(wait_end(*hb).tokens.size(), 8u);
  // A request that can never fit is refused at once, naming the bound.
  ServeRequest huge = b;
  huge.max_new_tokens = 1000;
  EXPECT_ERROR_CONTAINS(engine.submit(huge), "--kv-memory");
}

TEST(ServeEngine, CancelledAndFailingRequestsLeaveTheOthersRunning) {
  Decoder model = Decoder::load(testing::fixture_dir("hf") / "qwen2_bias_yarn", {});
  EngineOptions options;
  options.chunk = 8;
  ServeEngine engine(model, options);
  const Case keep = {ramp(5, 10), "full", 0, 20, 0, 0};
  auto long_one = engine.submit(request_for({ramp(9, 6), "full", 0, 100000, 0, 0}, nullptr));
  auto kept = engine.submit(request_for(keep, nullptr));
  wait_tokens(*long_one, 2);
  long_one->cancel();
  const RequestEvent cancelled = wait_end(*long_one);
  EXPECT_EQ(cancelled.finish_reason, "cancelled");
  EXPECT_LT(cancelled.tokens.size(), 100000u);
  // A prompt id outside the vocabulary fails that request alone.
  ServeRequest bad = request_for(keep, nullptr);
  bad.prompt.back() = model.config().vocab_size + 5;
  const RequestEvent failed = wait_end(*engine.submit(bad));
  EXPECT_EQ(failed.finish_reason, "error");
  EXPECT_NE(failed.error.find("token ids must lie in"), std::string::npos) << failed.error;
  EXPECT_EQ(wait_end(*kept).tokens, alone(model, keep, nullptr, 8));
  const EngineStats stats = engine.stats();
  EXPECT_EQ(stats.requests_cancelled, 1);
  EXPECT_EQ(stats.requests_failed, 1);
  // Stopping cancels what is left and refuses new requests.
  auto left = engine.submit(request_for({ramp(9, 6), "full", 0, 100000, 0, 0}, nullptr));
  wait_tokens(*left, 1);
  engine.stop(0ms);
  EXPECT_EQ(wait_end(*left).finish_reason, "cancelled");
  EXPECT_ERROR_CONTAINS(engine.submit(request_for(keep, nullptr)), "shutting down");
}

// API keys: --api-key and RETAIN_API_KEY's comma-separated keys together, a Bearer token matched
// whole against each (a prefix, a longer guess, another scheme or an empty key never pass).
TEST(ServeAccess, KeysComeFromTheFlagsAndTheEnvironmentAndMatchWhole) {
  const auto keys = server_api_keys({"alpha-key"}, "beta,gamma-long-key");
  EXPECT_EQ(keys, (std::vector<std::string>{"alpha-key", "beta", "gamma-long-key"}));
  EXPECT_TRUE(server_api_keys({}, nullptr).empty());
  EXPECT_TRUE(server_api_keys({}, "").empty());
  EXPECT_ERROR_CONTAINS(server_api_keys({""}, nullptr), "--api-key must not be empty");
  EXPECT_ERROR_CONTAINS(server_api_keys({}, "a,,b"), "RETAIN_API_KEY holds an empty key");
  for (const char* ok : {"Bearer alpha-key", "Bearer beta", "Bearer gamma-long-key"})
    EXPECT_TRUE(authorized(ok, keys)) << ok;
  for (const char* no : {"", "Bearer ", "Bearer alpha", "Bearer alpha-key2", "Bearer bet",
                         "bearer beta", "Basic beta", "beta", "Bearer  beta", "Bearer gamma"})
    EXPECT_FALSE(authorized(no, keys)) << no;
  EXPECT_FALSE(authorized("Bearer x", {}));
  for (const char* host : {"127.0.0.1", "127.1.2.3", "localhost", "::1"})
    EXPECT_TRUE(is_loopback_host(host)) << host;
  for (const char* host : {"0.0.0.0", "::", "10.0.0.1", "192.168.1.2", "example.org"})
    EXPECT_FALSE(is_loopback_host(host)) << host;
}

TEST(ServeApi, RequestsAreCheckedFieldByField) {
  ModelFlags flags;
  flags.model_dir = std::string(RETAIN_TEST_SOURCE_DIR) + "/../recipes/demo/base";
  EvalModel loaded = load_eval_model(flags, "", true);
  ApiContext context;
  context.loaded = &loaded;
  context.model_name = "base";
  context.context_length = 64;
  context.default_max_tokens = 8;
  context.stop_ids = {2};
  auto status = [&](const std::string& body, bool chat = false) {
    try {
      parse_api_request(body, context, chat);
      return std::make_pair(200, std::string());
    } catch (const ApiError& e) {
      return std::make_pair(e.status, e.param);
    }
  };
  EXPECT_EQ(status(R"({"model":"base","prompt":"hi"})").first, 200);
  EXPECT_EQ(status(R"({"model":"other","prompt":"hi"})"),
            std::make_pair(404, std::string("model")));
  EXPECT_EQ(status("{nope").first, 400);
  EXPECT_EQ(status(R"({"model":"base"})"), std::make_pair(400, std::string("prompt")));
  EXPECT_EQ(status(R"({"model":"base","prompt":"hi","max_tokens":0})").second, "max_tokens");
  EXPECT_EQ(status(R"({"model":"base","prompt":"hi","max_tokens":100})").second, "prompt");
  // Without max_tokens, what the context leaves when the default does not fit.
  context.default_max_tokens = 1000;
  EXPECT_EQ(parse_api_request(R"({"model":"base","prompt":[1,5,6,7]})", context, false)
                .engine.max_new_tokens,
            60);
  context.default_max_tokens = 8;
  EXPECT_EQ(status(R"({"model":"base","prompt":"hi","temperature":3})").second, "temperature");
  EXPECT_EQ(status(R"({"model":"base","prompt":"hi","n":2})").second, "n");
  EXPECT_EQ(status(R"({"model":"base","prompt":"hi","logprobs":1})").second, "logprobs");
  EXPECT_EQ(status(R"({"model":"base","prompt":"hi","stop":[1]})").second, "stop");
  EXPECT_EQ(status(R"({"model":"base","prompt":"hi","policy":"snapkv"})").second, "budget");
  EXPECT_EQ(status(R"({"model":"base","prompt":"hi","policy":"snapk","budget":4})").second,
            "policy");
  EXPECT_EQ(status(R"({"model":"base","prompt":"hi","policy":"trimkv","budget":4})").second,
            "policy");
  EXPECT_EQ(
      status(R"({"model":"base","prompt":"hi","policy":"trimkv:gates=/etc/passwd","budget":4})")
          .second,
      "policy");
  EXPECT_EQ(status(R"({"model":"base","prompt":[1,99999]})").second, "prompt");
  EXPECT_EQ(status(R"({"model":"base","messages":[{"role":"user","content":"hi"}]})", true).second,
            "messages");  // no chat template
  const ApiRequest ok = parse_api_request(
      R"({"model":"base","prompt":[1,5,6],"max_tokens":3,"temperature":0,"stop":"x",
          "policy":"snapkv:window=2","budget":2,"seed":9,"stream":true,
          "stream_options":{"include_usage":true}})",
      context, false);
  EXPECT_EQ(ok.engine.prompt, (std::vector<int64_t>{1, 5, 6}));
  EXPECT_EQ(ok.engine.policy.name(), "snapkv");
  EXPECT_EQ(ok.engine.budget, 2);
  EXPECT_EQ(ok.engine.stop_ids, std::vector<int64_t>{2});
  EXPECT_EQ(ok.engine.stop_strings, std::vector<std::string>{"x"});
  EXPECT_TRUE(ok.stream && ok.include_usage);
  context.request_policies = false;
  EXPECT_EQ(status(R"({"model":"base","prompt":"hi","policy":"full"})").second, "policy");
}

TEST(ServeApi, StreamedTextHoldsBackWhatAStopStringOrACharacterMayStillBecome) {
  ModelFlags flags;
  flags.model_dir = std::string(RETAIN_TEST_SOURCE_DIR) + "/../recipes/demo/base";
  EvalModel loaded = load_eval_model(flags, "", true);
  const Tokenizer& tok = *loaded.tokenizer;
  const std::vector<int64_t> ids = tok.encode("value: 42 END here");
  const std::string full = tok.decode(ids);
  // Up to each prefix: what is sent never has to be taken back, and the end is exact.
  size_t sent = 0;
  std::string streamed;
  IncrementalDetokenizer detokenizer(text_decoder(tok));
  for (size_t n = 1; n <= ids.size(); ++n) {
    detokenizer.push(ids[n - 1]);
    if (n == ids.size()) detokenizer.finish();
    const StreamText t = stream_text(detokenizer.text(), {" END"}, n == ids.size());
    ASSERT_LE(t.stable, t.text.size());
    if (t.stable > sent) {
      streamed += t.text.substr(sent, t.stable - sent);
      sent = t.stable;
    }
    EXPECT_EQ(streamed.find("END"), std::string::npos);
  }
  EXPECT_EQ(streamed, cut_at_stop(full, {" END"}));
  EXPECT_EQ(streamed, "value: 42");
  EXPECT_EQ(parse_bytes("64MiB", "--kv-memory"), 64ll << 20);
  EXPECT_EQ(parse_bytes("2G", "--kv-memory"), 2ll << 30);
  EXPECT_EQ(parse_bytes("1000", "--kv-memory"), 1000);
  EXPECT_ERROR_CONTAINS(parse_bytes("12 parsecs", "--kv-memory"), "--kv-memory");
}

}  // namespace
}  // namespace retain
