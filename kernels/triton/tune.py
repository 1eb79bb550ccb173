#!/usr/bin/env python3
"""Time the spill-free tile shapes of each Triton retention kernel on this GPU and write the
fastest into a copy of configs.json for the GPU's arch (scripts/gpu-run.sh, step `tune`; a
session commits the copy as kernels/triton/configs.json, and the next build embeds it).

The candidates are the tile shapes of compile_cubins.SEARCH_SPACE that compile for this arch
without spills (largest tiles first, at most --top per kernel); each is timed with
triton.testing.do_bench on bf16 inputs of the training shapes (one document of --seq tokens,
GQA --heads / --kv-heads). The forward kernel is timed alone; dK/dV and dQ each inside the whole
backward pass with the other kernels fixed, so the differences are theirs. The cache append is
timed at a decode step (one token per row, 32 rows, the lengths reset before each append), the
prefill attention over a cache at a later 512-token chunk over 8k entries (2 rows).

  python3 kernels/triton/tune.py --out OUT/configs.json [--seq 16384] [--top 8]
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402
from triton.testing import do_bench  # noqa: E402

import cache_append_host  # noqa: E402
import cache_attention_host  # noqa: E402
import compile_cubins  # noqa: E402
import retention_host as host  # noqa: E402


def blocks(entry):
    return host.Blocks(entry["block_m"], max(entry["block_n"], 16), entry["num_warps"],
                       entry["num_stages"])


def config(entry):
    return [entry["block_m"], entry["block_n"], entry["num_warps"], entry["num_stages"]]


def fastest(name, entries, run):
    """Time run(entry) for each entry; return the fastest entry, printing every time."""
    best, best_ms = None, float("inf")
    for e in entries:
        try:
            ms = do_bench(lambda: run(e), warmup=5, rep=30)
        except Exception as err:  # a shape this GPU cannot run (shared memory): skip it
            print(f"  {name} {config(e)}: failed ({str(err).splitlines()[0][:100]})", flush=True)
            continue
        print(f"  {name} {config(e)}: {ms:.3f} ms", flush=True)
        if ms < best_ms:
            best, best_ms = e, ms
    if best is None:
        raise SystemExit(f"{name}: no candidate ran")
    print(f"{name}: {config(best)} at {best_ms:.3f} ms", flush=True)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--seq", type=int, default=16384)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    args = parser.parse_args()
    major, minor = torch.cuda.get_device_capability()
    arch = major * 10 + minor
    start = time.time()
    with open(os.path.join(HERE, "configs.json")) as f:
        configs = json.load(f)
    chosen = {}

    def pick(kernel, head_dim, run):
        fits, total = compile_cubins.candidates(kernel, arch, head_dim, args.jobs)
        print(f"{kernel} sm_{arch} D{head_dim}: {len(fits)} of {total} shapes fit; timing "
              f"{min(len(fits), args.top)}", flush=True)
        best = fastest(f"{kernel} D{head_dim}", fits[:args.top], run)
        chosen.setdefault(kernel, {})[str(head_dim)] = config(best)
        return best

    t, b, h, hk = args.seq, 1, args.heads, args.kv_heads
    pos = torch.arange(t, device="cuda").expand(b, t).contiguous()
    seg = torch.zeros(b, t, dtype=torch.int64, device="cuda")
    for d in compile_cubins.HEAD_DIMS:
        q = torch.randn(b, h, t, d, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(b, hk, t, d, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        a = -0.01 * torch.rand(b, hk, t, device="cuda")
        scale = d ** -0.5
        fwd = pick("retention_fwd", d,
                   lambda e: host.forward(q, k, v, a, pos, seg, scale, blocks(e)))
        out, lse = host.forward(q, k, v, a, pos, seg, scale, blocks(fwd))
        d_out = torch.randn_like(q)
        fixed_dq = host.Blocks(128, 32, 8, 2)
        fixed_dkdv = host.Blocks(32, 64, 8, 2)
        pick("retention_bwd_dkdv", d, lambda e: host.backward(
            q, k, v, a, pos, seg, out, lse, d_out, scale, fixed_dq, blocks(e)))
        pick("retention_bwd_dq", d, lambda e: host.backward(
            q, k, v, a, pos, seg, out, lse, d_out, scale, blocks(e), fixed_dkdv))
        # The delta kernel reads dO and O once (memory-bound): its largest tile that fits.
        fits, _ = compile_cubins.candidates("retention_bwd_delta", arch, d, args.jobs)
        chosen.setdefault("retention_bwd_delta", {})[str(d)] = config(fits[0])
    a = -0.01 * torch.rand(b, hk, t, device="cuda")
    ds = torch.randn_like(a)
    pick("retention_sum_fwd", 0, lambda e: host.retention_sum(
        a, pos, seg, e["block_m"], e["num_warps"], e["num_stages"]))
    pick("retention_sum_bwd", 0, lambda e: host.retention_sum_backward(
        a, pos, seg, ds, e["block_m"], e["num_warps"], e["num_stages"]))

    for d in compile_cubins.HEAD_DIMS:
        rows, slots = 32, 4096
        cache_k = torch.zeros(rows, hk, slots, d, device="cuda", dtype=torch.bfloat16)
        cache_v = torch.zeros_like(cache_k)
        cache_pos = torch.full((rows, hk, slots), -1, dtype=torch.int64, device="cuda")
        cache_stat = torch.zeros(rows, hk, slots, device="cuda")
        length = torch.zeros(rows, hk, dtype=torch.int64, device="cuda")
        new_k = torch.randn(rows, hk, 1, d, device="cuda", dtype=torch.bfloat16)
        new_v = torch.randn_like(new_k)
        new_pos = torch.zeros(rows, 1, dtype=torch.int64, device="cuda")
        new_stat = torch.zeros(rows, hk, 1, device="cuda")

        def run(e):
            length.fill_(slots // 2)
            cache_append_host.append(cache_k, cache_v, cache_pos, cache_stat, length, new_k, new_v,
                                     new_pos, new_stat, e["block_m"], e["num_warps"])
        pick("cache_append", d, run)

    for d in compile_cubins.HEAD_DIMS:
        rows, chunk, entries = 2, 512, 8192
        q = torch.randn(rows, h, chunk, d, device="cuda", dtype=torch.bfloat16)
        keys = torch.randn(rows, hk, entries, d, device="cuda", dtype=torch.bfloat16)
        values = torch.randn_like(keys)
        key_pos = torch.arange(entries, device="cuda").expand(rows, hk, entries).contiguous()
        lengths = torch.full((rows, hk), entries, dtype=torch.int64, device="cuda")
        q_pos = torch.arange(entries - chunk, entries, device="cuda").expand(rows, chunk)
        q_pos = q_pos.contiguous()
        pick("cache_attention", d, lambda e: cache_attention_host.attend(
            q, keys, values, key_pos, lengths, q_pos, d ** -0.5, e["block_m"], e["block_n"],
            e["num_warps"], e["num_stages"]))

    configs[f"sm_{arch}"] = chosen
    with open(args.out, "w") as f:
        f.write(compile_cubins.format_configs(configs))
    print(f"tune.py: sm_{arch} ({torch.cuda.get_device_name()}), T={t}, "
          f"{time.time() - start:.0f} s -> {args.out}")


if __name__ == "__main__":
    main()
