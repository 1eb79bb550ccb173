// What the CUDA side of the build sees: whether CUDA sources were compiled in and the GPUs the
// runtime finds (name, memory, SMs, compute capability). Printed by `retain env`.
#pragma once

#include <cstdint>
#include <string>

namespace retain {

bool cuda_sources_compiled();
// One line per GPU, or a sentence saying why there is none.
std::string cuda_device_summary();
// The most bytes the CUDA caching allocator has handed out on GPU `device` since the last reset
// (0 in a build without CUDA sources), and the reset.
int64_t cuda_peak_allocated_bytes(int device);
void cuda_reset_peak_allocated_bytes(int device);

}  // namespace retain
