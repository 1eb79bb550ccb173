#include "core/config_args.h"

#include <yaml-cpp/yaml.h>

#include "core/config.h"
#include "core/error.h"

namespace retain {

std::vector<std::string> config_file_args(
    const std::string& path,
    const std::function<std::optional<ConfigFlag>(const std::string&)>& lookup,
    const std::vector<std::string>& names) {
  RETAIN_CHECK(fs::is_regular_file(path), "--config ", path, ": no such file");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    fail(path, ": not valid YAML: ", e.what());
  }
  if (root.IsNull()) return {};
  RETAIN_CHECK(root.IsMap(), path, ": expected a map of flag names to values");
  std::vector<std::string> args;
  for (const auto& item : root) {
    const std::string at = str_cat(path, " line ", item.first.Mark().line + 1);
    // A complex key (`? {a: b}: c`) is valid YAML but names no flag.
    RETAIN_CHECK(item.first.IsScalar(), at, ": expected a flag name as the key, found a ",
                 item.first.IsMap() ? "map" : "list");
    const std::string key = item.first.as<std::string>();
    auto flag = lookup(key);
    RETAIN_CHECK(flag.has_value(), at, ": unknown key '", key, "' for this command; did you mean '",
                 closest_name(key, names), "'?");
    const YAML::Node& value = item.second;
    if (flag->is_switch) {
      bool on = false;
      RETAIN_CHECK(value.IsScalar() && YAML::convert<bool>::decode(value, on), at, ": '", key,
                   "' is an on/off flag: expected true or false");
      if (on) args.push_back("--" + key);
      continue;
    }
    if (value.IsSequence()) {
      std::string joined;
      for (const auto& v : value) {
        RETAIN_CHECK(v.IsScalar(), at, ": '", key, "' expects a list of plain values");
        if (flag->repeatable) {
          args.push_back("--" + key);
          args.push_back(v.as<std::string>());
        } else {
          joined += (joined.empty() ? "" : ",") + v.as<std::string>();
        }
      }
      if (!flag->repeatable) {
        args.push_back("--" + key);
        args.push_back(joined);
      }
      continue;
    }
    RETAIN_CHECK(value.IsScalar(), at, ": '", key, "' expects a value or a list of values");
    args.push_back("--" + key);
    args.push_back(value.as<std::string>());
  }
  return args;
}

}  // namespace retain
