// The CUDA launchers of a build without CUDA sources (RETAIN_CUDA=OFF or no nvcc). The
// dispatchers never reach them there (cuda_sources_compiled() is false); they throw if called.
#include "core/error.h"
#include "kernels/cuda_launchers.h"
#include "kernels/triton_launch.h"

namespace retain {

namespace {

[[noreturn]] void no_cuda(const char* what) {
  throw Error(str_cat(what,
                      ": this build has no CUDA kernels (configured with RETAIN_CUDA=OFF or "
                      "without nvcc); rebuild with RETAIN_CUDA=ON on a machine with the CUDA "
                      "toolkit"));
}

}  // namespace

std::vector<at::Tensor> retention_attention_cuda_forward(const at::Tensor&, const at::Tensor&,
                                                         const at::Tensor&, const at::Tensor&,
                                                         const at::Tensor&, const at::Tensor&,
                                                         double) {
  no_cuda("retention_attention_cuda_forward");
}
std::vector<at::Tensor> retention_attention_cuda_backward(const at::Tensor&, const at::Tensor&,
                                                          const at::Tensor&, const at::Tensor&,
                                                          const at::Tensor&, const at::Tensor&,
                                                          const at::Tensor&, const at::Tensor&,
                                                          const at::Tensor&, double) {
  no_cuda("retention_attention_cuda_backward");
}
at::Tensor retention_sum_cuda_forward(const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  no_cuda("retention_sum_cuda_forward");
}
at::Tensor retention_sum_cuda_backward(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                       const at::Tensor&) {
  no_cuda("retention_sum_cuda_backward");
}
at::Tensor decode_attention_cuda(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                 const at::Tensor&, const at::Tensor&, const at::Tensor&, double) {
  no_cuda("decode_attention_cuda");
}
at::Tensor compact_cache_cuda(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                              const at::Tensor&, const at::Tensor&) {
  no_cuda("compact_cache_cuda");
}

at::Tensor rms_norm_cuda(const at::Tensor&, const at::Tensor&, double) { no_cuda("rms_norm_cuda"); }
at::Tensor rope_rotate_cuda(const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  no_cuda("rope_rotate_cuda");
}

int cuda_device_arch(int) { no_cuda("cuda_device_arch"); }
void launch_triton_cubin(const TritonCubin&, int, int64_t, int64_t, TritonArgs&) {
  no_cuda("launch_triton_cubin");
}

}  // namespace retain
