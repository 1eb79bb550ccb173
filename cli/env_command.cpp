// env: the build and the devices retain sees.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <iostream>

#include "cli/commands.h"
#include "kernels/device_info.h"

namespace retain::cli {

void register_env_command(CLI::App& app, Commands& commands) {
  auto* cmd = app.add_subcommand("env", "print the build and the devices retain sees");
  commands.add(cmd, [] {
    std::cout << "retain (LibTorch " << TORCH_VERSION << ")\n"
              << "CPU threads: " << at::get_num_threads() << "\n"
              << "CUDA sources compiled: " << (cuda_sources_compiled() ? "yes" : "no") << "\n"
              << "CUDA available to LibTorch: " << (at::hasCUDA() ? "yes" : "no") << "\n";
    if (cuda_sources_compiled()) std::cout << cuda_device_summary();
    return 0;
  });
}

}  // namespace retain::cli
