#include "model/generate.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "model/decode_graph.h"

namespace retain {

DecodeMode parse_decode_mode(const std::string& name) {
  if (name == "auto") return DecodeMode::kAuto;
  if (name == "eager") return DecodeMode::kEager;
  if (name == "static") return DecodeMode::kStatic;
  RETAIN_CHECK(false, "unknown decode mode '", name, "' (expected auto, eager or static)");
  return DecodeMode::kAuto;
}

int64_t sample_next_token(const at::Tensor& logits, const SamplingOptions& options,
                          at::Generator& generator) {
  if (options.temperature <= 0) return logits.argmax().item<int64_t>();
  auto probs = at::softmax(logits.to(at::kCPU, at::kFloat) / options.temperature, -1);
  if (options.top_p < 1.0) {
    auto [sorted, order] = probs.sort(/*dim=*/-1, /*descending=*/true);
    // Drop a token when the mass before it already reaches top_p; the first token always stays.
    auto mass_before = sorted.cumsum(-1) - sorted;
    sorted.masked_fill_(mass_before >= options.top_p, 0.0);
    probs = at::zeros_like(probs).scatter_(-1, order, sorted);
  }
  return at::multinomial(probs, 1, /*replacement=*/false, generator).item<int64_t>();
}

at::Tensor prefill(const Decoder& model, const std::vector<int64_t>& ids, KvCache& cache,
                   int64_t start, int64_t chunk) {
  RETAIN_CHECK(!ids.empty(), "prefill: no tokens");
  const auto n = static_cast<int64_t>(ids.size());
  auto tokens = at::tensor(ids, at::kLong).view({1, n});
  auto positions = at::arange(start, start + n, at::kLong).view({1, n});
  // Chunked prefill: an evicting cache cuts back after every chunk, so its peak memory is bounded
  // by budget + chunk rather than by the prompt.
  const int64_t step = chunk > 0 ? chunk : n;
  at::Tensor hidden;
  for (int64_t begin = 0; begin < n; begin += step) {
    const int64_t len = std::min(step, n - begin);
    hidden =
        model.forward_hidden(tokens.narrow(1, begin, len), positions.narrow(1, begin, len), &cache);
  }
  return hidden.select(1, hidden.size(1) - 1);
}

std::string cut_at_stop(const std::string& text, const std::vector<std::string>& stop_strings) {
  size_t cut = text.size();
  for (const auto& stop : stop_strings)
    if (!stop.empty()) cut = std::min(cut, text.find(stop));
  return text.substr(0, cut);
}

std::vector<GenerationResult> generate_batch(const Decoder& model,
                                             const std::vector<std::vector<int64_t>>& prompts,
                                             KvCache& cache, const SamplingOptions& options) {
  RETAIN_CHECK(!prompts.empty(), "generate: no prompts");
  RETAIN_CHECK(options.max_new_tokens >= 0, "generate: max_new_tokens must be >= 0");
  RETAIN_CHECK(options.top_p > 0 && options.top_p <= 1, "generate: top_p must be in (0, 1], found ",
               options.top_p);
  RETAIN_CHECK(options.stop_strings.empty() || options.detokenize,
               "generate: stop strings need a detokenizer");
  c10::InferenceMode guard;
  using Clock = std::chrono::steady_clock;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  const auto b = static_cast<int64_t>(prompts.size());
  int64_t longest = 0;
  for (const auto& p : prompts) {
    RETAIN_CHECK(!p.empty(), "generate: a prompt is empty");
    longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  }
  std::vector<GenerationResult> results(static_cast<size_t>(b));
  for (int64_t r = 0; r < b; ++r) {
    results[r].prompt_tokens = static_cast<int64_t>(prompts[r].size());
    results[r].finish_reason = "length";
  }
  if (options.max_new_tokens == 0) return results;

  // Left padding: every row's last prompt token is in the last column.
  auto ids = at::zeros({b, longest}, at::kLong);
  auto positions = at::full({b, longest}, -1, at::kLong);
  for (int64_t r = 0; r < b; ++r) {
    const auto n = static_cast<int64_t>(prompts[r].size());
    ids[r].narrow(0, longest - n, n).copy_(at::tensor(prompts[r], at::kLong));
    positions[r]
        .narrow(0, longest - n, n)
        .copy_(at::arange(options.start_position, options.start_position + n, at::kLong));
  }
  auto start = Clock::now();
  // The prompt but its last token in chunks, then the last token alone: its logits give the first
  // new token, so the cache cuts back to its budget first (begin_generating_step) and that token
  // reads no more than any decoded token does, whatever the chunk size.
  const int64_t body = longest - 1;
  const int64_t chunk =
      options.prefill_chunk > 0 ? options.prefill_chunk : std::max<int64_t>(body, 1);
  for (int64_t begin = 0; begin < body; begin += chunk) {
    const int64_t len = std::min(chunk, body - begin);
    model.forward_hidden(ids.narrow(1, begin, len), positions.narrow(1, begin, len), &cache);
  }
  cache.begin_generating_step();
  at::Tensor hidden =
      model.forward_hidden(ids.narrow(1, body, 1), positions.narrow(1, body, 1), &cache);
  std::vector<bool> done(static_cast<size_t>(b), false);
  std::vector<int64_t> next(static_cast<size_t>(b));
  // One device-to-host transfer per step: the greedy ids of every row at once (sampling moves
  // the logits to the CPU first).
  auto pick_next = [&](const at::Tensor& logits) {  // (B, V)
    if (options.temperature <= 0) {
      auto ids = logits.argmax(-1).to(at::kCPU);
      for (int64_t r = 0; r < b; ++r)
        if (!done[r]) next[r] = ids[r].item<int64_t>();
      return;
    }
    auto host = logits.to(at::kCPU);
    for (int64_t r = 0; r < b; ++r)
      if (!done[r]) next[r] = sample_next_token(host[r], options, generator);
  };
  pick_next(model.logits(hidden.select(1, hidden.size(1) - 1)));
  // The first token's ids are on the host: the prefill time includes all of its device work.
  auto prefill_end = Clock::now();
  cache.end_prefill();

  // Static decode when asked for, or automatically where CUDA graphs can replay it.
  std::unique_ptr<DecodeGraph> graph;
  bool static_decode = false;
  if (options.decode != DecodeMode::kEager) {
    const bool graphs = DecodeGraph::available(model);
    if ((graphs || options.decode == DecodeMode::kStatic) && cache.begin_static_decode()) {
      static_decode = true;
      if (graphs) graph = std::make_unique<DecodeGraph>(model, cache, b);
    }
  }
  const std::string decode_mode = graph ? "cuda-graph" : (static_decode ? "static" : "eager");
  auto decode_step = [&](const at::Tensor& token, const at::Tensor& position) {
    if (graph) return graph->step(token, position);
    if (!static_decode) return model.forward(token, position, &cache).squeeze(1);
    ForwardContext context{&cache};
    context.ids_checked = true;  // the ids are the model's own picks
    auto logits = model.logits(model.forward_hidden(token, position, context).squeeze(1));
    cache.end_static_step();
    return logits;
  };

  for (int64_t step = 0;; ++step) {
    int64_t running = 0;
    for (int64_t r = 0; r < b; ++r) {
      if (done[r]) continue;
      auto& res = results[r];
      res.tokens.push_back(next[r]);
      bool stop = std::find(options.stop_ids.begin(), options.stop_ids.end(), next[r]) !=
                  options.stop_ids.end();
      if (!stop && !options.stop_strings.empty()) {
        const std::string text = options.detokenize(res.tokens);
        for (const auto& s : options.stop_strings)
          stop = stop || (!s.empty() && text.find(s) != std::string::npos);
      }
      if (stop) res.finish_reason = "stop";
      if (stop || static_cast<int64_t>(res.tokens.size()) >= options.max_new_tokens)
        done[r] = true;
      else
        ++running;
    }
    if (running == 0) break;
    // Finished rows still take part in the step (the batch stays rectangular) at position -1, so
    // nothing attends to them.
    auto token = at::zeros({b, 1}, at::kLong);
    auto position = at::full({b, 1}, -1, at::kLong);
    for (int64_t r = 0; r < b; ++r) {
      if (done[r]) continue;
      token[r][0] = next[r];
      position[r][0] = options.start_position + results[r].prompt_tokens + step;
    }
    pick_next(decode_step(token, position));
  }
  if (static_decode) cache.end_static_decode();
  const double prefill_seconds = std::chrono::duration<double>(prefill_end - start).count();
  const double decode_seconds = std::chrono::duration<double>(Clock::now() - prefill_end).count();
  const KvCache::AttendedEntries attended = cache.attended_entries();
  for (int64_t r = 0; r < b; ++r) {
    auto& res = results[r];
    res.prefill_seconds = prefill_seconds;
    res.decode_seconds = decode_seconds;
    res.decode_mode = decode_mode;
    if (!attended.per_head.empty()) {
      res.max_attended_entries = attended.per_head.at(r);
      res.max_attended_total = attended.total.at(r);
    }
  }
  return results;
}

GenerationResult generate(const Decoder& model, const std::vector<int64_t>& prompt, KvCache& cache,
                          const SamplingOptions& options) {
  return generate_batch(model, {prompt}, cache, options)[0];
}

}  // namespace retain
