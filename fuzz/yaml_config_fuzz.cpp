// libFuzzer target: YAML configs (recipes, --config files) and key=value overrides. The first
// line of the input is an override, the rest the YAML file. Any bytes either load (and then the
// override applies or throws, and the result dumps) or throw retain::Error; a --config file
// either expands into flags or throws retain::Error.
#include <optional>

#include "core/config.h"
#include "core/config_args.h"
#include "core/error.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace retain;
  const std::string input = fuzz::as_text(data, size);
  const size_t newline = input.find('\n');
  const std::string override_line = input.substr(0, newline);
  const std::string yaml = newline == std::string::npos ? "" : input.substr(newline + 1);
  try {
    Config c = Config::parse(yaml, "fuzz.yaml");
    try {
      c.apply_override(override_line);
    } catch (const Error&) {
    }
    c.dump();
    if (c.has("optim.lr")) c.get_or<double>("optim.lr", 0.0);
  } catch (const Error&) {
  }
  try {
    const fs::path file = fuzz::write_input("flags.yaml", data, size);
    // A command with a flag, a switch and a list option, as CLI11 describes them.
    auto lookup = [](const std::string& name) -> std::optional<ConfigFlag> {
      if (name == "policy") return ConfigFlag{false, false};
      if (name == "protect-question") return ConfigFlag{true, false};
      if (name == "input") return ConfigFlag{false, true};
      return std::nullopt;
    };
    config_file_args(file.string(), lookup, {"policy", "protect-question", "input"});
  } catch (const Error&) {
  }
  return 0;
}
