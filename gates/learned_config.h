// The configurations of the learned modules, as recipes and learned files write them (JSON), free
// of LibTorch: the gates' MLP (gates/gate_bank.h) and the learned scorers' (gates/scorer_bank.h).
// Gate and scorer files carry them in their metadata, which the fuzzer reads
// (fuzz/learned_file_info_fuzz.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "core/json.h"

namespace retain {

// The widest hidden layer a gate or scorer may have (the papers use 512): a file's metadata is
// checked against it before the bank allocates its weights.
constexpr int64_t kMaxLearnedWidth = int64_t{1} << 20;

// The gate MLP per layer: TrimKV's two layers (mlp2) or DBTrimKV's three (mlp3).
enum class GateArch { kMlp2, kMlp3 };
const char* gate_arch_name(GateArch arch);  // mlp2 | mlp3, as recipes and gate files write it
GateArch parse_gate_arch(const std::string& name, const std::string& where);

struct GateConfig {
  GateArch arch = GateArch::kMlp3;
  int64_t width = 512;
  bool tie_projection = true;
  double bias_init = 18.0;
  double init_std = 0.02;

  Json to_json() const;
  static GateConfig from_json(const Json& json, const std::string& where);
  void validate(const std::string& where) const;
};

// Which learned competitor a scorer is: Locret's retaining heads (over q, k, v) or KVzap's
// hidden-state scorer. Its name is the eviction policy it serves (--policy locret | kvzap).
enum class ScorerKind { kLocret, kKvzap };
const char* scorer_kind_name(ScorerKind kind);
ScorerKind parse_scorer_kind(const std::string& name, const std::string& where);

struct ScorerConfig {
  ScorerKind kind = ScorerKind::kLocret;
  int64_t width = 256;
  double init_std = 0.02;

  Json to_json() const;
  static ScorerConfig from_json(const Json& json, const std::string& where);
  void validate(const std::string& where) const;
};

}  // namespace retain
