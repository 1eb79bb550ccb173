#include "eval/eviction_policy.h"

#include <sstream>

#include "core/error.h"

namespace retain {

PolicyOptions parse_policy(const std::string& spec) {
  PolicyOptions o;
  auto colon = spec.find(':');
  o.name = spec.substr(0, colon);
  static const std::pair<const char*, PolicyKind> kNames[] = {
      {"full", PolicyKind::kFull},
      {"streaming", PolicyKind::kStreaming},
      {"h2o", PolicyKind::kH2O},
      {"snapkv", PolicyKind::kSnapKV},
      {"sagekv", PolicyKind::kSageKV},
      {"random", PolicyKind::kRandom},
      {"importance", PolicyKind::kImportance},
      {"knorm", PolicyKind::kKnorm},
      {"trimkv", PolicyKind::kTrimKV},
      {"dbtrimkv", PolicyKind::kDBTrimKV}};
  bool known = false;
  for (const auto& [name, kind] : kNames)
    if (o.name == name) {
      o.kind = kind;
      known = true;
    }
  RETAIN_CHECK(known, "--policy '", o.name,
               "' is not known (expected full, streaming, h2o, snapkv, sagekv, random, importance, "
               "knorm, trimkv "
               "or dbtrimkv)");
  if (colon == std::string::npos) return o;
  std::stringstream in(spec.substr(colon + 1));
  std::string item;
  while (std::getline(in, item, ',')) {
    auto eq = item.find('=');
    RETAIN_CHECK(eq != std::string::npos, "--policy '", spec, "': option '", item,
                 "' is not key=value");
    std::string key = item.substr(0, eq);
    if (key == "gates") {  // the one string option
      RETAIN_CHECK(o.kind == PolicyKind::kDBTrimKV || o.kind == PolicyKind::kTrimKV, "--policy '",
                   spec, "': gates applies to trimkv and dbtrimkv");
      o.gates = item.substr(eq + 1);
      RETAIN_CHECK(!o.gates.empty(), "--policy '", spec, "': gates needs a file");
      continue;
    }
    if (key == "pool") {  // snapkv's pooling of the votes over neighbouring keys
      RETAIN_CHECK(o.kind == PolicyKind::kSnapKV, "--policy '", spec, "': pool applies to snapkv");
      o.pool = item.substr(eq + 1);
      RETAIN_CHECK(o.pool == "max" || o.pool == "avg", "--policy '", spec,
                   "': pool must be max or avg, found '", o.pool, "'");
      continue;
    }
    if (key == "threshold") {  // the one real-valued option
      try {
        size_t used = 0;
        o.threshold = std::stod(item.substr(eq + 1), &used);
        RETAIN_CHECK(used == item.size() - eq - 1, "");
      } catch (...) {
        fail("--policy '", spec, "': threshold needs a number in (0, 1), found '",
             item.substr(eq + 1), "'");
      }
      RETAIN_CHECK(o.threshold > 0 && o.threshold < 1, "--policy '", spec,
                   "': threshold must be in (0, 1)");
      RETAIN_CHECK(o.kind == PolicyKind::kDBTrimKV || o.kind == PolicyKind::kTrimKV, "--policy '",
                   spec, "': threshold applies to trimkv and dbtrimkv");
      continue;
    }
    int64_t value = 0;
    try {
      size_t used = 0;
      value = std::stoll(item.substr(eq + 1), &used);
      RETAIN_CHECK(used == item.size() - eq - 1, "");
    } catch (...) {
      fail("--policy '", spec, "': option ", key, " needs an integer, found '", item.substr(eq + 1),
           "'");
    }
    RETAIN_CHECK(value >= 0, "--policy '", spec, "': option ", key, " must be >= 0");
    if (key == "sinks")
      o.sinks = value;
    else if (key == "window")
      o.window = value;
    else if (key == "seed")
      o.seed = static_cast<uint64_t>(value);
    else if (key == "horizon" && value >= 1)
      o.horizon = value;
    else if (key == "min_per_head")
      o.min_per_head = value;
    else if (key == "buffer")
      o.buffer = value;
    else if (key == "kernel" && value % 2 == 1)
      o.kernel = value;
    else
      fail("--policy '", spec, "': unknown option '", key,
           "' (sinks, window, seed, horizon >= 1, min_per_head, buffer, kernel odd >= 1, "
           "pool, threshold, gates)");
  }
  return o;
}

}  // namespace retain
