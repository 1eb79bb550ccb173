// RETAIN_SKIP_WITHOUT_CUDA(): the first line of every *_CUDA test; skips it without a GPU or in
// a build without the CUDA sources.
#pragma once

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "kernels/device_info.h"

#define RETAIN_SKIP_WITHOUT_CUDA()                                                            \
  do {                                                                                        \
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";                       \
    if (!::retain::cuda_sources_compiled()) GTEST_SKIP() << "built without the CUDA kernels"; \
  } while (false)
