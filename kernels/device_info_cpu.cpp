// Used when the build has no CUDA sources (-DRETAIN_CUDA=OFF or no nvcc).
#include "kernels/device_info.h"

namespace retain {

bool cuda_sources_compiled() { return false; }
std::string cuda_device_summary() {
  return "CUDA sources not compiled (built with RETAIN_CUDA=OFF)";
}

int64_t cuda_peak_allocated_bytes(int) { return 0; }
void cuda_reset_peak_allocated_bytes(int) {}

}  // namespace retain
