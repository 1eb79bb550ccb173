// `retain`: parses the command line and runs the command given. Commands register their flags
// and handlers in this folder (cli/commands.h); `launch` is parsed here by hand.
#include <c10/util/Exception.h>
#include <CLI/CLI.hpp>

#include <csignal>
#include <iostream>

#include "cli/commands.h"
#include "cli/config_files.h"
#include "core/cpu_isa.h"
#include "core/error.h"
#include "core/heap_reuse.h"
#include "core/openmp_wait.h"
#include "dist/launch.h"

namespace {

// `retain launch --nproc N [--master-port P] -- COMMAND...`: parsed by hand, because everything
// after `--` belongs to the launched command (CLI11 would try to parse it).
int launch_main(int argc, char** argv) {
  int nproc = 0, port = 0;
  int i = 2;
  auto int_arg = [&](const char* flag) {
    if (i + 1 >= argc) retain::fail("launch: ", flag, " needs a value");
    try {
      return std::stoi(argv[++i]);
    } catch (const std::exception&) {
      retain::fail("launch: ", flag, " expects an integer, found '", argv[i], "'");
    }
  };
  for (; i < argc && std::string(argv[i]) != "--"; ++i) {
    std::string a = argv[i];
    if (a == "--nproc")
      nproc = int_arg("--nproc");
    else if (a == "--master-port")
      port = int_arg("--master-port");
    else
      retain::fail("launch: unknown option '", a,
                   "' (usage: retain launch --nproc N [--master-port P] -- COMMAND...)");
  }
  RETAIN_CHECK(nproc > 0, "launch: --nproc N is required");
  RETAIN_CHECK(i < argc, "launch: missing `--` before the command to run");
  return retain::run_launch(nproc, port, std::vector<std::string>(argv + i + 1, argv + argc));
}

}  // namespace

int main(int argc, char** argv) {
  retain::choose_openmp_wait_policy(argv);
  try {
    retain::configure_cpu_isa(argc > 1 ? argv[1] : "");
  } catch (const std::exception& e) {
    std::cerr << "retain: error: " << e.what() << std::endl;
    return 2;
  }
  retain::keep_freed_memory_for_reuse();
  // A write past RLIMIT_FSIZE fails with EFBIG, as one on a full disk does with ENOSPC, and is
  // reported as an error naming the file; the default action would kill the process midway.
  std::signal(SIGXFSZ, SIG_IGN);
  if (argc > 1 && std::string(argv[1]) == "launch") {
    try {
      return launch_main(argc, argv);
    } catch (const std::exception& e) {
      std::cerr << "retain: error: " << e.what() << std::endl;
      return 1;
    }
  }
  CLI::App app{"retain: learned KV-cache retention for frozen LLMs"};
  app.footer(
      "Also: retain launch --nproc N [--master-port P] -- COMMAND...   (N local ranks, "
      "torchrun-style)\nEvery subcommand takes --config FILE.yaml: a map of its flag names to "
      "values; flags after it override the file.");
  app.require_subcommand(1);
  // A flag given twice (a --config file's, then the command line's) takes the last value.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  retain::cli::Commands commands;
  retain::cli::register_model_commands(app, commands);
  retain::cli::register_data_commands(app, commands);
  retain::cli::register_train_commands(app, commands);
  retain::cli::register_eval_commands(app, commands);
  retain::cli::register_bench_commands(app, commands);
  retain::cli::register_serve_command(app, commands);
  retain::cli::register_env_command(app, commands);

  try {
    std::vector<std::string> args = retain::cli::expand_config_files(app, argc, argv);
    std::vector<char*> arg_ptrs;
    for (auto& a : args) arg_ptrs.push_back(a.data());
    app.parse(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const retain::Error& e) {
    std::cerr << "retain: error: " << e.what() << std::endl;
    return 1;
  }

  try {
    if (const auto* run = commands.parsed()) return (*run)();
  } catch (const retain::Error& e) {
    std::cerr << "retain: error: " << e.what() << std::endl;
    return 1;
  } catch (const c10::Error& e) {
    std::cerr << "retain: error: " << e.what_without_backtrace() << std::endl;
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "retain: error: " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
