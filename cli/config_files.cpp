#include "cli/config_files.h"

#include <optional>

#include "core/config_args.h"
#include "core/error.h"

namespace retain::cli {

std::vector<std::string> expand_config_files(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> out = {argv[0]};
  CLI::App* current = &app;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string path;
    if (arg == "--config") {
      if (i + 1 >= argc) fail("--config needs a YAML file");
      path = argv[++i];
    } else if (arg.rfind("--config=", 0) == 0) {
      path = arg.substr(9);
    } else {
      for (CLI::App* sub : current->get_subcommands([](CLI::App*) { return true; }))
        if (sub->check_name(arg)) {
          current = sub;
          break;
        }
      out.push_back(arg);
      continue;
    }
    std::vector<std::string> names;
    for (const CLI::Option* opt : current->get_options())
      for (const auto& n : opt->get_lnames()) names.push_back(n);
    auto lookup = [&](const std::string& name) -> std::optional<ConfigFlag> {
      const CLI::Option* opt = current->get_option_no_throw("--" + name);
      if (opt == nullptr || name == "help") return std::nullopt;
      return ConfigFlag{opt->get_items_expected_max() == 0, opt->get_items_expected_max() > 1};
    };
    for (auto& a : config_file_args(path, lookup, names)) out.push_back(std::move(a));
  }
  return out;
}

}  // namespace retain::cli
