// Keeps freed tensor memory in the process for reuse instead of handing it back to the kernel.
// glibc's malloc serves every block over its mmap threshold (128 KiB, rising to at most 32 MiB)
// with a fresh mmap and unmaps it on free, and trims the heap's free top past 2x that: LibTorch
// on the CPU allocates and frees such blocks for every op (attention scores, eviction
// bookkeeping), so each op paid for page faults and zeroed pages. Measured on the 2-core dev
// machine (2026-11-26, the demo's sweep, 288 answers per policy): h2o 15.5 -> 26.7 answers/s,
// streaming 30.4 -> 39.1, dbtrimkv 25.4 -> 31.0 (the kernel's share of the time had been 18%); a
// demo gate run 165 -> 152 s. The cost is a peak RSS that stays (freed memory is kept): 740 ->
// 890 MB on the h2o run.
#pragma once

namespace retain {

// Call at the start of main(). Raises glibc's mmap and trim thresholds unless the user set
// either (GLIBC_TUNABLES, MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_), which then win.
void keep_freed_memory_for_reuse();

}  // namespace retain
