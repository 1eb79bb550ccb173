// What the eviction tests share: a tiny model config, a way to feed hand-made keys, queries and
// hidden states into a budgeted cache, and gates whose log beta is a known function of the
// hidden state.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "eval/budgeted_cache.h"
#include "gates/gate_bank.h"
#include "model/model_config.h"

namespace retain::eviction_testing {

inline ModelConfig tiny_config(int64_t layers, int64_t kv_heads) {
  ModelConfig c;
  c.model_type = "qwen3";
  c.num_layers = layers;
  c.num_heads = kv_heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = 4;
  c.hidden_size = 8;
  c.sliding_window.assign(static_cast<size_t>(layers), 0);
  return c;
}

// Feeds one step of n tokens starting at position `start` with the given keys (B=1) into every
// layer, hidden states `hidden` (1, n, 8) for gates, queries `q` (zeros when undefined) and
// pre-RoPE queries `q_before_rope` (q when undefined).
inline void feed(BudgetedKvCache& cache, const ModelConfig& c, int64_t start,
                 const at::Tensor& keys, const at::Tensor& hidden, at::Tensor q = {},
                 at::Tensor q_before_rope = {}) {
  const int64_t n = keys.size(2);
  auto positions = at::arange(start, start + n, at::kLong).view({1, n});
  if (!q.defined()) q = at::zeros({1, c.num_heads, n, c.head_dim});
  if (!q_before_rope.defined()) q_before_rope = q;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    cache.observe({l, hidden, q, keys, keys, positions, q_before_rope});
    cache.append(l, keys, keys, positions);
  }
  cache.end_step();
}

// A gate bank whose log beta for token t depends only on hidden[t][0]: mlp2, width 1, W1 picks
// coordinate 0, W2 = scale(l, h), biases 0, so log beta = logsigmoid(scale(l, h) * silu(x0)).
inline double probe_scale(int64_t layer, int64_t head, bool distinct) {
  return distinct ? 1.0 + 0.7 * layer + 2.3 * head : 1.0;
}

inline std::unique_ptr<GateBank> probe_gates(const ModelConfig& c, bool distinct = false) {
  GateConfig g;
  g.arch = GateArch::kMlp2;
  g.width = 1;
  g.tie_projection = false;
  auto bank = std::make_unique<GateBank>(g, c, at::kCPU, 0);
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    auto w1 = at::zeros({1, c.hidden_size});
    w1[0][0] = 1;
    auto w2 = at::zeros({c.num_kv_heads, 1});
    for (int64_t h = 0; h < c.num_kv_heads; ++h) w2[h][0] = probe_scale(l, h, distinct);
    named.emplace_back(str_cat("layers.", l, ".gate.linear1.weight"), w1);
    named.emplace_back(str_cat("layers.", l, ".gate.linear1.bias"), at::zeros({1}));
    named.emplace_back(str_cat("layers.", l, ".gate.linear2.weight"), w2);
    named.emplace_back(str_cat("layers.", l, ".gate.bias"), at::zeros({c.num_kv_heads}));
  }
  bank->load(named, "probe");
  return bank;
}

}  // namespace retain::eviction_testing
