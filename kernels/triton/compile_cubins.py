#!/usr/bin/env python3
"""Compile the Triton kernels ahead of time into cubins embedded in retain's binary: retention
attention and the retention sum (retention_attention.py), the cache append (cache_append.py) and
chunked prefill's attention over a cache (cache_attention.py).

No GPU is needed: Triton's compiler API (not its CLI, which asks the driver for a target) lowers
each kernel for a named target with the ptxas the triton wheel ships. One cubin per (kernel,
arch, dtype, head dim), each with the tile shape that kernels/triton/configs.json names for its
arch. The resource usage of each (registers, stack and local bytes, as `cuobjdump -res-usage`
reports them) goes into the table beside it; tests/triton_cubins_test.cpp holds every cubin to
the budget (no stack, no local memory, shared memory within the arch's limit).

  compile_cubins.py build --configs configs.json --out DIR
      writes DIR/triton_cubins.cpp (the table kernels/triton_cubins.h declares, cubins as string
      literals) and DIR/triton_cubins.json (the same table without the bytes, for people)
  compile_cubins.py search --arch 90 [--kernel retention_fwd] [--head-dim 128]
      compiles every tile shape of the search space and prints those that fit the budget, the
      largest tiles first: the candidates a GPU tuning run times (scripts/gpu-run.sh)

Layout of configs.json: {"sm_90": {"retention_fwd": {"128": [block_m, block_n, warps, stages],
...}, ...}, ...}; the sums use head dim "0"; the cache append's block_m is its BLOCK_T.
"""

import argparse
import concurrent.futures
import itertools
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import cache_append  # noqa: E402
import cache_attention  # noqa: E402
import retention_attention as kernels  # noqa: E402

# Dynamic shared memory a block may opt into, per arch (CUDA programming guide, compute
# capabilities table): the budget a cubin's shared memory is held to.
SHARED_LIMIT = {80: 163 * 1024, 90: 227 * 1024, 100: 227 * 1024, 120: 99 * 1024}

ATTENTION_DTYPES = ("bf16", "fp16")
HEAD_DIMS = (64, 128)

# kernel name -> (function, dtypes, head dims, whether it has a BLOCK_N)
KERNELS = {
    "retention_fwd": (kernels.retention_fwd, ATTENTION_DTYPES, HEAD_DIMS, True),
    "retention_bwd_delta": (kernels.retention_bwd_delta, ATTENTION_DTYPES, HEAD_DIMS, False),
    "retention_bwd_dkdv": (kernels.retention_bwd_dkdv, ATTENTION_DTYPES, HEAD_DIMS, True),
    "retention_bwd_dq": (kernels.retention_bwd_dq, ATTENTION_DTYPES, HEAD_DIMS, True),
    "retention_sum_fwd": (kernels.retention_sum_fwd, ("fp32",), (0,), False),
    "retention_sum_bwd": (kernels.retention_sum_bwd, ("fp32",), (0,), False),
    "cache_append": (cache_append.cache_append, ("bf16", "fp16", "fp32"), HEAD_DIMS, False),
    "cache_attention": (cache_attention.cache_attention, ATTENTION_DTYPES, HEAD_DIMS, True),
}

SEARCH_SPACE = {
    "retention_fwd": dict(m=(64, 128), n=(32, 64, 128), warps=(4, 8), stages=(2, 3, 4)),
    "retention_bwd_dq": dict(m=(64, 128), n=(32, 64), warps=(4, 8), stages=(2, 3)),
    "retention_bwd_dkdv": dict(m=(16, 32, 64), n=(64, 128), warps=(4, 8), stages=(2, 3)),
    "retention_bwd_delta": dict(m=(32, 64, 128), n=(0,), warps=(4, 8), stages=(1,)),
    "retention_sum_fwd": dict(m=(64, 128), n=(0,), warps=(4, 8), stages=(1, 2)),
    "retention_sum_bwd": dict(m=(64, 128), n=(0,), warps=(4, 8), stages=(1, 2)),
    "cache_append": dict(m=(1, 4, 16), n=(0,), warps=(1, 2, 4), stages=(1,)),
    "cache_attention": dict(m=(64, 128), n=(32, 64, 128), warps=(4, 8), stages=(2, 3)),
}

POINTERS_OF_THE_DTYPE = {"Q", "K", "V", "OUT", "DOUT", "DQ", "DK", "DV", "CACHE_K", "CACHE_V",
                         "NEW_K", "NEW_V"}
POINTERS_FP32 = {"A", "LSE", "DELTA", "DA", "S", "DS", "CACHE_STAT", "NEW_STAT"}
POINTERS_I32 = {"POS", "SEG", "KV_START", "Q_END", "START", "END"}
POINTERS_I64 = {"CACHE_POS", "NEW_POS", "LENGTH", "KPOS", "QPOS"}
CONSTEXPRS = {"D", "BLOCK_M", "BLOCK_N", "BLOCK", "BLOCK_T"}


def signature(fn, dtype):
    """Triton's signature of `fn` for one dtype: every pointer 16-byte aligned (the launchers
    check it), strides i64 (a cache's offsets pass 2^31), other ints i32, the scale fp32."""
    types = {}
    for name in fn.arg_names:
        if name in CONSTEXPRS:
            types[name] = "constexpr"
        elif name in POINTERS_OF_THE_DTYPE:
            types[name] = "*" + dtype
        elif name in POINTERS_FP32:
            types[name] = "*fp32"
        elif name in POINTERS_I32:
            types[name] = "*i32"
        elif name in POINTERS_I64:
            types[name] = "*i64"
        elif name.startswith("stride_"):
            types[name] = "i64"
        elif name == "scale":
            types[name] = "fp32"
        else:
            types[name] = "i32"
    return types


def constexprs(fn, head_dim, block_m, block_n):
    values = {"D": head_dim, "BLOCK_M": block_m, "BLOCK_N": block_n, "BLOCK": block_m,
              "BLOCK_T": block_m}
    return {name: values[name] for name in fn.arg_names if name in CONSTEXPRS}


def resource_usage(cubin):
    """{"registers", "stack", "local", "static_shared"} of the cubin's one function, from
    cuobjdump -res-usage (static shared memory counts against the opt-in limit beside the
    dynamic shared memory the launch asks for)."""
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                             "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([cuobjdump, "-res-usage", f.name], check=True, capture_output=True,
                              text=True).stdout
    fields = dict(item.split(":", 1) for item in text.split() if ":" in item and item[0].isupper())
    return {"registers": int(fields["REG"]), "stack": int(fields["STACK"]),
            "local": int(fields["LOCAL"]), "static_shared": int(fields["SHARED"])}


def compile_variant(kernel, arch, dtype, head_dim, config):
    """-> (cubin bytes, table entry without the bytes)."""
    fn = KERNELS[kernel][0]
    block_m, block_n, warps, stages = config
    target = GPUTarget("cuda", arch, 32)
    backend = triton.compiler.make_backend(target)
    options = backend.parse_options({"num_warps": warps, "num_stages": stages})
    types = signature(fn, dtype)
    aligned = {(i, ): [["tt.divisibility", 16]] for i, name in enumerate(fn.arg_names)
               if types[name].startswith("*")}
    source = ASTSource(fn=fn, signature=types, constexprs=constexprs(fn, head_dim, block_m, block_n),
                       attrs=aligned)
    compiled = triton.compile(source, target=target, options=options.__dict__)
    meta = compiled.metadata
    if meta.global_scratch_size > 0 or meta.profile_scratch_size > 0:
        raise SystemExit(f"{kernel} sm_{arch} {dtype} D{head_dim}: needs global scratch memory, "
                         "which the launchers do not allocate")
    cubin = compiled.asm["cubin"]
    entry = {"kernel": kernel, "arch": arch, "dtype": dtype, "head_dim": head_dim,
             "function": meta.name,
             "params": ",".join(f"{n}:{types[n]}" for n in fn.arg_names
                                if types[n] != "constexpr"),
             "block_m": block_m, "block_n": block_n,
             "num_warps": meta.num_warps, "num_stages": stages, "shared": meta.shared,
             "size": len(cubin)}
    entry.update(resource_usage(cubin))
    return cubin, entry


def within_budget(entry):
    return (entry["stack"] == 0 and entry["local"] == 0
            and entry["shared"] + entry["static_shared"] <= SHARED_LIMIT[entry["arch"]])


def variants(configs):
    for arch_name, per_kernel in sorted(configs.items()):
        arch = int(arch_name.removeprefix("sm_"))
        for kernel, (_, dtypes, head_dims, _) in KERNELS.items():
            for dtype, head_dim in itertools.product(dtypes, head_dims):
                config = per_kernel.get(kernel, {}).get(str(head_dim))
                if config is None:
                    raise SystemExit(f"configs.json: no tile shape for {kernel} head dim "
                                     f"{head_dim} on {arch_name}")
                yield kernel, arch, dtype, head_dim, tuple(config)


def c_string(data):
    """Bytes as C string literal lines (octal escapes: no digit can extend an escape)."""
    lines, line = [], []
    for i, byte in enumerate(data):
        line.append("\\%03o" % byte)
        if len(line) == 40 or i == len(data) - 1:
            lines.append('    "' + "".join(line) + '"')
            line = []
    return "\n".join(lines)


def build(args):
    with open(args.configs) as f:
        configs = json.load(f)
    jobs = list(variants(configs))
    with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs) as pool:
        results = list(pool.map(compile_variant, *zip(*jobs)))
    entries = [entry for _, entry in results]
    over = [e for e in entries if not within_budget(e)]
    for e in over:
        print(f"warning: {e['kernel']} sm_{e['arch']} {e['dtype']} D{e['head_dim']} "
              f"{e['block_m']}x{e['block_n']}: {e['registers']} registers, stack {e['stack']} B, "
              f"local {e['local']} B, shared {e['shared']} B (tests/triton_cubins_test.cpp fails)",
              file=sys.stderr)
    os.makedirs(args.out, exist_ok=True)
    cpp = ["// Generated by kernels/triton/compile_cubins.py from kernels/triton/configs.json: do "
           "not edit.", '#include "kernels/triton_cubins.h"', "", "namespace retain {",
           "namespace {"]
    for i, (cubin, _) in enumerate(results):
        cpp += [f"constexpr char cubin_{i}[] =", c_string(cubin) + ";"]
    cpp += ["const TritonCubin table[] = {"]
    for i, e in enumerate(entries):
        cpp.append(f'    {{"{e["kernel"]}", {e["arch"]}, "{e["dtype"]}", {e["head_dim"]}, '
                   f'"{e["function"]}", "{e["params"]}", {e["block_m"]}, {e["block_n"]}, {e["num_warps"]}, '
                   f'{e["num_stages"]}, {e["shared"]}, {e["static_shared"]}, {e["registers"]}, '
                   f'{e["stack"]}, '
                   f'{e["local"]}, cubin_{i}, {e["size"]}}},')
    cpp += ["};", "}  // namespace", "",
            "std::span<const TritonCubin> triton_cubins() { return table; }", "",
            "}  // namespace retain", ""]
    write_atomically(os.path.join(args.out, "triton_cubins.cpp"), "\n".join(cpp))
    write_atomically(os.path.join(args.out, "triton_cubins.json"), json.dumps(entries, indent=1))
    print(f"compile_cubins.py: {len(entries)} cubins "
          f"({sum(e['size'] for e in entries) / 1e6:.1f} MB) for "
          f"{', '.join(sorted(configs))} -> {args.out}")


def format_configs(configs):
    """configs.json's text: one line per (arch, kernel)."""
    archs = []
    for arch, kernels in sorted(configs.items()):
        lines = [f'  "{k}": {json.dumps(v)}' for k, v in kernels.items()]
        archs.append(f' "{arch}": {{\n' + ",\n".join(lines) + "\n }")
    return "{\n" + ",\n".join(archs) + "\n}\n"


def write_atomically(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def candidates(kernel, arch, head_dim, jobs=2):
    """(entries that fit the budget, largest tiles first; how many were compiled): the tile
    shapes of SEARCH_SPACE that compile for `arch` without spills."""
    dtype = KERNELS[kernel][1][0]
    space = SEARCH_SPACE[kernel]
    configs = list(itertools.product(space["m"], space["n"], space["warps"], space["stages"]))
    work = [(kernel, arch, dtype, head_dim, c) for c in configs]
    # spawn, not fork: the tuner calls this after CUDA and torch's threads started.
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs, mp_context=spawn) as pool:
        results = list(pool.map(compile_variant, *zip(*work)))
    fits = [e for _, e in results if within_budget(e)]
    fits.sort(key=lambda e: (-e["block_m"] * max(e["block_n"], 1), -e["num_stages"],
                             e["registers"]))
    return fits, len(results)


def search(args):
    names = [args.kernel] if args.kernel else list(KERNELS)
    for kernel in names:
        for head_dim in ([args.head_dim] if args.head_dim is not None else KERNELS[kernel][2]):
            fits, total = candidates(kernel, args.arch, head_dim, args.jobs)
            print(f"{kernel} sm_{args.arch} D{head_dim}: {len(fits)} of {total} fit")
            for e in fits:
                print(f"  [{e['block_m']}, {e['block_n']}, {e['num_warps']}, {e['num_stages']}]"
                      f"  registers {e['registers']}, shared {e['shared']}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("--configs", default=os.path.join(HERE, "configs.json"))
    b.add_argument("--out", required=True)
    b.add_argument("--jobs", type=int, default=2)
    s = sub.add_parser("search")
    s.add_argument("--arch", type=int, required=True)
    s.add_argument("--kernel", choices=list(KERNELS))
    s.add_argument("--head-dim", type=int)
    s.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    build(args) if args.command == "build" else search(args)


if __name__ == "__main__":
    main()
