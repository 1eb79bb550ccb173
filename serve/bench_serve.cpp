#include "serve/bench_serve.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <thread>

#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "eval/bench_decode.h"
#include "eval/cache_factory.h"
#include "model/generate.h"
#include "serve/byte_size.h"
#include "serve/engine.h"
#include "serve/latency.h"

namespace retain {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

struct Timing {
  double wall = 0;
  int64_t tokens = 0;
  LatencyWindow latency{1 << 20}, first_token{1 << 20};
  LatencySummary inter_token;
  std::vector<std::vector<int64_t>> answers;

  Json summary(const std::string& mode) const {
    const LatencySummary l = latency.summary(), f = first_token.summary(), i = inter_token;
    return {{"mode", mode},
            {"wall_s", wall},
            {"tokens", tokens},
            {"tokens_per_s", wall > 0 ? static_cast<double>(tokens) / wall : 0},
            {"latency_p50_s", l.p50},
            {"latency_p90_s", l.p90},
            {"ttft_p50_s", f.p50},
            {"ttft_p90_s", f.p90},
            {"inter_token_p50_s", i.p50},
            {"inter_token_p90_s", i.p90}};
  }
};

}  // namespace

int run_bench_serve_command(const BenchServeOptions& o) {
  RETAIN_CHECK(o.requests >= 1 && o.concurrency >= 1 && o.prompt_tokens >= 2 && o.new_tokens >= 1,
               "bench serve: --requests, --concurrency, --new-tokens must be >= 1 and "
               "--prompt-tokens >= 2");
  auto model = load_bench_model(o.model);
  const ModelConfig& c = model->config();
  const PolicySpec policy = parse_policy(o.policy);
  RETAIN_CHECK(policy.gates().empty() && policy.scorer().empty(),
               "bench serve: gates= / scorer= files are not read here (random gates are used)");
  RETAIN_CHECK(!policy.needs_scorer(), "bench serve: learned scorers are not benchmarked here");
  auto gates = make_bench_gates(policy, c, model->device(), o.model.seed + 1);
  const double budget = policy.budgeted() ? o.budget : 0;

  // Seeded requests: lengths from half to 1.5 times the means.
  auto generator = at::make_generator<at::CPUGeneratorImpl>(o.model.seed);
  auto length = [&](int64_t mean) {
    const int64_t low = std::max<int64_t>(1, mean / 2), high = std::max(low, mean + mean / 2);
    return at::randint(low, high + 1, {1}, generator, at::kLong).item<int64_t>();
  };
  std::vector<ServeRequest> requests;
  int64_t prompt_total = 0;
  for (int64_t r = 0; r < o.requests; ++r) {
    ServeRequest q;
    const int64_t n = std::max<int64_t>(2, length(o.prompt_tokens));
    auto ids = at::randint(0, c.vocab_size, {n}, generator, at::kLong);
    q.prompt.assign(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + n);
    q.max_new_tokens = length(o.new_tokens);
    q.policy = policy;
    q.budget = budget;
    q.learned = gates.get();
    prompt_total += n;
    requests.push_back(std::move(q));
  }
  log_info("bench serve: ", o.model.describe(), ", ", o.requests, " requests (", prompt_total,
           " prompt tokens), concurrency ", o.concurrency, ", policy ", o.policy,
           policy.budgeted() ? ", budget " + std::to_string(o.budget) : std::string(), ", chunk ",
           o.chunk, ", max batch ", o.max_batch);

  // Baseline: `retain generate` of each request, one after another.
  Timing alone;
  {
    c10::InferenceMode guard;
    LatencyWindow gaps(1 << 20);  // each request's mean decode step
    const auto start = Clock::now();
    for (const ServeRequest& q : requests) {
      SamplingOptions s;
      s.max_new_tokens = q.max_new_tokens;
      s.prefill_chunk = o.chunk;
      const auto t0 = Clock::now();
      auto cache = make_kv_cache(c, policy, budget, static_cast<int64_t>(q.prompt.size()), o.chunk,
                                 gates.get());
      GenerationResult g = generate(*model, q.prompt, *cache, s);
      alone.latency.add(seconds_since(t0));
      alone.first_token.add(g.prefill_seconds);
      if (g.tokens.size() > 1)
        gaps.add(g.decode_seconds / static_cast<double>(g.tokens.size() - 1));
      alone.tokens += static_cast<int64_t>(g.tokens.size());
      alone.answers.push_back(g.tokens);
    }
    alone.wall = seconds_since(start);
    alone.inter_token = gaps.summary();
  }
  log_info("bench serve: sequential generate done in ", alone.wall, " s");

  // The engine, closed loop.
  Timing served;
  served.answers.resize(requests.size());
  std::string served_decode;
  {
    EngineOptions options;
    options.chunk = o.chunk;
    options.max_batch = o.max_batch;
    options.kv_memory = parse_bytes(o.kv_memory, "--kv-memory");
    options.decode = parse_decode_mode(o.decode);
    options.slots = SlotPolicy{policy, budget, gates.get()};
    ServeEngine engine(*model, options);
    served_decode = engine.static_rows() > 0 ? std::to_string(engine.static_rows()) + " " +
                                                   engine.static_rows_mode() + " rows"
                                             : "eager (" + engine.static_rows_refused() + ")";
    std::atomic<size_t> next{0};
    std::mutex record;
    const auto start = Clock::now();
    auto client = [&] {
      for (size_t i = next++; i < requests.size(); i = next++) {
        const auto t0 = Clock::now();
        auto handle = engine.submit(requests[i]);
        RequestEvent e;
        double first = -1;
        Clock::time_point last = t0;
        do {
          e = handle->wait(e.tokens.size(), std::chrono::milliseconds(1000));
          const auto now = Clock::now();
          if (!e.tokens.empty() && first < 0)
            first = std::chrono::duration<double>(now - t0).count();
          last = now;
        } while (!e.finished);
        RETAIN_CHECK(e.finish_reason != "error", "bench serve: a request failed: ", e.error);
        std::lock_guard<std::mutex> lock(record);
        served.latency.add(std::chrono::duration<double>(last - t0).count());
        served.first_token.add(first);
        served.tokens += static_cast<int64_t>(e.tokens.size());
        served.answers[i] = e.tokens;
      }
    };
    std::vector<std::thread> clients;
    for (int64_t k = 0; k < std::min<int64_t>(o.concurrency, o.requests); ++k)
      clients.emplace_back(client);
    for (auto& t : clients) t.join();
    served.wall = seconds_since(start);
    const EngineStats stats = engine.stats();
    // The engine measures the gaps between a request's tokens itself (a client wakes up for
    // several tokens at once).
    served.inter_token = stats.inter_token;
    engine.stop(std::chrono::milliseconds(0));
  }
  int64_t identical = 0;
  for (size_t i = 0; i < requests.size(); ++i) identical += served.answers[i] == alone.answers[i];

  Json out = {{"model", o.model.describe()},
              {"device", c10::DeviceTypeName(model->device().type())},
              {"policy", o.policy},
              {"budget", budget},
              {"requests", o.requests},
              {"concurrency", o.concurrency},
              {"prompt_tokens", prompt_total},
              {"identical_answers", identical},
              {"served_decode", served_decode},
              {"sequential", alone.summary("sequential generate")},
              {"served", served.summary("serve engine")},
              {"throughput_ratio", alone.wall > 0 ? alone.wall / served.wall : 0}};
  if (o.json) {
    std::cout << out.dump() << std::endl;
    return 0;
  }
  std::cout << std::fixed << std::setprecision(3);
  std::cout << "mode                   tok/s    latency p50/p90 s   TTFT p50/p90 s    "
               "inter-token p50 ms\n";
  for (const char* key : {"sequential", "served"}) {
    const Json& s = out[key];
    std::cout << std::left << std::setw(20) << s["mode"].get<std::string>() << std::right
              << std::setw(9) << std::setprecision(1) << s["tokens_per_s"].get<double>()
              << std::setprecision(3) << std::setw(10) << s["latency_p50_s"].get<double>() << " / "
              << std::setw(6) << s["latency_p90_s"].get<double>() << std::setw(10)
              << s["ttft_p50_s"].get<double>() << " / " << std::setw(6)
              << s["ttft_p90_s"].get<double>() << std::setw(12) << std::setprecision(2)
              << 1000 * s["inter_token_p50_s"].get<double>() << '\n';
  }
  std::cout << std::setprecision(2)
            << "served / sequential throughput: " << out["throughput_ratio"].get<double>()
            << "x; identical greedy answers: " << identical << " / " << o.requests
            << "; engine decode: " << served_decode << std::endl;
  return 0;
}

}  // namespace retain
