#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "kernels/device_info.h"

namespace retain {

bool cuda_sources_compiled() { return true; }

std::string cuda_device_summary() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(err);
  if (count == 0) return "no CUDA device";
  std::string out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    char line[256];
    std::snprintf(line, sizeof(line), "cuda:%d %s, %.1f GiB, %d SMs, sm_%d%d\n", i, prop.name,
                  static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0),
                  prop.multiProcessorCount, prop.major, prop.minor);
    out += line;
  }
  return out;
}

// A device given as plain "cuda" has index -1, which the allocator's statistics reject (unlike
// streams and synchronize): it means the current device.
static c10::DeviceIndex resolve(int device) {
  return device < 0 ? c10::cuda::current_device() : static_cast<c10::DeviceIndex>(device);
}

int64_t cuda_peak_allocated_bytes(int device) {
  using c10::CachingAllocator::StatType;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(resolve(device));
  return stats.allocated_bytes[static_cast<size_t>(StatType::AGGREGATE)].peak;
}

void cuda_reset_peak_allocated_bytes(int device) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(resolve(device));
}

}  // namespace retain
