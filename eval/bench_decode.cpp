#include "eval/bench_decode.h"

#include <ATen/record_function.h>
#include <torch/cuda.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/json.h"
#include "core/log.h"
#include "eval/cache_factory.h"
#include "eval/sweep.h"
#include "gates/gate_bank.h"
#include "kernels/bench_kernels.h"
#include "kernels/cache_append_triton.h"
#include "kernels/cache_attention_triton.h"
#include "model/decoder.h"
#include "model/generate.h"

namespace retain {
namespace {

void check_options(const BenchDecodeOptions& o) {
  RETAIN_CHECK(o.context >= 1, "bench decode: --context must be >= 1, found ", o.context);
  RETAIN_CHECK(o.batch >= 1, "bench decode: --batch must be >= 1, found ", o.batch);
  RETAIN_CHECK(o.new_tokens >= 2,
               "bench decode: --new-tokens must be >= 2 (the first comes from "
               "the prefill), found ",
               o.new_tokens);
  RETAIN_CHECK(o.chunk >= 0, "bench decode: --chunk must be >= 0, found ", o.chunk);
  RETAIN_CHECK(o.budget > 0, "bench decode: --budget must be > 0, found ", o.budget);
}

std::vector<std::vector<int64_t>> random_prompts(const BenchDecodeOptions& o, int64_t vocab) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(o.model.seed);
  auto ids = at::randint(0, vocab, {o.batch, o.context}, generator, at::kLong);
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t r = 0; r < o.batch; ++r)
    prompts.emplace_back(ids[r].data_ptr<int64_t>(), ids[r].data_ptr<int64_t>() + o.context);
  return prompts;
}

std::vector<std::vector<int64_t>> read_prompts_file(const std::string& path, int64_t vocab) {
  const Json j = read_json_file(path);
  RETAIN_CHECK(j.is_array() && !j.empty(), path,
               ": expected a non-empty JSON array of prompts (arrays of token ids)");
  std::vector<std::vector<int64_t>> prompts;
  for (size_t r = 0; r < j.size(); ++r) {
    RETAIN_CHECK(j[r].is_array() && !j[r].empty(), path, ": prompt ", r,
                 ": expected a non-empty array of token ids");
    std::vector<int64_t> ids;
    for (const auto& id : j[r]) {
      RETAIN_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < vocab,
                   path, ": prompt ", r, ": expected token ids in [0, ", vocab, "), found ",
                   id.dump());
      ids.push_back(id.get<int64_t>());
    }
    RETAIN_CHECK(r == 0 || ids.size() == prompts.front().size(), path, ": prompt ", r, " has ",
                 ids.size(), " tokens, prompt 0 has ", prompts.front().size(),
                 " (bench decode times prompts of one length)");
    prompts.push_back(std::move(ids));
  }
  return prompts;
}

std::string human_bytes(double bytes) {
  char buf[32];
  if (bytes >= 1e9)
    std::snprintf(buf, sizeof(buf), "%.2f GB", bytes / 1e9);
  else
    std::snprintf(buf, sizeof(buf), "%.2f MB", bytes / 1e6);
  return buf;
}

}  // namespace

std::unique_ptr<GateBank> make_bench_gates(const PolicySpec& policy, const ModelConfig& config,
                                           c10::Device device, uint64_t seed) {
  if (!policy.needs_gates()) return nullptr;
  GateConfig g;
  g.arch = policy.global() ? GateArch::kMlp3
                           : GateArch::kMlp2;  // as the demo trains dbtrimkv and trimkv
  g.bias_init = 4.0;  // betas around 0.98: scores that differ between tokens
  return std::make_unique<GateBank>(g, config, device, seed);
}

int run_bench_decode_command(const BenchDecodeOptions& options) {
  check_options(options);
  BenchDecodeOptions o = options;  // batch and context come from --prompts-file when given
  std::shared_ptr<Collectives> world;
  auto model = load_bench_model(o.model, &world);
  const bool leader = !world || world->rank() == 0;
  const c10::Device device = model->device();
  const ModelConfig& c = model->config();
  PolicySpec policy = parse_policy(o.policy);
  RETAIN_CHECK(policy.gates().empty(),
               "bench decode: gates= files are not read here (random gates of the policy's "
               "architecture are used); drop gates= from --policy");
  auto gates = make_bench_gates(policy, c, device, o.model.seed + 1);

  // Random prompt ids (seeded), every row of the batch the same length; or the file's.
  std::vector<std::vector<int64_t>> prompts = o.prompts_file.empty()
                                                  ? random_prompts(o, c.vocab_size)
                                                  : read_prompts_file(o.prompts_file, c.vocab_size);
  o.batch = static_cast<int64_t>(prompts.size());
  o.context = static_cast<int64_t>(prompts.front().size());
  const int64_t chunk = o.chunk > 0 ? o.chunk : o.context;

  Json resolved = {{"model", o.model.describe()},
                   {"model_type", c.model_type},
                   {"layers", c.num_layers},
                   {"kv_heads", c.num_kv_heads},
                   {"head_dim", c.head_dim},
                   {"device", device.str()},
                   {"dtype", c10::toString(model->dtype())},
                   {"batch", o.batch},
                   {"context", o.context},
                   {"new_tokens", o.new_tokens},
                   {"policy", o.policy},
                   {"budget", !policy.budgeted() ? Json(nullptr) : Json(o.budget)},
                   {"chunk", chunk},
                   {"decode", o.decode},
                   {"seed", o.model.seed}};
  if (world) resolved["tensor_parallel"] = world->world();
  if (!o.json && leader) std::cerr << "bench decode, resolved:\n" << resolved.dump(2) << "\n";

  SamplingOptions sampling;  // greedy, no stop ids: every row runs to new_tokens
  sampling.prefill_chunk = chunk;
  sampling.decode = parse_decode_mode(o.decode);
  auto new_cache = [&] {
    return make_kv_cache(c, policy, o.budget, o.context, chunk, gates.get());
  };
  // Warm-up at the real shape (kernels, allocator, cuBLAS handles), which also gives the KV the
  // decode steps start from: prefill plus one token.
  sampling.max_new_tokens = 1;
  auto warm_cache = new_cache();
  generate_batch(*model, prompts, *warm_cache, sampling);
  const int64_t kv_after_prefill = warm_cache->live_bytes();
  warm_cache.reset();
  if (device.is_cuda()) torch::cuda::synchronize();

  sampling.max_new_tokens = o.new_tokens;
  auto cache = new_cache();
  auto results = generate_batch(*model, prompts, *cache, sampling);
  const GenerationResult& r = results.front();
  const int64_t kv_end = cache->live_bytes(), kv_peak = cache->peak_bytes();
  const double prefill_rate = static_cast<double>(o.batch * o.context) / r.prefill_seconds;
  const int64_t steps = o.new_tokens - 1;  // the first new token comes from the prefill
  const double step_ms = r.decode_seconds / static_cast<double>(steps) * 1e3;
  const double decode_rate = static_cast<double>(o.batch * steps) / r.decode_seconds;

  // Roofline: a decode step reads every weight once and the live KV (its mean over the decode).
  const double weights = static_cast<double>(model->weight_bytes());
  const double kv_mean = 0.5 * static_cast<double>(kv_after_prefill + kv_end);
  const double step_bytes = weights + kv_mean;
  const double bandwidth = device_copy_bandwidth(device);
  const double ideal_ms = step_bytes / bandwidth * 1e3;
  const double full_kv = 2.0 * static_cast<double>(c.num_layers * c.num_kv_heads * c.head_dim) *
                         static_cast<double>(o.batch * (o.context + o.new_tokens)) *
                         static_cast<double>(c10::elementSize(model->dtype()));

  // ATen operators in one steady decode step (the third generated token's step minus the
  // second's run; nested ones counted too): on the CPU the proxy for the kernels a step launches.
  // A replayed CUDA graph runs no operator, and counts 0. The outermost calls are also counted by
  // name (an operator that calls others counts once there), which says where a step's operators
  // come from.
  struct OpCounts {
    int64_t all = 0;
    std::map<std::string, int64_t> outermost;
  };
  auto ops_generating = [&](int64_t new_tokens) {
    static std::atomic<int64_t> ops{0};
    static thread_local int depth = 0;
    static thread_local std::map<std::string, int64_t>* names = nullptr;
    std::map<std::string, int64_t> outermost;
    SamplingOptions counted = sampling;
    counted.max_new_tokens = new_tokens;
    auto counted_cache = new_cache();
    ops = 0;
    names = &outermost;
    auto handle = at::addThreadLocalCallback(at::RecordFunctionCallback(
        [](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
          ++ops;
          if (depth++ == 0 && names != nullptr) ++(*names)[fn.name()];
          return nullptr;
        },
        [](const at::RecordFunction&, at::ObserverContext*) { --depth; }));
    generate_batch(*model, prompts, *counted_cache, counted);
    at::removeCallback(handle);
    names = nullptr;
    return OpCounts{ops.load(), std::move(outermost)};
  };
  const OpCounts two = ops_generating(2), three = ops_generating(3);
  const int64_t step_ops = three.all - two.all;
  // Per name, the step's outermost calls (three tokens' run minus two tokens'), most first.
  std::vector<std::pair<int64_t, std::string>> by_name;
  for (const auto& [name, n] : three.outermost) {
    auto it = two.outermost.find(name);
    const int64_t step = n - (it == two.outermost.end() ? 0 : it->second);
    if (step > 0) by_name.emplace_back(step, name);
  }
  std::sort(by_name.begin(), by_name.end(), std::greater<>());
  int64_t outermost_ops = 0;
  for (const auto& [n, name] : by_name) outermost_ops += n;

  if (world) world->shutdown();  // rank 0 hosts the store: it waits for the others
  if (!leader) return 0;
  Json out = resolved;
  out["prefill_tokens_per_s"] = prefill_rate;
  out["decode_tokens_per_s"] = decode_rate;
  out["ms_per_decode_step"] = step_ms;
  out["decode_mode"] = r.decode_mode;  // what ran: eager, static or cuda-graph
  // The cache's append on a GPU (RETAIN_CACHE_APPEND): ATen's scatters or the fused kernel.
  out["cache_append"] = cache_append_choice() == CacheAppend::fused ? "fused" : "aten";
  // Later prefill chunks' attention on a GPU (RETAIN_PREFILL_ATTENTION): SDPA with the position
  // mask, or the Triton kernel over the cache.
  out["prefill_attention"] =
      prefill_attention_choice() == PrefillAttention::triton ? "triton" : "aten";
  out["prefill_seconds"] = r.prefill_seconds;
  out["decode_seconds"] = r.decode_seconds;
  out["kv_bytes_after_prefill"] = kv_after_prefill;
  out["kv_bytes_end"] = kv_end;
  out["kv_bytes_peak"] = kv_peak;
  out["kv_bytes_full_cache"] = full_kv;
  out["weight_bytes"] = weights;
  out["bytes_per_decode_step"] = step_bytes;
  out["copy_bandwidth_bytes_per_s"] = bandwidth;
  out["roofline_ms_per_step"] = ideal_ms;
  out["roofline_fraction"] = ideal_ms / step_ms;
  out["aten_ops_per_decode_step"] = step_ops;
  out["aten_ops_per_layer_per_step"] =
      static_cast<double>(step_ops) / static_cast<double>(c.num_layers);
  out["outermost_ops_per_decode_step"] = outermost_ops;
  Json names = Json::object();
  for (const auto& [n, name] : by_name) names[name] = n;
  out["outermost_ops_by_name"] = names;
  // The greedy ids of every row: a peer fed the same prompts can check it decoded the same.
  Json tokens = Json::array();
  for (const auto& row : results) tokens.push_back(row.tokens);
  out["tokens"] = tokens;
  if (o.json) {
    std::cout << out.dump() << std::endl;
    return 0;
  }
  std::printf("prefill      %12.1f tokens/s  (%lld x %lld tokens in %.3f s, chunk %lld)\n",
              prefill_rate, static_cast<long long>(o.batch), static_cast<long long>(o.context),
              r.prefill_seconds, static_cast<long long>(chunk));
  std::printf("decode       %12.1f tokens/s  (%lld x %lld steps, %.3f ms per step, %s)\n",
              decode_rate, static_cast<long long>(o.batch), static_cast<long long>(steps), step_ms,
              r.decode_mode.c_str());
  std::printf(
      "ops          %lld ATen operators per decode step, %.1f per layer (nested included; "
      "a replayed CUDA graph counts none)\n",
      static_cast<long long>(step_ops),
      static_cast<double>(step_ops) / static_cast<double>(c.num_layers));
  std::printf("             %lld outermost calls; the most frequent:",
              static_cast<long long>(outermost_ops));
  for (size_t i = 0; i < std::min<size_t>(by_name.size(), 12); ++i)
    std::printf("%s %s %lld", i == 0 ? "" : ",", by_name[i].second.c_str(),
                static_cast<long long>(by_name[i].first));
  std::printf("\n");
  if (world)
    std::printf("tensor parallel %d: weights and KV below are one rank's share\n", world->world());
  std::printf("KV live      %s after prefill, %s at the end, peak %s (full cache: %s)\n",
              human_bytes(static_cast<double>(kv_after_prefill)).c_str(),
              human_bytes(static_cast<double>(kv_end)).c_str(),
              human_bytes(static_cast<double>(kv_peak)).c_str(), human_bytes(full_kv).c_str());
  std::printf(
      "roofline     %.1f%%: a step reads %s (weights %s + mean live KV %s); at the measured copy "
      "bandwidth %.0f GB/s that takes %.3f ms, measured %.3f ms\n",
      100.0 * ideal_ms / step_ms, human_bytes(step_bytes).c_str(), human_bytes(weights).c_str(),
      human_bytes(kv_mean).c_str(), bandwidth / 1e9, ideal_ms, step_ms);
  return 0;
}

}  // namespace retain
