// The CUDA half of kernels/triton_launch.h: the driver entry points, module loading and the
// launch (built with the CUDA sources; cuda_stubs.cpp stands in otherwise).
#include "kernels/triton_launch.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <limits>
#include <map>
#include <mutex>
#include <utility>

#include "core/error.h"

namespace retain {

namespace {

// The driver functions the launcher needs, looked up once through the runtime.
struct Driver {
  CUresult (*module_load_data)(CUmodule*, const void*) = nullptr;
  CUresult (*module_get_function)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*func_set_attribute)(CUfunction, CUfunction_attribute, int) = nullptr;
  CUresult (*launch_kernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, CUstream, void**, void**) = nullptr;
  CUresult (*get_error_string)(CUresult, const char**) = nullptr;
};

template <typename Fn>
void entry_point(const char* symbol, Fn*& fn) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult status{};
  const cudaError_t err =
      cudaGetDriverEntryPointByVersion(symbol, &address, 12000, cudaEnableDefault, &status);
  RETAIN_CHECK(err == cudaSuccess && status == cudaDriverEntryPointSuccess && address != nullptr,
               "Triton kernels: the CUDA driver has no entry point ", symbol, " (",
               cudaGetErrorString(err), "); a driver for CUDA 12.0 or later is needed");
  fn = reinterpret_cast<Fn*>(address);
}

const Driver& driver() {
  static const Driver d = [] {
    Driver x;
    entry_point("cuModuleLoadData", x.module_load_data);
    entry_point("cuModuleGetFunction", x.module_get_function);
    entry_point("cuFuncSetAttribute", x.func_set_attribute);
    entry_point("cuLaunchKernel", x.launch_kernel);
    entry_point("cuGetErrorString", x.get_error_string);
    return x;
  }();
  return d;
}

std::string driver_error(CUresult result) {
  const char* text = nullptr;
  driver().get_error_string(result, &text);
  return text != nullptr ? text : "unknown CUDA driver error " + std::to_string(result);
}

std::string arch_name(int arch) { return "sm_" + std::to_string(arch) + (arch >= 90 ? "a" : ""); }

// The loaded function of each (device, cubin); modules stay loaded for the process's life.
CUfunction load(const TritonCubin& cubin, int device) {
  static std::mutex mutex;
  static std::map<std::pair<int, const TritonCubin*>, CUfunction> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find({device, &cubin});
  if (it != loaded.end()) return it->second;
  const auto* props = at::cuda::getDeviceProperties(device);
  const std::string where = str_cat(cubin.kernel, " (", arch_name(cubin.arch), ", ", cubin.dtype,
                                    ", head dim ", cubin.head_dim, ") on GPU ", device, " (",
                                    props->name, ", sm_", props->major * 10 + props->minor, ")");
  CUmodule module = nullptr;
  CUresult r = driver().module_load_data(&module, cubin.data);
  RETAIN_CHECK(r == CUDA_SUCCESS, "Triton cubin ", where, " does not load: ", driver_error(r));
  CUfunction fn = nullptr;
  r = driver().module_get_function(&fn, module, cubin.function);
  RETAIN_CHECK(r == CUDA_SUCCESS, "Triton cubin ", where, ": no function ", cubin.function, ": ",
               driver_error(r));
  if (cubin.shared_bytes > 48 * 1024) {
    const int total = cubin.shared_bytes + cubin.static_shared_bytes;
    RETAIN_CHECK(total <= static_cast<int>(props->sharedMemPerBlockOptin), "Triton cubin ", where,
                 " needs ", total, " bytes of shared memory; the device offers ",
                 props->sharedMemPerBlockOptin);
    r = driver().func_set_attribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    cubin.shared_bytes);
    RETAIN_CHECK(r == CUDA_SUCCESS, "Triton cubin ", where, ": cannot opt into ",
                 cubin.shared_bytes, " bytes of shared memory: ", driver_error(r));
  }
  loaded[{device, &cubin}] = fn;
  return fn;
}

}  // namespace

int cuda_device_arch(int device) {
  const auto* props = at::cuda::getDeviceProperties(device);
  return props->major * 10 + props->minor;
}

void launch_triton_cubin(const TritonCubin& cubin, int device, int64_t grid_x, int64_t grid_y,
                         TritonArgs& args) {
  if (grid_x == 0 || grid_y == 0) return;
  RETAIN_CHECK(grid_x <= std::numeric_limits<int32_t>::max() && grid_y <= 65535,
               "Triton kernels: grid ", grid_x, " x ", grid_y, " of ", cubin.kernel,
               " exceeds CUDA's limits (x < 2^31, y <= 65535)");
  check_triton_args(cubin, args);
  args.check_device(device);
  c10::cuda::CUDAGuard guard(device);
  // The driver API needs a current context; a thread that has made no runtime call (an autograd
  // worker) may have none, and CUDAGuard skips cudaSetDevice when the index already matches.
  // Forcing it binds the device's primary context, the one LibTorch uses.
  c10::cuda::SetDevice(static_cast<c10::DeviceIndex>(device), /*force=*/true);
  CUfunction fn = load(cubin, device);
  auto params = args.pointers();
  const CUresult r = driver().launch_kernel(
      fn, static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y), 1,
      static_cast<unsigned>(cubin.num_warps * 32), 1, 1, static_cast<unsigned>(cubin.shared_bytes),
      c10::cuda::getCurrentCUDAStream(device).stream(), params.data(), nullptr);
  RETAIN_CHECK(r == CUDA_SUCCESS, "Triton kernel ", cubin.kernel,
               " failed to launch: ", driver_error(r));
}

}  // namespace retain
