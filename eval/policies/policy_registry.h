// The eviction policies by name. A spec is "name" or "name:key=value,key=value"
// ("h2o:window=64", "dbtrimkv:min_per_head=4", "trimkv:gates=runs/demo/trimkv.safetensors"); each
// policy declares its options (type, default, help, validation) in its registration, from which
// the registry parses specs, writes the --policy help and the docs' policy table, and names
// the closest policy or option on a typo.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "eval/budget_allocation.h"
#include "eval/policies/eviction_policy.h"

namespace retain {

struct PolicyOption {
  enum class Type { kInteger, kReal, kChoice, kFile };
  std::string name;
  Type type = Type::kInteger;
  std::string fallback;  // the default as the help shows it: "min(4, M/4)" (M = the budget)
  std::string help;      // one phrase
  int64_t min = 0;       // kInteger: the smallest value
  bool odd = false;      // kInteger: odd values only
  std::vector<std::string> choices = {};  // kChoice: the first is the default
  double above = 0, below = 1;            // kReal: the interval (open unless `closed`)
  bool closed = false;
};

// The checked option values of one spec, by name (as written; each was validated against its
// declaration, so the typed reads below cannot fail).
class PolicyArgs {
 public:
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  int64_t integer(const std::string& name, int64_t fallback) const;
  double real(const std::string& name, double fallback) const;
  std::string text(const std::string& name, const std::string& fallback) const;
  void set(const std::string& name, const std::string& value) { values_[name] = value; }

 private:
  std::map<std::string, std::string> values_;
};

struct PolicyRegistration {
  std::string name;
  std::string keeps;  // what it keeps, for the help and the docs table
  std::vector<PolicyOption> options;
  bool budgeted = true;  // false: `full`, the plain cache
  bool needs_gates = false;
  bool needs_scorer = false;  // a learned scorer file (option `scorer`) of this policy's kind
  bool global = false;        // one top-k over all layers and heads of a sequence, not per head
  // The policy for `budget` entries per KV head: budget-dependent defaults resolved, and the ones
  // that cannot fit refused with a clear error.
  std::function<std::unique_ptr<EvictionPolicy>(const PolicyArgs&, int64_t budget)> make;
};

// Every budgeted policy also takes `buffer` (entries over the budget tolerated before an eviction
// cuts back to it), and every per-head one `alloc` (eval/budget_allocation.h) with its
// `pyramid_beta` and `safeguard`.
inline constexpr int64_t kDefaultBuffer = 128;

struct PolicySpec {
  std::string text;  // as written
  const PolicyRegistration* registration = nullptr;
  PolicyArgs args;
  int64_t buffer = kDefaultBuffer;
  BudgetAllocation allocation;

  const std::string& name() const { return registration->name; }
  bool budgeted() const { return registration->budgeted; }
  bool needs_gates() const { return registration->needs_gates; }
  bool needs_scorer() const { return registration->needs_scorer; }
  // locret / kvzap: the policy's scorer file (retain export of a locret / kvzap run).
  std::string scorer() const { return args.text("scorer", ""); }
  bool global() const { return registration->global; }
  // trimkv / dbtrimkv: this policy's own gate file (over --gates), so one sweep can compare gates
  // trained differently: "trimkv:gates=a.safetensors,dbtrimkv:gates=b.safetensors".
  std::string gates() const { return args.text("gates", ""); }
};

// Every registered policy, in the order the help lists them.
const std::vector<PolicyRegistration>& policy_registry();

PolicySpec parse_policy(const std::string& spec);
std::unique_ptr<EvictionPolicy> make_policy(const PolicySpec& spec, int64_t budget);

// The --policy help: one line per policy with its options.
std::string policy_help();
// docs/evaluation.md's policy table (markdown), generated so it cannot drift from the code.
std::string policy_table_markdown();

}  // namespace retain
