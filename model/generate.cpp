#include "model/generate.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "core/error.h"
#include "model/decode_graph.h"
#include "model/tokenizers/incremental_detokenizer.h"
#include "model/tokenizers/tokenizer.h"
#include "model/vision/multimodal_prompt.h"

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
  auto probs = at::softmax(logits.to(at::kFloat) / options.temperature, -1);
  // Stable, so equal probabilities keep the lower id first, as argmax picks it.
  auto [sorted, order] = probs.sort(/*stable=*/true, /*dim=*/-1, /*descending=*/true);
  int64_t keep = sorted.size(0);
  if (options.top_k > 0) keep = std::min(keep, options.top_k);
  if (options.top_p < 1.0) {
    auto head = sorted.narrow(0, 0, keep);
    head = head / head.sum();
    // The mass before each token (an exclusive cumsum, so it never decreases): a token goes when
    // the tokens before it already reach top_p; the first always stays.
    const auto mass_before =
        at::cat({at::zeros({1}, head.options()), head.cumsum(-1).narrow(0, 0, keep - 1)});
    keep = std::max<int64_t>(1, (mass_before < options.top_p).sum().item<int64_t>());
  }
  const auto kept = sorted.narrow(0, 0, keep).to(at::kCPU);
  const auto ids = order.narrow(0, 0, keep).to(at::kCPU);
  const int64_t pick = at::multinomial(kept, 1, /*replacement=*/false, generator).item<int64_t>();
  return ids[pick].item<int64_t>();
}

namespace {

// Rows left-padded to the longest: ids (B, L) and positions (B, L), padding at position -1.
struct PaddedRows {
  at::Tensor ids, positions;
};

PaddedRows left_pad(const std::vector<std::vector<int64_t>>& rows,
                    const std::vector<int64_t>& starts) {
  const auto b = static_cast<int64_t>(rows.size());
  int64_t longest = 0;
  for (const auto& r : rows) longest = std::max<int64_t>(longest, static_cast<int64_t>(r.size()));
  PaddedRows out{at::zeros({b, longest}, at::kLong), at::full({b, longest}, -1, at::kLong)};
  for (int64_t r = 0; r < b; ++r) {
    const auto n = static_cast<int64_t>(rows[r].size());
    if (n == 0) continue;
    out.ids[r].narrow(0, longest - n, n).copy_(at::tensor(rows[r], at::kLong));
    out.positions[r]
        .narrow(0, longest - n, n)
        .copy_(at::arange(starts[r], starts[r] + n, at::kLong));
  }
  return out;
}

// Columns [0, end) of a padded batch through the model in chunks of `chunk` (0: one forward)
// counted back from `end`: the first chunk holds the remainder. Every row ends at column `end`, so
// each row's chunks are the ones it has alone, whatever the padding. Returns the last hidden
// state of the last chunk (B, T, d), undefined when end is 0.
at::Tensor forward_chunks(const Decoder& model, const PaddedRows& batch, int64_t end,
                          KvCache& cache, int64_t chunk,
                          const BatchMultimodal* multimodal = nullptr) {
  at::Tensor hidden;
  if (end <= 0) return hidden;
  const int64_t step = chunk > 0 ? chunk : end;
  for (int64_t begin = 0; begin < end;) {
    const int64_t len = begin == 0 && end % step != 0 ? end % step : step;
    ForwardContext context{&cache};
    MultimodalInputs inputs;
    if (multimodal != nullptr) {
      inputs = multimodal->columns(begin, len);
      context.multimodal = &inputs;
    }
    hidden = model.forward_hidden(batch.ids.narrow(1, begin, len),
                                  batch.positions.narrow(1, begin, len), context);
    begin += len;
  }
  return hidden;
}

}  // namespace

at::Tensor prefill_batch(const Decoder& model, const std::vector<std::vector<int64_t>>& rows,
                         KvCache& cache, const std::vector<int64_t>& starts, int64_t chunk) {
  RETAIN_CHECK(!rows.empty() && rows.size() == starts.size(),
               "prefill: one start position per row expected");
  const PaddedRows batch = left_pad(rows, starts);
  RETAIN_CHECK(batch.ids.size(1) > 0, "prefill: no tokens");
  // Chunked prefill: an evicting cache cuts back after every chunk, so its peak memory is bounded
  // by budget + chunk rather than by the prompt.
  at::Tensor hidden = forward_chunks(model, batch, batch.ids.size(1), cache, chunk);
  return hidden.select(1, hidden.size(1) - 1);
}

at::Tensor prefill(const Decoder& model, const std::vector<int64_t>& ids, KvCache& cache,
                   int64_t start, int64_t chunk) {
  RETAIN_CHECK(!ids.empty(), "prefill: no tokens");
  return prefill_batch(model, {ids}, cache, {start}, chunk);
}

std::string cut_at_stop(const std::string& text, const std::vector<std::string>& stop_strings) {
  size_t cut = text.size();
  for (const auto& stop : stop_strings)
    if (!stop.empty()) cut = std::min(cut, text.find(stop));
  return text.substr(0, cut);
}

bool is_stop_token(int64_t token, const std::vector<int64_t>& stop_ids) {
  return std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end();
}

std::string reply_text(const Tokenizer& tokenizer, const std::vector<int64_t>& tokens,
                       const std::vector<int64_t>& stop_ids,
                       const std::vector<std::string>& stop_strings, bool skip_special) {
  // Generation ends at a stop id, so only the last token can be one (with ignore_eos the caller
  // passes no stop ids and every token is text).
  const bool ends_in_stop = !tokens.empty() && is_stop_token(tokens.back(), stop_ids);
  const std::vector<int64_t> shown(tokens.begin(), tokens.end() - (ends_in_stop ? 1 : 0));
  return cut_at_stop(tokenizer.decode(shown, skip_special), stop_strings);
}

std::vector<GenerationResult> generate_batch(const Decoder& model,
                                             const std::vector<std::vector<int64_t>>& prompts,
                                             KvCache& cache, const SamplingOptions& options,
                                             const std::vector<RowOptions>& rows) {
  RETAIN_CHECK(!prompts.empty(), "generate: no prompts");
  RETAIN_CHECK(options.max_new_tokens >= 0, "generate: max_new_tokens must be >= 0");
  RETAIN_CHECK(options.top_p > 0 && options.top_p <= 1, "generate: top_p must be in (0, 1], found ",
               options.top_p);
  RETAIN_CHECK(options.top_k >= 0, "generate: top_k must be >= 0 (0: off), found ", options.top_k);
  RETAIN_CHECK(options.stop_strings.empty() || options.detokenize,
               "generate: stop strings need a detokenizer");
  c10::InferenceMode guard;
  using Clock = std::chrono::steady_clock;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(options.seed);
  const auto b = static_cast<int64_t>(prompts.size());
  RETAIN_CHECK(rows.empty() || rows.size() == prompts.size(), "generate: ", rows.size(),
               " row options for ", prompts.size(), " prompts");
  std::vector<RowOptions> row(prompts.size());
  for (size_t r = 0; r < prompts.size(); ++r) {
    RETAIN_CHECK(!prompts[r].empty(), "generate: a prompt is empty");
    if (rows.empty())
      row[r].start_position = options.start_position;
    else
      row[r] = rows[r];
    if (row[r].max_new_tokens < 0) row[r].max_new_tokens = options.max_new_tokens;
    row[r].extra_stop_ids.insert(row[r].extra_stop_ids.end(), options.stop_ids.begin(),
                                 options.stop_ids.end());
  }
  std::vector<GenerationResult> results(static_cast<size_t>(b));
  // Stop strings are looked for in each row's text as it grows, decoded a few tokens at a time.
  std::vector<std::optional<StopStringWatch>> stop_watch(static_cast<size_t>(b));
  if (!options.stop_strings.empty())
    for (auto& w : stop_watch) w.emplace(options.detokenize, options.stop_strings);
  int64_t most_new = 0;
  for (int64_t r = 0; r < b; ++r) {
    results[r].prompt_tokens = static_cast<int64_t>(prompts[r].size());
    results[r].finish_reason = "length";
    most_new = std::max(most_new, row[r].max_new_tokens);
  }
  if (most_new == 0) return results;

  // Left padding: every row's last prompt token is in the last column.
  std::vector<int64_t> starts;
  for (const auto& r : row) starts.push_back(r.start_position);
  const PaddedRows batch = left_pad(prompts, starts);
  const int64_t longest = batch.ids.size(1);
  auto start = Clock::now();
  // Vision-language rows: every row gets a prompt (plain positions where it has no images).
  std::unique_ptr<BatchMultimodal> multimodal;
  if (std::any_of(row.begin(), row.end(), [](const RowOptions& r) { return r.multimodal; })) {
    std::vector<std::shared_ptr<const MultimodalPrompt>> mm;
    for (int64_t r = 0; r < b; ++r) {
      if (row[r].multimodal) {
        RETAIN_CHECK(row[r].multimodal->ids == prompts[r], "generate: row ", r,
                     "'s prompt is not its multimodal prompt's ids");
        mm.push_back(row[r].multimodal);
      } else {
        mm.push_back(std::make_shared<const MultimodalPrompt>(text_only_prompt(prompts[r])));
      }
    }
    multimodal = std::make_unique<BatchMultimodal>(mm, starts, longest, model.device());
  }
  // The prompt but its last token in chunks, then the last token alone: its logits give the first
  // new token, so the cache cuts back to its budget first (begin_generating_step) and that token
  // reads no more than any decoded token does, whatever the chunk size.
  const int64_t body = longest - 1;
  forward_chunks(model, batch, body, cache, options.prefill_chunk, multimodal.get());
  cache.begin_generating_step();
  ForwardContext last_context{&cache};
  MultimodalInputs last_inputs;
  if (multimodal) {
    last_inputs = multimodal->columns(body, 1);
    last_context.multimodal = &last_inputs;
  }
  at::Tensor hidden = model.forward_hidden(batch.ids.narrow(1, body, 1),
                                           batch.positions.narrow(1, body, 1), last_context);
  // A row asked for no new token takes part in no step's choice (as alone, where it generates
  // nothing).
  std::vector<bool> done(static_cast<size_t>(b), false);
  for (int64_t r = 0; r < b; ++r) done[r] = row[r].max_new_tokens == 0;
  std::vector<int64_t> next(static_cast<size_t>(b));
  // Each row's generator: its own when it has a seed, else the batch's.
  std::vector<at::Generator> generators;
  for (int64_t r = 0; r < b; ++r)
    generators.push_back(row[r].seed ? at::make_generator<at::CPUGeneratorImpl>(*row[r].seed)
                                     : generator);
  // One device-to-host transfer per step: the greedy ids of every row at once (a sampled row
  // moves only the tokens its filters keep).
  auto pick_next = [&](const at::Tensor& logits) {  // (B, V)
    if (options.temperature <= 0) {
      auto ids = logits.argmax(-1).to(at::kCPU);
      for (int64_t r = 0; r < b; ++r)
        if (!done[r]) next[r] = ids[r].item<int64_t>();
      return;
    }
    for (int64_t r = 0; r < b; ++r)
      if (!done[r]) next[r] = sample_next_token(logits[r], options, generators[r]);
  };
  pick_next(model.logits(hidden.select(1, hidden.size(1) - 1)));
  // The first token's ids are on the host: the prefill time includes all of its device work.
  auto prefill_end = Clock::now();
  cache.end_prefill();

  // Static decode when asked for, or automatically where CUDA graphs can replay it.
  std::unique_ptr<DecodeGraph> graph;
  bool static_decode = false;
  if (options.decode != DecodeMode::kEager) {
    const bool graphs = DecodeGraph::available(model) && !multimodal;
    cache.expect_decode_steps(most_new - 1);  // the first token came from the prompt's step
    if ((graphs || options.decode == DecodeMode::kStatic) && cache.begin_static_decode()) {
      static_decode = true;
      if (graphs) graph = std::make_unique<DecodeGraph>(model, cache, b);
    }
  }
  const std::string decode_mode = graph ? "cuda-graph" : (static_decode ? "static" : "eager");
  auto decode_step = [&](const at::Tensor& token, const at::Tensor& position) {
    if (graph) return graph->step(token, position);
    ForwardContext context{&cache};
    if (multimodal) context.multimodal = &multimodal->decode_step();
    if (!static_decode)
      return model.logits(model.forward_hidden(token, position, context)).squeeze(1);
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
      const auto& stop_ids = row[r].extra_stop_ids;
      bool stop = std::find(stop_ids.begin(), stop_ids.end(), next[r]) != stop_ids.end();
      if (stop_watch[r] && stop_watch[r]->push(next[r])) stop = true;
      if (stop) res.finish_reason = "stop";
      if (stop || static_cast<int64_t>(res.tokens.size()) >= row[r].max_new_tokens)
        done[r] = true;
      else
        ++running;
    }
    if (running == 0) break;
    // Finished rows still take part in the step (the batch stays rectangular) at position -1, so
    // nothing attends to them.
    auto token = at::zeros({b, 1}, at::kLong);
    auto position = at::full({b, 1}, -1, at::kLong);
    std::vector<bool> running_rows(static_cast<size_t>(b), false);
    for (int64_t r = 0; r < b; ++r) {
      if (done[r]) continue;
      token[r][0] = next[r];
      position[r][0] = row[r].start_position + results[r].prompt_tokens + step;
      running_rows[r] = true;
    }
    // A replayed graph runs every row's kernels: only eager steps may skip finished rows.
    if (!static_decode) cache.set_running_rows(running_rows);
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
