// env: the build and the devices retain sees.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include <cstdlib>
#include <iostream>
#include <set>
#include <string>

#include "cli/commands.h"
#include "core/cpu_isa.h"
#include "kernels/cache_append_triton.h"
#include "kernels/cache_attention_triton.h"
#include "kernels/device_info.h"
#include "kernels/retention_attention.h"
#include "kernels/triton_cubins.h"

namespace retain::cli {

void register_env_command(CLI::App& app, Commands& commands) {
  auto* cmd = app.add_subcommand("env", "print the build and the devices retain sees");
  commands.add(cmd, [] {
    std::cout << "retain (LibTorch " << TORCH_VERSION << ")\n"
              << "CPU threads: " << at::get_num_threads()
              << "\n"
              // core/openmp_wait.h: PASSIVE unless the user set it (or GOMP_SPINCOUNT).
              << "OpenMP wait policy: "
              << (std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY")
                                                 : "libgomp's default")
              << (std::getenv("GOMP_SPINCOUNT") ? " (GOMP_SPINCOUNT set)" : "")
              << "\n"
              // core/cpu_isa.h: `retain train` is portable unless RETAIN_CPU_NUMERICS=native.
              << "CPU numerics: " << retain::cpu_numerics_description() << "; retain train: "
              << (retain::cpu_numerics_for("train") == retain::CpuNumerics::portable ? "portable"
                                                                                     : "native")
              << "\n"
              << "CUDA sources compiled: " << (cuda_sources_compiled() ? "yes" : "no") << "\n"
              << "CUDA available to LibTorch: " << (at::hasCUDA() ? "yes" : "no") << "\n";
    std::set<std::string> archs;
    for (const auto& c : triton_cubins()) archs.insert("sm_" + std::to_string(c.arch));
    std::cout << "Triton cubins: " << triton_cubins().size();
    for (const auto& a : archs) std::cout << (a == *archs.begin() ? " (" : ", ") << a;
    std::cout << (archs.empty() ? "" : ")")
              << "; retention kernels: " << retention_kernels_name(retention_kernels())
              << "; cache append: "
              << (cache_append_choice() == CacheAppend::fused ? "fused" : "aten")
              << "; prefill attention: "
              << (prefill_attention_choice() == PrefillAttention::triton ? "triton" : "aten")
              << "\n";
    if (cuda_sources_compiled()) {
      const std::string devices = cuda_device_summary();
      std::cout << devices << (devices.empty() || devices.back() != '\n' ? "\n" : "");
    }
    return 0;
  });
}

}  // namespace retain::cli
