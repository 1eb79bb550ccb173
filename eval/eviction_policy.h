// KV-cache eviction policies: which cached entries a budgeted cache keeps. Each policy scores the
// entries of every (layer, sequence, KV head); higher scores stay.
//   streaming   `sinks` first tokens + the last `window` positions (StreamingLLM; window defaults
//               to the rest of the budget)                                 options: sinks, window
//   h2o         accumulated attention, recent window always kept (H2O)   options: window
//   snapkv      at each prefill chunk and at the prompt's last token, the attention of the last
//               `window` queries seen (across chunks), summed over them and the group's heads and
//               pooled over keys with `kernel`, replaces every entry's score; the window is kept;
//               decoded tokens keep score 0 once they leave the recent window (the prompt selection
//               stays fixed, as SnapKV's one-time compression)                options: window,
//               kernel, pool (max | avg: kvpress's averaging)
//   sagekv      the same one-time selection by the LAST prompt token's attention (no pooling), plus
//               `sinks` first tokens and the recent `window` (paper 002)  options: sinks, window
//   random      a seeded random score fixed at insertion                  options: seed
//   importance  attention mass accumulated over ALL heads of the layer   (paper 000: one score
//               per token, so every head keeps the same tokens)
//   knorm       low key L2 norm first
//   trimkv      learned retention: (t + 1 - pos_j) log beta_j per head, t the last position seen,
//               so t + 1 is the position of the next query; with horizon n > 1 the expected
//               attention mass over the next n steps: + log(1 - beta^n) - log(1 - beta)
//   dbtrimkv    the same score, one global top-(M L Hk) over all layers and heads of a sequence
//               (per-head lengths vary), optional minimum per head, optional threshold mode
// Specs are "name" or "name:key=value,key=value" (e.g. "h2o:window=64", "dbtrimkv:min_per_head=4",
// "trimkv:gates=runs/demo/trimkv.safetensors").
#pragma once

#include <cstdint>
#include <string>

namespace retain {

enum class PolicyKind {
  kFull,
  kStreaming,
  kH2O,
  kSnapKV,
  kSageKV,
  kRandom,
  kImportance,
  kKnorm,
  kTrimKV,
  kDBTrimKV
};

struct PolicyOptions {
  PolicyKind kind = PolicyKind::kFull;
  std::string name = "full";
  // -1: chosen from the budget (BudgetedKvCache): sinks min(4, budget / 4); window budget / 2 for
  // h2o (H2O's even split of heavy hitters and recent tokens), min(32, budget / 2) for snapkv,
  // sagekv and streaming's recent part is whatever the sinks leave.
  int64_t sinks = -1;
  int64_t window = -1;
  uint64_t seed = 0;
  int64_t horizon = 1;
  int64_t min_per_head = 0;
  int64_t kernel = 7;  // snapkv pooling
  // snapkv: "max" (max over `kernel` neighbouring keys) or "avg" (kvpress's definition: the
  // average over `kernel` keys, zero-padded, with the observation window's own keys left out).
  std::string pool = "max";
  // dbtrimkv threshold mode (0: off): after every step, entries whose retention beta^(t+1-pos)
  // (or its horizon form) fell below `threshold` are evicted, so the cache can stay well under the
  // budget; the budget still caps it.
  double threshold = 0;
  int64_t buffer = 128;  // entries over budget tolerated before an eviction cuts back to the budget
  // trimkv / dbtrimkv: the gate file of this policy (over --gates), so one sweep can compare
  // gates trained differently: "trimkv:gates=a.safetensors,dbtrimkv:gates=b.safetensors".
  std::string gates;

  bool needs_attention() const {
    return kind == PolicyKind::kH2O || kind == PolicyKind::kImportance ||
           kind == PolicyKind::kSnapKV || kind == PolicyKind::kSageKV;
  }
  bool needs_gates() const { return kind == PolicyKind::kTrimKV || kind == PolicyKind::kDBTrimKV; }
  bool global() const { return kind == PolicyKind::kDBTrimKV; }
};

PolicyOptions parse_policy(const std::string& spec);

}  // namespace retain
