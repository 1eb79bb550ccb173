// GoogleTest main for every suite: the same process set-up as the `retain` binary.
#include <gtest/gtest.h>

#include "core/cpu_isa.h"
#include "core/heap_reuse.h"

int main(int argc, char** argv) {
  retain::configure_cpu_isa();
  retain::keep_freed_memory_for_reuse();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
