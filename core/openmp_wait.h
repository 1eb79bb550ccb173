// How LibTorch's OpenMP team waits at its barriers on the CPU. libgomp's default spins for a
// while before sleeping; when another process holds one of the cores, a spinning thread keeps its
// core while its teammate waits for one, and every parallel region pays a scheduler time slice.
// Measured on the 2-core machine (2026-11-27), beside one busy 1-thread process: SmolLM2-135M
// decode 4.9 tokens/s spinning, 11.5 passive (18.2 spinning alone); the demo base's gate training
// step 348 against 850 tokens/s (1,471 alone). Alone, though, passive waiting costs 14% in that
// decode and 23% in the demo's gate training (0.78 against 0.60 steps/s in a 60-step run): its
// small operations meet at a barrier every few microseconds. So retain waits passively when the
// cores are shared as it starts, and spins when it has them to itself.
#pragma once

#include <string>

namespace retain {

// Call first in main(). Unless the user chose (OMP_WAIT_POLICY or GOMP_SPINCOUNT set; ACTIVE or
// PASSIVE force either), one thread runs (OMP_NUM_THREADS=1: no team) or only one core exists:
// when another process is runnable as retain starts (/proc/stat's procs_running, in at least 3 of
// 5 reads over ~50 ms), sets OMP_WAIT_POLICY=PASSIVE and re-executes the program (libgomp reads its
// environment once, when it is loaded, before main runs; the second start costs ~0.5 s). A
// process that starts competing later is not seen: set OMP_WAIT_POLICY=PASSIVE for long runs on
// a shared machine. If the re-execution fails the program goes on spinning.
void choose_openmp_wait_policy(char** argv);

// How many processes /proc/stat's text says are runnable now (procs_running), -1 if it does not.
int runnable_processes(const std::string& proc_stat);

}  // namespace retain
