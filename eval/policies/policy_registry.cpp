#include "eval/policies/policy_registry.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/config.h"
#include "core/error.h"

namespace retain {

// Each policy file defines its registration; a new policy is one file and a line in each list.
PolicyRegistration full_policy();
PolicyRegistration streaming_policy();
PolicyRegistration h2o_policy();
PolicyRegistration snapkv_policy();
PolicyRegistration sagekv_policy();
PolicyRegistration tova_policy();
PolicyRegistration expected_attention_policy();
PolicyRegistration random_policy();
PolicyRegistration importance_policy();
PolicyRegistration knorm_policy();
PolicyRegistration trimkv_policy();
PolicyRegistration dbtrimkv_policy();
PolicyRegistration locret_policy();
PolicyRegistration kvzap_policy();

const std::vector<PolicyRegistration>& policy_registry() {
  static const std::vector<PolicyRegistration> all = {full_policy(),
                                                      streaming_policy(),
                                                      h2o_policy(),
                                                      snapkv_policy(),
                                                      sagekv_policy(),
                                                      tova_policy(),
                                                      expected_attention_policy(),
                                                      random_policy(),
                                                      importance_policy(),
                                                      knorm_policy(),
                                                      trimkv_policy(),
                                                      dbtrimkv_policy(),
                                                      locret_policy(),
                                                      kvzap_policy()};
  return all;
}

int64_t PolicyArgs::integer(const std::string& name, int64_t fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : std::stoll(it->second);
}

double PolicyArgs::real(const std::string& name, double fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : std::stod(it->second);
}

std::string PolicyArgs::text(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

namespace {

const PolicyOption kBufferOption{"buffer", PolicyOption::Type::kInteger,
                                 std::to_string(kDefaultBuffer),
                                 "entries over the budget tolerated before an eviction cuts back "
                                 "to it (0: cut after every step)"};

// How a per-head policy's budget is split over layers and heads (eval/budget_allocation.h).
const PolicyOption kAllocOption{"alloc",
                                PolicyOption::Type::kChoice,
                                "",
                                "the budget split: the same M for every layer and head, "
                                "PyramidKV's layer-wise pyramid, or AdaKV's one pool per layer",
                                0,
                                false,
                                {"uniform", "pyramid", "adakv"}};
const PolicyOption kPyramidBetaOption{"pyramid_beta",
                                      PolicyOption::Type::kReal,
                                      "20",
                                      "alloc=pyramid: the last layer keeps M / beta per head, the "
                                      "first 2M - M / beta",
                                      0,
                                      false,
                                      {},
                                      1,
                                      std::numeric_limits<double>::infinity(),
                                      /*closed=*/true};
const PolicyOption kSafeguardOption{"safeguard",
                                    PolicyOption::Type::kReal,
                                    "0.2",
                                    "alloc=adakv: each head keeps its best floor(safeguard M) "
                                    "(at least 1 when > 0) whatever the layer's pool says",
                                    0,
                                    false,
                                    {},
                                    0,
                                    1,
                                    /*closed=*/true};

// "a, b and c" with last_separator " and ".
std::string join(const std::vector<std::string>& items, const std::string& last_separator,
                 const std::string& separator = ", ") {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? last_separator : separator;
    out += items[i];
  }
  return out;
}

// The options every budgeted policy takes: buffer, and the allocation for the per-head ones.
std::vector<PolicyOption> shared_options(const PolicyRegistration& r) {
  if (!r.budgeted) return {};
  if (r.global) return {kBufferOption};
  return {kBufferOption, kAllocOption, kPyramidBetaOption, kSafeguardOption};
}

// The options a registration accepts: its own, then the shared ones.
std::vector<PolicyOption> accepted_options(const PolicyRegistration& r) {
  auto options = r.options;
  for (auto& o : shared_options(r)) options.push_back(std::move(o));
  return options;
}

// "(a, b)", "[a, b]" or ">= a".
std::string interval(const PolicyOption& o) {
  if (o.closed && std::isinf(o.below)) return str_cat(">= ", o.above);
  return o.closed ? str_cat("in [", o.above, ", ", o.below, "]")
                  : str_cat("in (", o.above, ", ", o.below, ")");
}

std::vector<std::string> option_names(const PolicyRegistration& r) {
  std::vector<std::string> names;
  for (const auto& o : accepted_options(r)) names.push_back(o.name);
  return names;
}

// Checks `value` against the declaration; the message says what was expected and what was found.
void check_value(const std::string& spec, const PolicyOption& o, const std::string& value) {
  const std::string at = str_cat("--policy '", spec, "': ");
  switch (o.type) {
    case PolicyOption::Type::kInteger: {
      int64_t v = 0;
      try {
        size_t used = 0;
        v = std::stoll(value, &used);
        RETAIN_CHECK(used == value.size(), "");
      } catch (...) {
        fail(at, "option ", o.name, " needs an integer, found '", value, "'");
      }
      RETAIN_CHECK(v >= o.min, at, "option ", o.name, " must be >= ", o.min, ", found ", v);
      RETAIN_CHECK(!o.odd || v % 2 == 1, at, "option ", o.name, " must be odd, found ", v);
      return;
    }
    case PolicyOption::Type::kReal: {
      double v = 0;
      try {
        size_t used = 0;
        v = std::stod(value, &used);
        RETAIN_CHECK(used == value.size(), "");
      } catch (...) {
        fail(at, o.name, " needs a number ", interval(o), ", found '", value, "'");
      }
      const bool inside = o.closed ? v >= o.above && v <= o.below : v > o.above && v < o.below;
      RETAIN_CHECK(std::isfinite(v) && inside, at, o.name, " must be ", interval(o), ", found ",
                   value);
      return;
    }
    case PolicyOption::Type::kChoice: {
      for (const auto& c : o.choices)
        if (value == c) return;
      fail(at, o.name, " must be ", join(o.choices, " or "), ", found '", value, "'");
    }
    case PolicyOption::Type::kFile:
      RETAIN_CHECK(!value.empty(), at, o.name, " needs a file");
      return;
  }
}

const PolicyRegistration& find_registration(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& r : policy_registry()) {
    if (r.name == name) return r;
    names.push_back(r.name);
  }
  fail("--policy '", name, "' is not known (expected ", join(names, " or "), "); did you mean '",
       closest_name(name, names), "'?");
}

// An option `key` that `r` does not take: say which policies take it, or the closest of r's own.
[[noreturn]] void unknown_option(const std::string& spec, const PolicyRegistration& r,
                                 const std::string& key) {
  for (const auto* o : {&kAllocOption, &kPyramidBetaOption, &kSafeguardOption})
    if (key == o->name && r.budgeted)
      fail("--policy '", spec, "': ", key, " applies to the per-head policies; ", r.name,
           " ranks once over all layers and heads of a sequence");
  std::vector<std::string> takers;
  for (const auto& other : policy_registry())
    for (const auto& o : other.options)
      if (o.name == key) takers.push_back(other.name);
  const auto own = option_names(r);
  const std::string takes =
      own.empty() ? std::string(" takes no options") : " takes " + join(own, " and ");
  if (!takers.empty())
    fail("--policy '", spec, "': ", key, " applies to ", join(takers, " and "), "; ", r.name,
         takes);
  fail("--policy '", spec, "': unknown option '", key, "' (", r.name, takes,
       own.empty() ? "" : "; did you mean '" + closest_name(key, own) + "'?", ")");
}

std::string option_phrase(const PolicyOption& o) {
  std::string out = "`" + o.name + "`";
  if (o.type == PolicyOption::Type::kChoice) {
    // No '|' between the choices: it would split a table cell.
    std::vector<std::string> others(o.choices.begin() + 1, o.choices.end());
    out += " (`" + o.choices.front() + "`; also `" + join(others, "` or `") + "`)";
  } else if (!o.fallback.empty()) {
    out += " (" + o.fallback + ")";
  }
  return out + ": " + o.help;
}

}  // namespace

PolicySpec parse_policy(const std::string& text) {
  PolicySpec spec;
  spec.text = text;
  const auto colon = text.find(':');
  spec.registration = &find_registration(text.substr(0, colon));
  const PolicyRegistration& r = *spec.registration;
  if (colon == std::string::npos) return spec;
  std::stringstream in(text.substr(colon + 1));
  std::string item;
  std::vector<std::string> seen;
  while (std::getline(in, item, ',')) {
    const auto eq = item.find('=');
    RETAIN_CHECK(eq != std::string::npos, "--policy '", text, "': option '", item,
                 "' is not key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    const PolicyOption* declared = nullptr;
    const auto options = accepted_options(r);
    for (const auto& o : options)
      if (o.name == key) declared = &o;
    if (declared == nullptr) unknown_option(text, r, key);
    check_value(text, *declared, value);
    if (key == "buffer")
      spec.buffer = std::stoll(value);
    else if (key == "alloc")
      spec.allocation.kind = value == "pyramid" ? BudgetAllocation::Kind::kPyramid
                             : value == "adakv" ? BudgetAllocation::Kind::kAdaKV
                                                : BudgetAllocation::Kind::kUniform;
    else if (key == "pyramid_beta")
      spec.allocation.pyramid_beta = std::stod(value);
    else if (key == "safeguard")
      spec.allocation.safeguard = std::stod(value);
    else
      spec.args.set(key, value);
    seen.push_back(key);
  }
  // An allocation's parameter without that allocation would be silently ignored.
  auto given = [&](const std::string& key) {
    return std::find(seen.begin(), seen.end(), key) != seen.end();
  };
  RETAIN_CHECK(!given("pyramid_beta") || spec.allocation.kind == BudgetAllocation::Kind::kPyramid,
               "--policy '", text,
               "': pyramid_beta applies to alloc=pyramid, found alloc=", spec.allocation.name());
  RETAIN_CHECK(!given("safeguard") || spec.allocation.kind == BudgetAllocation::Kind::kAdaKV,
               "--policy '", text,
               "': safeguard applies to alloc=adakv, found alloc=", spec.allocation.name());
  return spec;
}

std::unique_ptr<EvictionPolicy> make_policy(const PolicySpec& spec, int64_t budget) {
  RETAIN_CHECK(spec.budgeted(), "--policy ", spec.name(), " keeps everything: it has no policy");
  return spec.registration->make(spec.args, budget);
}

std::string policy_help() {
  std::ostringstream out;
  out << "eviction policy: name or name:key=value,... (M = the budget per KV head)";
  for (const auto& r : policy_registry()) {
    out << "\n  " << r.name << ": " << r.keeps;
    std::vector<std::string> options;
    for (const auto& o : r.options) options.push_back(o.name);
    if (!options.empty()) out << " [" << join(options, ", ") << "]";
  }
  out << "\n  every policy but full also takes buffer (" << kDefaultBuffer
      << "); every per-head one alloc=uniform|pyramid|adakv [pyramid_beta (20), safeguard (0.2)]";
  return out.str();
}

std::string policy_table_markdown() {
  std::ostringstream out;
  out << "| policy | keeps | options (default) |\n|---|---|---|\n";
  for (const auto& r : policy_registry()) {
    std::vector<std::string> options;
    for (const auto& o : r.options) options.push_back(option_phrase(o));
    out << "| `" << r.name << "` | " << r.keeps << " |" << (options.empty() ? "" : " ")
        << join(options, "; ", "; ") << " |\n";
  }
  out << "\nEvery policy but `full` also takes " << option_phrase(kBufferOption)
      << ". Every per-head policy (all but `full` and `dbtrimkv`) also takes "
      << option_phrase(kAllocOption) << "; " << option_phrase(kPyramidBetaOption) << "; "
      << option_phrase(kSafeguardOption) << ".\n";
  return out.str();
}

}  // namespace retain
