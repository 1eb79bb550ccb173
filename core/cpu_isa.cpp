#include "core/cpu_isa.h"

#include <cstdlib>
#include <cstring>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "core/error.h"

namespace retain {
namespace {

CpuNumerics chosen = CpuNumerics::native;

// CPUID's vendor string is "GenuineIntel" (MKL's strict CNR holds across thread counts there).
bool intel_cpu() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  char vendor[13] = {0};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  return std::strcmp(vendor, "GenuineIntel") == 0;
#else
  return false;
#endif
}

std::string variable(const char* name) {
  const char* value = std::getenv(name);
  return std::string(name) + "=" + (value != nullptr ? value : "(unset)");
}

}  // namespace

CpuNumerics cpu_numerics_for(const std::string& command) {
  const char* mode = std::getenv("RETAIN_CPU_NUMERICS");
  if (mode == nullptr || *mode == '\0')
    return command == "train" ? CpuNumerics::portable : CpuNumerics::native;
  if (std::string(mode) == "portable") return CpuNumerics::portable;
  if (std::string(mode) == "native") return CpuNumerics::native;
  fail("RETAIN_CPU_NUMERICS is '", mode,
       "'; expected portable (the same results on every AVX2 machine and thread count) or "
       "native (each library's fastest code for this CPU)");
}

void configure_cpu_isa(const std::string& command) {
  chosen = cpu_numerics_for(command);
  if (chosen == CpuNumerics::portable) {
    setenv("MKL_CBWR", "AVX2,STRICT", /*overwrite=*/0);
    setenv("ATEN_CPU_CAPABILITY", "avx2", /*overwrite=*/0);
    setenv("ONEDNN_MAX_CPU_ISA", "AVX2", /*overwrite=*/0);
    if (!intel_cpu()) setenv("MKL_NUM_THREADS", "1", /*overwrite=*/0);
  } else {
    setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_FP16", /*overwrite=*/0);
  }
}

std::string cpu_numerics_description() {
  return std::string(chosen == CpuNumerics::portable ? "portable" : "native") + " (" +
         variable("MKL_CBWR") + " " + variable("ATEN_CPU_CAPABILITY") + " " +
         variable("ONEDNN_MAX_CPU_ISA") +
         (chosen == CpuNumerics::portable && !intel_cpu() ? " " + variable("MKL_NUM_THREADS")
                                                          : "") +
         ")";
}

}  // namespace retain
