#include "core/cpu_isa.h"

#include <cstdlib>

#include "core/error.h"

namespace retain {
namespace {

CpuNumerics chosen = CpuNumerics::native;

std::string variable(const char* name) {
  const char* value = std::getenv(name);
  return std::string(name) + "=" + (value != nullptr ? value : "(unset)");
}

}  // namespace

void configure_cpu_isa(const std::string& command) {
  const char* mode = std::getenv("RETAIN_CPU_NUMERICS");
  if (mode == nullptr || *mode == '\0')
    chosen = command == "train" ? CpuNumerics::portable : CpuNumerics::native;
  else if (std::string(mode) == "portable")
    chosen = CpuNumerics::portable;
  else if (std::string(mode) == "native")
    chosen = CpuNumerics::native;
  else
    fail("RETAIN_CPU_NUMERICS is '", mode,
         "'; expected portable (the same results on every AVX2 machine and thread count) or "
         "native (each library's fastest code for this CPU)");
  if (chosen == CpuNumerics::portable) {
    setenv("MKL_CBWR", "AVX2,STRICT", /*overwrite=*/0);
    setenv("ATEN_CPU_CAPABILITY", "avx2", /*overwrite=*/0);
    setenv("ONEDNN_MAX_CPU_ISA", "AVX2", /*overwrite=*/0);
  } else {
    setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_FP16", /*overwrite=*/0);
  }
}

CpuNumerics cpu_numerics() { return chosen; }

std::string cpu_numerics_description() {
  return std::string(chosen == CpuNumerics::portable ? "portable" : "native") + " (" +
         variable("MKL_CBWR") + " " + variable("ATEN_CPU_CAPABILITY") + " " +
         variable("ONEDNN_MAX_CPU_ISA") + ")";
}

}  // namespace retain
