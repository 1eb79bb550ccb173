#include "eval/commands.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <iostream>
#include <sstream>

#include "checkpoints/gate_file.h"
#include "core/device.h"
#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "eval/cache_factory.h"
#include "eval/perplexity.h"
#include "eval/plot.h"
#include "eval/scores.h"
#include "eval/sweep.h"
#include "model/chat_template.h"
#include "model/decoder.h"
#include "model/generate.h"
#include "model/tokenizer.h"

namespace retain {

namespace {

// The prompt's ids: through the chat template when asked (or when the model has one and
// --no-chat is absent), else BOS + text.
std::vector<int64_t> prompt_ids(const std::string& model_dir, const Tokenizer& tokenizer,
                                const std::string& text, const ChatFlags& flags) {
  RETAIN_CHECK(!(flags.chat && flags.no_chat), "--chat and --no-chat exclude each other");
  bool has_template = has_chat_template(model_dir);
  bool use_chat = flags.chat || (!flags.no_chat && (has_template || !flags.chat_template.empty()));
  if (!use_chat) {
    RETAIN_CHECK(!flags.system, "--system needs the chat template (drop --no-chat)");
    return tokenizer.encode_prompt(text);
  }
  ChatTemplate tmpl = load_chat_template(model_dir, flags.chat_template);
  std::vector<ChatMessage> messages;
  if (flags.system) messages.push_back({"system", *flags.system});
  messages.push_back({"user", text});
  ChatOptions options;
  options.enable_thinking = !flags.no_thinking;
  std::string rendered = tmpl.render(messages, options);
  log_info("chat template ", chat_format_name(tmpl.format), " applied");
  // The template writes BOS itself where the family has one.
  return tokenizer.encode(rendered);
}

}  // namespace

std::vector<int64_t> parse_id_list(const std::string& text, const std::string& flag) {
  std::vector<int64_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto first = item.find_first_not_of(" \t");
    auto last = item.find_last_not_of(" \t");
    RETAIN_CHECK(first != std::string::npos, flag, ": empty item in '", text, "'");
    item = item.substr(first, last - first + 1);
    size_t used = 0;
    int64_t id = -1;
    try {
      id = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    RETAIN_CHECK(used == item.size() && id >= 0, flag, ": item ", ids.size() + 1, ", '", item,
                 "' is not a non-negative integer; expected comma-separated ids like 1,15043,3186");
    ids.push_back(id);
  }
  RETAIN_CHECK(!ids.empty(), flag, ": no ids given");
  return ids;
}

int run_generate_command(const GenerateCommandOptions& o) {
  RETAIN_CHECK(
      int(o.prompt.has_value()) + int(o.prompt_ids.has_value()) + int(o.prompts_file.has_value()) ==
          1,
      "generate: give exactly one of --prompt, --prompt-ids or --prompts-file");
  const bool text = o.prompt.has_value() || o.prompts_file.has_value();
  RETAIN_CHECK(o.stops.empty() || text, "generate: --stop needs text prompts (a tokenizer)");
  EvalModel m = load_eval_model(o.model, o.gates, /*with_tokenizer=*/text, {o.policy});
  const Decoder& model = *m.model;
  const Tokenizer* tokenizer = m.tokenizer.get();
  std::vector<std::vector<int64_t>> prompts;
  if (o.prompt) {
    prompts.push_back(prompt_ids(o.model.model_dir, *tokenizer, *o.prompt, o.chat));
  } else if (o.prompts_file) {
    std::istringstream in(read_text_file(*o.prompts_file));
    std::string line;
    while (std::getline(in, line))
      if (!line.empty()) prompts.push_back(prompt_ids(o.model.model_dir, *tokenizer, line, o.chat));
    RETAIN_CHECK(!prompts.empty(), *o.prompts_file, ": no prompts (one per line)");
  } else {
    prompts.push_back(parse_id_list(*o.prompt_ids, "--prompt-ids"));
  }
  int64_t longest = 0;
  for (const auto& p : prompts) {
    longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
    for (int64_t id : p)
      RETAIN_CHECK(id < model.config().vocab_size, "generate: prompt id ", id,
                   " is outside the vocabulary (", model.config().vocab_size, " ids)");
  }

  SamplingOptions sampling;
  sampling.max_new_tokens = o.max_new_tokens;
  sampling.temperature = o.temperature;
  sampling.top_p = o.top_p;
  sampling.seed = o.seed;
  // config.json's EOS ids, plus the tokenizer's (chat models end turns with it, e.g. <|eot_id|>).
  if (!o.ignore_eos) sampling.stop_ids = stop_ids(model.config(), tokenizer);
  sampling.stop_strings = o.stops;
  if (tokenizer)
    sampling.detokenize = [tokenizer](const std::vector<int64_t>& ids) {
      return tokenizer->decode(ids, true);
    };
  PolicySpec policy = parse_policy(o.policy);
  RETAIN_CHECK(!policy.budgeted() || o.budget > 0, "generate: --policy ", policy.name(),
               " needs --budget");
  const int64_t chunk = o.chunk > 0 ? o.chunk : longest;
  // A fractional budget is relative to the longest prompt of the batch.
  auto cache = make_kv_cache(model.config(), policy, o.budget, longest, chunk, m.gates_for(policy));
  sampling.prefill_chunk = chunk;
  auto results = generate_batch(model, prompts, *cache, sampling);
  const int64_t peak = cache->peak_bytes();

  for (size_t i = 0; i < results.size(); ++i) {
    const GenerationResult& r = results[i];
    const double decode_rate = r.tokens.size() > 1 && r.decode_seconds > 0
                                   ? static_cast<double>(r.tokens.size() - 1) / r.decode_seconds
                                   : 0.0;
    const double prefill_rate =
        r.prefill_seconds > 0 ? static_cast<double>(prompts[i].size()) / r.prefill_seconds : 0.0;
    std::string output;
    if (tokenizer) output = cut_at_stop(tokenizer->decode(r.tokens), o.stops);
    if (o.json) {
      Json out = {{"prompt_ids", prompts[i]},
                  {"ids", r.tokens},
                  {"finish_reason", r.finish_reason},
                  {"prefill_tokens_per_s", prefill_rate},
                  {"decode_tokens_per_s", decode_rate},
                  {"policy", o.policy},
                  {"live_kv_bytes", cache->live_bytes()},
                  {"peak_kv_bytes", peak}};
      if (tokenizer) out["text"] = output;
      std::cout << out.dump() << std::endl;
    } else {
      if (tokenizer) {
        std::cout << output << std::endl;
      } else {
        for (size_t k = 0; k < r.tokens.size(); ++k) std::cout << (k ? "," : "") << r.tokens[k];
        std::cout << std::endl;
      }
      log_info("prompt ", prompts[i].size(), " tokens at ", prefill_rate, " tok/s; generated ",
               r.tokens.size(), " tokens at ", decode_rate, " tok/s (", r.finish_reason, "); KV ",
               o.policy, ": live ", cache->live_bytes(), " bytes, peak ", peak);
    }
  }
  return 0;
}

int run_tokenize_command(const TokenizeCommandOptions& o) {
  const int inputs = o.text.has_value() + o.file.has_value() + o.decode.has_value();
  RETAIN_CHECK(inputs == 1, "tokenize: give exactly one of --text, --file or --decode");
  RETAIN_CHECK(!o.skip_special || o.decode, "tokenize: --skip-special applies to --decode");
  auto tokenizer = load_tokenizer(o.model_dir);
  if (o.decode) {
    // The text of the ids exactly (no trailing newline added beyond the one that ends the line).
    auto ids = parse_id_list(*o.decode, "tokenize --decode");
    for (size_t i = 0; i < ids.size(); ++i)
      RETAIN_CHECK(ids[i] < tokenizer->vocab_size(), "tokenize --decode: id ", ids[i], " (item ",
                   i + 1, ") is outside this tokenizer's vocabulary [0, ", tokenizer->vocab_size(),
                   ")");
    std::cout << tokenizer->decode(ids, o.skip_special) << "\n";
    return 0;
  }
  std::string text = o.text ? *o.text : read_text_file(*o.file);
  ChatFlags flags = o.chat;
  // Tokenizing shows the raw text unless a template is asked for explicitly.
  if (!flags.chat && flags.chat_template.empty()) flags.no_chat = true;
  std::vector<int64_t> ids = prompt_ids(o.model_dir, *tokenizer, text, flags);
  if (o.ids_only) {
    for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? "," : "") << ids[i];
    std::cout << "\n";
  } else {
    for (int64_t id : ids)
      std::cout << id << "\t" << Json(tokenizer->id_to_token(id).value_or("")).dump() << "\n";
  }
  log_info(tokenizer->describe(), ": ", ids.size(), " tokens");
  return 0;
}

int run_bench_tokenize_command(const BenchTokenizeOptions& o) {
  RETAIN_CHECK(o.repeat >= 1, "bench tokenize: --repeat must be >= 1");
  auto tokenizer = load_tokenizer(o.model_dir);
  std::string text = read_text_file(o.file);
  const double mb = static_cast<double>(text.size()) / 1e6;
  using Clock = std::chrono::steady_clock;
  double best = 1e300;
  size_t count = 0;
  auto cold_start = Clock::now();
  count = tokenizer->encode(text).size();
  double cold = std::chrono::duration<double>(Clock::now() - cold_start).count();
  for (int r = 0; r < o.repeat; ++r) {
    auto start = Clock::now();
    count = tokenizer->encode(text).size();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::cout << "tokenizer: " << tokenizer->describe() << "\n"
            << "text: " << o.file << " (" << mb << " MB, " << count << " tokens)\n"
            << "first run: " << mb / cold << " MB/s; best of " << o.repeat << ": " << mb / best
            << " MB/s (" << static_cast<double>(count) / best / 1e6 << " M tokens/s), one thread\n";
  return 0;
}

int run_ppl_command(const PplCommandOptions& o) {
  RETAIN_CHECK(!o.out_dir.empty(), "eval ppl: --out is required");
  EvalModel m = load_eval_model(o.model, o.gates, true, o.policies);
  const Decoder& model = *m.model;
  std::vector<int64_t> ids = m.tokenizer->encode_prompt(read_text_file(o.text_file));
  log_info("eval ppl: ", o.text_file, " is ", ids.size(), " tokens");
  std::vector<ScoreRow> rows;
  if (o.policies.empty()) {
    PerplexityOptions options;
    options.max_length = o.max_length;
    options.stride = o.stride;
    PerplexityResult r = compute_perplexity(model, ids, options);
    rows.push_back(
        {"full",
         std::nullopt,
         {{"ppl", r.ppl}, {"nll", r.nll}, {"tokens", r.tokens}, {"windows", r.windows}}});
  } else {
    for (const auto& [spec, budget] : sweep_cells(o.policies, o.budgets, "eval ppl")) {
      const PolicySpec policy = parse_policy(spec);
      const auto n = static_cast<int64_t>(ids.size());
      auto cache = make_kv_cache(model.config(), policy, budget.value_or(0.0), n, o.chunk,
                                 m.gates_for(policy));
      PerplexityResult r = compute_streaming_perplexity(model, ids, *cache, o.chunk);
      Json metrics = {{"ppl", r.ppl}, {"nll", r.nll}, {"tokens", r.tokens}, {"chunks", r.windows}};
      if (budget) {
        int64_t kept = resolve_budget(*budget, n);
        metrics["kept_per_head"] = kept;
        metrics["eviction_rate"] =
            1.0 - std::min(1.0, static_cast<double>(kept) / static_cast<double>(n));
      }
      metrics["peak_kv_bytes"] = cache->peak_bytes();
      rows.push_back({spec, budget, metrics});
    }
  }
  write_scores(o.out_dir, "ppl", rows);
  if (!o.policies.empty())
    write_score_plot(fs::path(o.out_dir) / "plot.png", rows, "ppl", "perplexity vs budget");
  std::printf("%-12s %-8s %10s %9s %8s\n", "policy", "budget", "ppl", "nll", "tokens");
  for (const auto& r : rows)
    std::printf("%-12s %-8s %10.4f %9.5f %8lld\n", r.policy.c_str(),
                r.budget ? str_cat(*r.budget).c_str() : "-", r.metrics["ppl"].get<double>(),
                r.metrics["nll"].get<double>(),
                static_cast<long long>(r.metrics["tokens"].get<int64_t>()));
  log_info("wrote ", (fs::path(o.out_dir) / "scores.json").string());
  return 0;
}

}  // namespace retain
