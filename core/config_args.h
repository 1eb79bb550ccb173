// `--config FILE.yaml` for any subcommand: a YAML map whose keys are the subcommand's long flag
// names (without the dashes) becomes the equivalent command-line flags, so a run can be kept in a
// file (recipes/demo/eval.yaml) and still be one `retain ...` command. Flags written after
// `--config` on the command line override the file's values.
//   key: value         -> --key value
//   key: true | false  -> --key | (nothing), for on/off flags
//   key: [a, b]        -> --key a --key b for repeatable options, --key a,b otherwise
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace retain {

struct ConfigFlag {
  bool is_switch = false;   // an on/off flag taking no value
  bool repeatable = false;  // takes several values
};

// `lookup(name)` describes the option --name of the subcommand, or nullopt when there is none;
// `names` lists the valid names for "did you mean". Errors name the file and line.
std::vector<std::string> config_file_args(
    const std::string& path,
    const std::function<std::optional<ConfigFlag>(const std::string&)>& lookup,
    const std::vector<std::string>& names);

}  // namespace retain
