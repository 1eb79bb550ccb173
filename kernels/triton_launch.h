// Launches the embedded Triton cubins (kernels/triton_cubins.h) through the CUDA driver API on
// the current stream: each cubin is loaded once per device (cuModuleLoadData), its dynamic shared
// memory opted into, and launched with Triton's ABI: the kernel's non-constexpr arguments in
// order, then two null scratch pointers (the kernels are compiled to need no scratch memory).
// The driver's entry points come through the CUDA runtime (cudaGetDriverEntryPointByVersion),
// so the binary does not link libcuda and still starts on a machine without a driver.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "kernels/triton_cubins.h"

namespace retain {

// Whether a cubin compiled for `cubin_arch` runs on a device of compute capability
// `device_arch` (both x 10). Triton compiles sm_90 and later for the arch-specific targets
// (sm_90a, sm_100a, sm_120a), which run on that arch only; sm_80 cubins run on every 8.x device.
bool triton_arch_runs_on(int cubin_arch, int device_arch);

// Triton's name of an element type, as compile_cubins.py writes it: "bf16", "fp16", "fp32", "i32",
// "i64" ("?" for any other).
const char* triton_type(at::ScalarType t);

// Whether t's data starts 16-byte aligned, as the cubins are compiled assuming of every pointer.
bool triton_aligned(const at::Tensor& t);
// t itself when a cubin can read it through its strides (unit stride along the last dimension,
// an aligned start); otherwise a contiguous copy (which the plan holds until its launch).
at::Tensor triton_readable(const at::Tensor& t);

// The cubin of `kernel` for a device of `device_arch`, `dtype` ("bf16", "fp16", "fp32") and
// head dim (0 for the sums), or nullptr.
const TritonCubin* find_triton_cubin(const std::string& kernel, int device_arch,
                                     const std::string& dtype, int head_dim);

// The arguments of one launch, in the kernel's order, each under the kernel's own parameter name
// and Triton type: launch_triton_cubin compares them with the parameters the cubin was compiled
// with. The tensors are held until the arguments go (after the launch is queued), so a temporary
// of the plan (an int32 copy of the positions, a tile table) is not freed before its kernel runs.
class TritonArgs {
 public:
  // A tensor's data pointer (contiguous, 16-byte aligned: the cubins are compiled assuming it).
  TritonArgs& tensor(const at::Tensor& t, const char* name);
  // A strided view whose strides travel as arguments of their own: unit stride along its last
  // dimension and a 16-byte aligned start are all the cubins assume of it.
  TritonArgs& view(const at::Tensor& t, const char* name);
  TritonArgs& i32(int64_t value, const char* name);
  TritonArgs& i64(int64_t value, const char* name);
  TritonArgs& f32(double value, const char* name);
  // "name:type" of each parameter, comma-separated, as the cubin table records them
  // ("Q:*bf16,...,scale:fp32,T:i32").
  std::string names() const;
  // Every tensor argument is on CUDA device `device`.
  void check_device(int device) const;
  // Pointers to each value, then to the two scratch pointers (null).
  std::vector<void*> pointers();

 private:
  // The data pointer of t (16-byte aligned, as the cubins assume), its name and type; t is held.
  TritonArgs& pointer(const at::Tensor& t, const char* name);

  std::deque<uint64_t> values_;  // a deque: the addresses handed out stay valid as it grows
  std::vector<std::string> names_;
  std::vector<at::Tensor> tensors_;  // held until the launch is queued
};

// The launches of one call, planned without touching a GPU (so the CPU tests check every
// launch's arguments against the cubin's parameters): the outputs, allocated on the inputs'
// device, and the cubins with their grids and arguments in order.
struct TritonPlan {
  struct Launch {
    const TritonCubin* cubin;
    int64_t grid_x, grid_y;
    TritonArgs args;
  };
  std::vector<at::Tensor> outputs;
  std::vector<Launch> launches;
  TritonArgs& add(const TritonCubin& cubin, int64_t grid_x, int64_t grid_y) {
    launches.push_back({&cubin, grid_x, grid_y, {}});
    return launches.back().args;
  }
};

// Throws unless `args` carries exactly the parameters `cubin` was compiled with, in order.
void check_triton_args(const TritonCubin& cubin, const TritonArgs& args);

// Compute capability x 10 of CUDA device `device` (90 for an H100).
int cuda_device_arch(int device);

// Launches `cubin` on a grid (grid_x, grid_y, 1) of blocks of num_warps x 32 threads on the
// current CUDA stream of `device`. Throws naming the cubin's arch and the device's when the
// cubin does not load there.
void launch_triton_cubin(const TritonCubin& cubin, int device, int64_t grid_x, int64_t grid_y,
                         TritonArgs& args);
// Logs, once per distinct reason, that a Triton kernel was asked for and `instead` runs.
void log_triton_fallback(const std::string& what, const std::string& why, const char* instead);

// Every launch of `plan`, in order, on the current stream of `device`; returns its outputs.
std::vector<at::Tensor> launch_triton_plan(TritonPlan plan, int device);

}  // namespace retain
