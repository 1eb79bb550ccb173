#include "gates/learned_config.h"

#include "core/error.h"

namespace retain {

const char* gate_arch_name(GateArch arch) { return arch == GateArch::kMlp3 ? "mlp3" : "mlp2"; }

GateArch parse_gate_arch(const std::string& name, const std::string& where) {
  if (name == "mlp2") return GateArch::kMlp2;
  RETAIN_CHECK(name == "mlp3", where, ": gates.arch '", name,
               "' is not supported (expected mlp2 or mlp3)");
  return GateArch::kMlp3;
}

Json GateConfig::to_json() const {
  return {{"arch", gate_arch_name(arch)},
          {"width", width},
          {"tie_projection", tie_projection},
          {"bias_init", bias_init},
          {"init_std", init_std}};
}

GateConfig GateConfig::from_json(const Json& json, const std::string& where) {
  GateConfig c;
  c.arch = parse_gate_arch(json_get<std::string>(json, "arch", where), where);
  c.width = json_get<int64_t>(json, "width", where);
  c.tie_projection = json_get<bool>(json, "tie_projection", where);
  // Gate files written before these keys existed were made with the defaults.
  c.bias_init =
      json_get_optional<double>(json, "bias_init", where).value_or(GateConfig{}.bias_init);
  c.init_std = json_get_optional<double>(json, "init_std", where).value_or(GateConfig{}.init_std);
  c.validate(where);
  return c;
}

void GateConfig::validate(const std::string& where) const {
  RETAIN_CHECK(width > 0 && width <= kMaxLearnedWidth, where, ": gates.width must be in [1, ",
               kMaxLearnedWidth, "], found ", width);
  RETAIN_CHECK(init_std >= 0, where, ": gates.init_std must be >= 0");
}

const char* scorer_kind_name(ScorerKind kind) {
  return kind == ScorerKind::kLocret ? "locret" : "kvzap";
}

ScorerKind parse_scorer_kind(const std::string& name, const std::string& where) {
  if (name == "locret") return ScorerKind::kLocret;
  RETAIN_CHECK(name == "kvzap", where, ": scorer kind '", name,
               "' is not supported (expected locret or kvzap)");
  return ScorerKind::kKvzap;
}

Json ScorerConfig::to_json() const {
  return {{"kind", scorer_kind_name(kind)}, {"width", width}, {"init_std", init_std}};
}

ScorerConfig ScorerConfig::from_json(const Json& json, const std::string& where) {
  ScorerConfig c;
  c.kind = parse_scorer_kind(json_get<std::string>(json, "kind", where), where);
  c.width = json_get<int64_t>(json, "width", where);
  c.init_std = json_get_optional<double>(json, "init_std", where).value_or(ScorerConfig{}.init_std);
  c.validate(where);
  return c;
}

void ScorerConfig::validate(const std::string& where) const {
  RETAIN_CHECK(width > 0 && width <= kMaxLearnedWidth, where, ": scorer width must be in [1, ",
               kMaxLearnedWidth, "], found ", width);
  RETAIN_CHECK(init_std >= 0, where, ": scorer init_std must be >= 0, found ", init_std);
}

}  // namespace retain
