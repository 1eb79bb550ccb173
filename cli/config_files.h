// `--config FILE.yaml` after any subcommand: the file's flags for that subcommand, replaced in the
// argument list before parsing (core/config_args.h), so flags after it override the file.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace retain::cli {

std::vector<std::string> expand_config_files(CLI::App& app, int argc, char** argv);

}  // namespace retain::cli
