// One rank of a tensor-parallel check, started WORLD_SIZE times by tensor_parallel_test.sh (RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT; CPU, the store-backed collective). Every rank loads its
// shard of MODEL_DIR; rank 0 also loads the whole model, runs everything again on one process and
// compares:
//   1. the logits of a left-padded batch (one prefill) within 1e-5;
//   2. for each policy, greedy generation (chunked prefill + decode, a left-padded batch of two
//      prompts under a budget that evicts) gives the same tokens, and every (layer, KV head) of
//      every row keeps the same positions as one process (the ranks' caches gathered head by
//      head);
//   3. a policy the group cannot run (alloc=adakv) is refused with a clear error.
// Prints one line per check (rank 0) and exits 1 on any mismatch.
// Usage: tensor_parallel_worker MODEL_DIR
#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/parallel_groups.h"
#include "eval/budgeted_cache.h"
#include "eval/cache_factory.h"
#include "gates/gate_bank.h"
#include "model/decoder.h"
#include "model/generate.h"

namespace retain {
namespace {

using Survivors = std::vector<std::vector<std::vector<std::vector<int64_t>>>>;  // [l][b][head]

// Every (layer, row, KV head of the model)'s live positions, sorted; under tensor parallelism the
// group's heads gathered in order (every rank gets them all).
Survivors survivors(const KvCache& cache, const ModelConfig& config, int64_t batch,
                    Collectives* group) {
  const auto* budgeted = dynamic_cast<const BudgetedKvCache*>(&cache);
  Survivors out;
  if (budgeted == nullptr) return out;
  for (int64_t l = 0; l < config.num_layers; ++l) {
    int64_t longest = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < config.num_kv_heads; ++h)
        longest = std::max<int64_t>(longest, budgeted->live_positions(l, b, h).size());
    if (group != nullptr) {
      auto all = all_gather_cat(*group, at::tensor({longest}, at::kLong), 0);
      longest = all.max().item<int64_t>();
    }
    auto table = at::full({batch, config.num_kv_heads, longest}, -1, at::kLong);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < config.num_kv_heads; ++h) {
        auto live = budgeted->live_positions(l, b, h);
        std::sort(live.begin(), live.end());
        for (size_t i = 0; i < live.size(); ++i) table[b][h][static_cast<int64_t>(i)] = live[i];
      }
    if (group != nullptr) table = all_gather_cat(*group, table, 1);
    std::vector<std::vector<std::vector<int64_t>>> layer(static_cast<size_t>(batch));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t h = 0; h < table.size(1); ++h) {
        std::vector<int64_t> positions;
        for (int64_t i = 0; i < longest; ++i)
          if (table[b][h][i].item<int64_t>() >= 0)
            positions.push_back(table[b][h][i].item<int64_t>());
        layer[static_cast<size_t>(b)].push_back(positions);
      }
    out.push_back(layer);
  }
  return out;
}

struct Run {
  std::vector<std::vector<int64_t>> tokens;
  Survivors kept;
};

Run generate(const Decoder& model, const GateBank& gates, const std::string& spec,
             const std::vector<std::vector<int64_t>>& prompts, Collectives* group) {
  const PolicySpec policy = parse_policy(spec);
  // 8 entries per head of 40-48 token prompts, read in chunks of 16: every policy evicts.
  auto cache = make_kv_cache(model.config(), policy, 8, 48, 16, LearnedModules(&gates));
  SamplingOptions sampling;
  sampling.max_new_tokens = 10;
  sampling.prefill_chunk = 16;
  Run run;
  for (const auto& r : generate_batch(model, prompts, *cache, sampling))
    run.tokens.push_back(r.tokens);
  run.kept = survivors(*cache, model.config(), static_cast<int64_t>(prompts.size()), group);
  return run;
}

int run(const std::string& model_dir) {
  const DistEnv env = detect_dist_env();
  ParallelGroups groups = make_parallel_groups(env, at::kCPU, std::chrono::seconds(60), env.world);
  const bool leader = env.rank == 0;
  LoadOptions sharded;
  sharded.tensor_parallel = groups.tp;
  const Decoder model = Decoder::load(model_dir, sharded);
  std::optional<Decoder> whole;
  if (leader) whole = Decoder::load(model_dir, LoadOptions{});
  // Random gates with spread-out retention (the default bias 18 would make every beta ~1 and
  // every score tie); the same parameters on every rank and for the whole model.
  GateConfig gate_config;
  gate_config.width = 16;
  gate_config.bias_init = 1.0;
  gate_config.init_std = 0.3;
  const GateBank gates(gate_config, model.config(), at::kCPU, 7);
  std::optional<GateBank> whole_gates;
  if (leader) whole_gates.emplace(gate_config, whole->config(), at::kCPU, 7);
  int failures = 0;
  auto check = [&](bool ok, const std::string& what) {
    if (!leader) return;
    std::cout << (ok ? "ok   " : "FAIL ") << what << std::endl;
    failures += ok ? 0 : 1;
  };

  // 1. Logits of a left-padded batch.
  auto generator = at::make_generator<at::CPUGeneratorImpl>(11);
  auto ids = at::randint(model.config().vocab_size, {2, 24}, generator, at::kLong);
  auto mask = at::ones({2, 24}, at::kLong);
  mask[1].narrow(0, 0, 5).zero_();
  auto positions = positions_from_attention_mask(mask);
  auto logits = model.forward(ids, positions, nullptr);
  if (leader) {
    auto reference = whole->forward(ids, positions, nullptr);
    auto real = mask.to(at::kBool).unsqueeze(-1);
    const double diff =
        (logits - reference).abs().masked_fill(real.logical_not(), 0).max().item<double>();
    check(diff <= 1e-5, str_cat("logits, tensor parallel ", env.world,
                                " vs one process: max |diff| ", diff, " (<= 1e-5)"));
  }

  // 2. Generation and survivors under each policy.
  std::vector<std::vector<int64_t>> prompts(2);
  for (int64_t i = 0; i < 48; ++i) prompts[0].push_back((i * 37 + 5) % model.config().vocab_size);
  for (int64_t i = 0; i < 40; ++i) prompts[1].push_back((i * 53 + 2) % model.config().vocab_size);
  for (const std::string spec :
       {"full", "streaming", "h2o", "snapkv", "sagekv", "tova", "importance", "knorm",
        "expected_attention", "random", "trimkv", "dbtrimkv", "dbtrimkv:min_per_head=2",
        "snapkv:alloc=pyramid", "trimkv:threshold=0.05"}) {
    Run sharded_run = generate(model, gates, spec, prompts, groups.tp.get());
    if (!leader) continue;
    Run reference = generate(*whole, *whole_gates, spec, prompts, nullptr);
    int64_t entries = 0;
    for (const auto& layer : reference.kept)
      for (const auto& row : layer)
        for (const auto& head : row) entries += static_cast<int64_t>(head.size());
    check(sharded_run.tokens == reference.tokens && sharded_run.kept == reference.kept,
          str_cat(spec, ": greedy tokens ",
                  sharded_run.tokens == reference.tokens ? "identical" : "DIFFER",
                  ", survivors of every layer, row and head ",
                  sharded_run.kept == reference.kept ? "identical" : "DIFFER", " (", entries,
                  " entries kept)"));
  }

  // 3. A pooled allocation across a layer's heads is refused.
  std::string error;
  try {
    generate(model, gates, "snapkv:alloc=adakv", prompts, groups.tp.get());
  } catch (const std::exception& e) {
    error = e.what();
  }
  check(error.find("alloc=adakv") != std::string::npos,
        "snapkv:alloc=adakv refused: " + error.substr(0, 120));
  groups.world->shutdown();
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace retain

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: tensor_parallel_worker MODEL_DIR\n");
    return 2;
  }
  try {
    return retain::run(argv[1]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tensor_parallel_worker: error: %s\n", e.what());
    return 1;
  }
}
