#include "core/heap_reuse.h"

#include <malloc.h>

#include <cstddef>
#include <cstdlib>

namespace retain {

void keep_freed_memory_for_reuse() {
  for (const char* name : {"GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"})
    if (std::getenv(name) != nullptr) return;
  // glibc refuses an mmap threshold over its heap size / 2 (32 MiB on 64-bit) with 0: then
  // blocks above 32 MiB still get their own mapping, as they do by default.
  constexpr size_t kMib = size_t{1} << 20;
  if (mallopt(M_MMAP_THRESHOLD, static_cast<int>(1024 * kMib)) == 0)
    mallopt(M_MMAP_THRESHOLD, static_cast<int>(32 * kMib));
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(1024 * kMib));
}

}  // namespace retain
