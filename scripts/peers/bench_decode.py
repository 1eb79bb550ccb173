#!/usr/bin/env python3
"""retain bench decode beside HF transformers `generate` and NVIDIA kvpress, same run.

One table: for each pair, retain's prefill and decode tokens/s, the peer's, and retain / peer.
Both sides get the same model directory, the same prompt ids (written to a file retain reads with
`bench decode --prompts-file`), the same thread count, batch, and number of new tokens:

  hf         HF transformers `generate` (greedy, full DynamicCache, attn_implementation="sdpa",
             its fast path) vs retain's full cache; the greedy tokens must agree.
  snapkv     kvpress SnapKVPress vs retain `snapkv:pool=avg` (kvpress's definition), window
             min(32, M/2), kernel 5.
  streaming  kvpress StreamingLLMPress vs retain `streaming` (sinks min(4, M/4)).
  knorm      kvpress KnormPress vs retain `knorm`.

Definitions differ where the tools do: kvpress compresses the context once after one full
prefill and then decodes with the cache growing from M; retain's full cache reads the prompt in
one step as HF does, its eviction policies in --chunk steps with at most M + buffer entries per head (+ chunk while a chunk is read) and cuts back to
M whenever a head exceeds M + buffer (default buffer 128), while decoding too. The work per
decoded token is therefore comparable (M to M + 128 entries per head against M to M + N), and
retain's peak memory is bounded by M + buffer + chunk where kvpress's is the whole prompt.

Timing, for both tools: one warm-up generation (2 tokens), then the prefill time is a
generation of 1 token (prefill + the first token), and the decode rate is
batch x (N - 1) / (time of an N-token generation - that prefill time). Python start-up and model
load are not counted on either side. Each side runs --repeat times, alternating with the other,
and the median rate is printed.

kvpress needs transformers < 5.3; install it outside the project's venv and put it first on
PYTHONPATH (its transformers then also runs the hf peer; the versions are printed):
  pip install --target /tmp/kvpress-peer --no-deps kvpress==0.5.5 transformers==5.2.0 \\
      'tokenizers>=0.22,<0.23' 'huggingface_hub>=1.3,<2' httpx httpcore anyio sniffio h11 certifi \\
      idna cachetools fire termcolor protobuf requests urllib3 charset_normalizer hf_xet
  PYTHONPATH=/tmp/kvpress-peer python scripts/peers/bench_decode.py --retain build/retain \\
      --model recipes/demo/base --batch 4 --context 2048 --new-tokens 128 --budget 256 --threads 2
Without kvpress, `--peers hf` runs with the venv's transformers alone.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import types


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--retain", required=True, help="the retain binary")
    ap.add_argument("--model", required=True, help="HF model directory (safetensors)")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--context", type=int, default=2048, help="prompt tokens per row")
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--budget", type=int, default=256, help="entries per KV head (M)")
    ap.add_argument("--chunk", type=int, default=512, help="retain's prefill chunk")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads, both tools (0: default)")
    ap.add_argument("--device", default="cpu", help="cpu | cuda")
    ap.add_argument("--dtype", default="fp32", help="fp32 | bf16 | fp16")
    ap.add_argument("--seed", type=int, default=0, help="prompt ids")
    ap.add_argument("--peers", default="hf,snapkv,streaming,knorm")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each side, alternating; the median rate is reported")
    ap.add_argument("--json", help="also write every figure here")
    args = ap.parse_args()
    peers = [p for p in args.peers.split(",") if p]
    unknown = [p for p in peers if p not in ("hf", "snapkv", "streaming", "knorm")]
    if unknown:
        ap.error(f"--peers: unknown {unknown} (expected hf, snapkv, streaming, knorm)")
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    if args.new_tokens < 2:
        ap.error("--new-tokens must be >= 2 (the first comes from the prefill)")
    if args.budget < 2 or args.budget >= args.context:
        ap.error(f"--budget must be in [2, --context), found {args.budget}")
    args.peers = peers
    return args


def retain_spec(peer, budget):
    """The retain policy a peer is compared with."""
    if peer == "hf":
        return "full"
    if peer == "snapkv":
        return f"snapkv:pool=avg,kernel=5,window={min(32, budget // 2)}"
    return peer  # streaming, knorm: the same definitions and defaults


def run_retain(args, prompts_file, policy):
    cmd = [args.retain, "bench", "decode", "--model", args.model, "--prompts-file", prompts_file,
           "--new-tokens", str(args.new_tokens), "--budget", str(args.budget), "--policy", policy,
           # The full cache reads the whole prompt in one step, as HF does (chunks bound the
           # memory of the eviction policies only).
           "--chunk", str(0 if policy == "full" else args.chunk), "--device", args.device,
           "--dtype", args.dtype,
           "--threads", str(args.threads), "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        sys.exit(f"retain failed ({' '.join(cmd)}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def make_press(kvpress, peer, budget, context):
    # kvpress keeps int(n * (1 - ratio)) entries: aim half an entry above the budget so that
    # rounding cannot drop one.
    ratio = 1.0 - (budget + 0.5) / context
    if peer == "snapkv":
        return kvpress.SnapKVPress(compression_ratio=ratio, window_size=min(32, budget // 2),
                                   kernel_size=5)
    if peer == "streaming":
        return kvpress.StreamingLLMPress(compression_ratio=ratio, n_sink=min(4, budget // 4))
    return kvpress.KnormPress(compression_ratio=ratio)


def time_peer(torch, model, ids, new_tokens, press):
    """(prefill seconds, decode seconds, tokens) of HF generate, under `press` when given."""
    def generate(n):
        kwargs = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False,
                      attention_mask=torch.ones_like(ids), pad_token_id=0)
        if press is None:
            out = model.generate(ids, **kwargs)
        else:
            with press(model):
                out = model.generate(ids, **kwargs)
        if ids.is_cuda:
            torch.cuda.synchronize()
        return out

    with torch.inference_mode():
        generate(2)  # warm-up
        start = time.perf_counter()
        generate(1)
        prefill = time.perf_counter() - start
        start = time.perf_counter()
        out = generate(new_tokens)
        total = time.perf_counter() - start
    # Two separate runs: on a loaded machine the 1-token run can take longer than the N-token
    # one, and the difference would be no time at all; such a run has no decode figure.
    decode = total - prefill
    if decode <= 0:
        sys.exit(f"decode timing: the {new_tokens}-token generation ({total:.4f} s) took no longer "
                 f"than the 1-token one ({prefill:.4f} s); the machine is too loaded to time "
                 f"(raise --new-tokens or --repeat)")
    return prefill, decode, out[:, ids.shape[1]:].tolist()


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def main():
    args = parse_args()
    kvpress = None
    if any(p != "hf" for p in args.peers):
        # kvpress imports `datasets` for two presses' calibration downloads, never used here.
        stub = types.ModuleType("datasets")
        stub.load_dataset = lambda *a, **k: (_ for _ in ()).throw(
            RuntimeError("datasets is not installed (kvpress calibration presses are unused)"))
        sys.modules.setdefault("datasets", stub)
        try:
            import kvpress  # noqa: F401
        except ImportError as e:
            sys.exit(f"kvpress is not importable ({e}); install it as this script's docstring "
                     "says, or pass --peers hf")
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.utils.logging.disable_progress_bar()

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype,
                                                 attn_implementation="sdpa").to(args.device)
    model.eval()
    vocab = model.config.vocab_size
    generator = torch.Generator().manual_seed(args.seed)
    # Ids from 3 up: no BOS/EOS/pad inside a prompt.
    ids = torch.randint(3, vocab, (args.batch, args.context), generator=generator)
    with tempfile.TemporaryDirectory() as tmp:
        prompts_file = os.path.join(tmp, "prompts.json")
        with open(prompts_file, "w") as f:
            json.dump(ids.tolist(), f)
        rows = []
        for peer in args.peers:
            policy = retain_spec(peer, args.budget)
            press = None if peer == "hf" else make_press(kvpress, peer, args.budget, args.context)
            # The two sides alternate, so a slow moment of the machine hits both.
            ours_runs, theirs_runs = [], []
            for _ in range(args.repeat):
                ours_runs.append(run_retain(args, prompts_file, policy))
                prefill, decode, tokens = time_peer(torch, model, ids.to(args.device),
                                                    args.new_tokens, press)
                steps = args.batch * (args.new_tokens - 1)
                theirs_runs.append({"prefill_tokens_per_s": args.batch * args.context / prefill,
                                    "decode_tokens_per_s": steps / decode})
            ours = dict(ours_runs[0])
            theirs = {}
            for key in ("prefill_tokens_per_s", "decode_tokens_per_s"):
                ours[key] = median([r[key] for r in ours_runs])
                theirs[key] = median([r[key] for r in theirs_runs])
            row = {"peer": "hf generate" if peer == "hf" else f"kvpress {peer}",
                   "retain_policy": policy,
                   "retain": {k: ours[k] for k in ("prefill_tokens_per_s", "decode_tokens_per_s",
                                                   "kv_bytes_peak", "decode_mode")},
                   "peer_figures": theirs,
                   "prefill_ratio": ours["prefill_tokens_per_s"] / theirs["prefill_tokens_per_s"],
                   "decode_ratio": ours["decode_tokens_per_s"] / theirs["decode_tokens_per_s"]}
            if peer == "hf":
                row["same_greedy_tokens"] = ours["tokens"] == tokens
                # How far each row agrees: in bf16 a near-tied argmax (common with random
                # weights) flips with the summation order, and the rows part from there.
                row["agreeing_prefix"] = [next((i for i, (a, b) in enumerate(zip(x, y)) if a != b),
                                               min(len(x), len(y)))
                                          for x, y in zip(ours["tokens"], tokens)]
            rows.append(row)

    print(f"bench decode, side by side: {args.model}, batch {args.batch} x {args.context} tokens, "
          f"{args.new_tokens} new, budget {args.budget}, {args.dtype} on {args.device}, "
          f"median of {args.repeat} alternating runs, "
          f"{torch.get_num_threads()} threads; torch {torch.__version__}, transformers "
          f"{transformers.__version__}" + (f", kvpress {kvpress.__version__}"
                                           if kvpress is not None and hasattr(kvpress, "__version__")
                                           else ""))
    header = (f"{'peer':<18} {'retain policy':<34} {'prefill tok/s':>14} {'peer':>10} {'ratio':>6} "
              f"{'decode tok/s':>13} {'peer':>10} {'ratio':>6}")
    print(header)
    for r in rows:
        print(f"{r['peer']:<18} {r['retain_policy']:<34} "
              f"{r['retain']['prefill_tokens_per_s']:>14.1f} "
              f"{r['peer_figures']['prefill_tokens_per_s']:>10.1f} {r['prefill_ratio']:>6.2f} "
              f"{r['retain']['decode_tokens_per_s']:>13.1f} "
              f"{r['peer_figures']['decode_tokens_per_s']:>10.1f} {r['decode_ratio']:>6.2f}")
    for r in rows:
        if "same_greedy_tokens" in r:
            print("greedy tokens, retain full vs hf generate: " +
                  ("identical" if r["same_greedy_tokens"] else
                   f"DIFFERENT; each row's first {r['agreeing_prefix']} of {args.new_tokens} agree"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": vars(args), "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
