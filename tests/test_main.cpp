// GoogleTest main for every suite: the same process set-up as the `retain` binary, with portable
// CPU numerics (core/cpu_isa.h) unless RETAIN_CPU_NUMERICS says otherwise: the suites compare
// choices made from rounded values (kept sets ranked by near-equal key norms, batched against one
// row), which AVX-512 kernels round differently between a batch and a row on some machines (two
// norms swapped on a Sapphire Rapids-class 2-core VM), so every CI machine computes the same.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/cpu_isa.h"
#include "core/heap_reuse.h"

int main(int argc, char** argv) {
  setenv("RETAIN_CPU_NUMERICS", "portable", /*overwrite=*/0);
  retain::configure_cpu_isa();
  retain::keep_freed_memory_for_reuse();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
