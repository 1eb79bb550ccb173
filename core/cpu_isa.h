// The instruction sets LibTorch's CPU libraries may use, chosen once per process before any
// tensor op (each library reads its variable lazily, on its first kernel).
//
// oneDNN stays below AMX: with torch 2.11 on our machines (x86 VMs that report AMX and run AMX
// instructions fine from C), oneDNN's bf16 matmul kernels die with SIGILL on `tilezero`, with or
// without the kernel's AMX permission requested; capping oneDNN at AVX512_CORE_FP16 fixes it.
// CPU bf16 is a test and fallback path here (GPUs carry the real work), so losing AMX costs little.
//
// Portable numerics make a CPU run's floating-point results the same on every x86-64 machine with
// AVX2 and at any thread count: MKL's conditional numerical reproducibility at its AVX2 code path
// in strict mode (MKL_CBWR=AVX2,STRICT: bit-for-bit across thread counts too), ATen's own kernels
// at AVX2 (ATEN_CPU_CAPABILITY=avx2) and oneDNN at AVX2. Without them the demo's 24-step dbtrimkv
// run on one AVX-512 machine trained four different gate files (ATen AVX-512 or AVX2, MKL
// AVX-512 or AVX2) and two more on one thread instead of two, and gate training amplifies a
// last-bit difference into other weights and another table row. With them, 1, 2 and 4 threads
// give the same file (tests/gates_reproducible_test.sh). The cost on this machine (2026-12-02):
// the demo's gate step 3.38 -> 2.66 steps/s, SmolLM2-135M fp32 decode 21.6 -> 13.7 tokens/s. So
// `retain train` runs portable by default (weights a user must be able to reproduce) and every
// other command native (speed; the demo's sweep predicted the same 1,224 answers either way).
// MKL keeps strict CNR's thread-count promise on Intel processors only: on an AMD EPYC (Zen 4,
// 2026-12-02) MKL at AVX2 strict trained another gate file on 2 threads than on 1 (weights
// 1.5e-6 apart), and the same with MKL on one thread. So on a non-Intel CPU portable numerics
// also run MKL on one thread (MKL_NUM_THREADS=1; ATen's own kernels keep their threads): the
// demo's gate step there 3,696 -> 2,538 tokens/s.
#pragma once

#include <string>

namespace retain {

enum class CpuNumerics { native, portable };

// Call at the start of main(), before any tensor op. COMMAND is retain's subcommand (argv[1];
// empty if none), its numerics those of cpu_numerics_for; a variable the user set
// (ONEDNN_MAX_CPU_ISA, MKL_CBWR, ATEN_CPU_CAPABILITY) is left as it is.
void configure_cpu_isa(const std::string& command = "");

// The numerics a COMMAND runs: RETAIN_CPU_NUMERICS=portable|native, else portable for `train`
// and native for the rest. Throws retain::Error on another RETAIN_CPU_NUMERICS value.
CpuNumerics cpu_numerics_for(const std::string& command);

// One line for a run's log: the mode and the three variables as the libraries will read them,
// e.g. "portable (MKL_CBWR=AVX2,STRICT ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2)".
std::string cpu_numerics_description();

}  // namespace retain
