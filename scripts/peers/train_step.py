#!/usr/bin/env python3
"""retain bench train beside a gate-training step written the way the official TrimKV code does it.

The Python step: the frozen HF model (transformers, `attn_implementation="sdpa"`) runs the
teacher under no_grad; the student is the same model with every attention layer replaced, through
transformers' AttentionInterface, by flex attention whose score_mod adds the retention bias
(i - j) * log beta_j (log beta from each layer's gate MLP on the layer's normed input, captured by
a forward pre-hook); forward KL(teacher || student) over the vocabulary, averaged over the
predictions of a next token (every position but the last: a causal LM's shifted labels), plus
DBTrimKV's global capacity loss; backward into the gates only; AdamW (lr 1e-3). Same model
directory, ids, gate architecture and initial gate weights (drawn in retain's order from the same
seed) as `retain bench train --model DIR`, so after the same number of steps both losses agree
(printed) and the step time and peak memory can be put side by side.

flex attention is compiled with torch.compile where that works (GPU). torch 2.11 has no flex
attention backward on the CPU (compiled or not), so there the script computes the same scores
with SDPA and the bias as an explicit (B, H, T, T) mask (what flex's unfused path materialises
too); on a GPU, if compiling fails, it says so and falls back to uncompiled flex, then to that.
Model load and compilation are not timed (the first --warmup steps absorb them).

  python scripts/peers/train_step.py --retain build/retain --model recipes/demo/base --seq 1024
"""
import argparse
import json
import math
import resource
import subprocess
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--retain", required=True, help="the retain binary")
    ap.add_argument("--model", required=True, help="HF model directory (safetensors)")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--gates", default="mlp3", choices=["mlp2", "mlp3"])
    ap.add_argument("--gate-width", type=int, default=512)
    ap.add_argument("--memory", type=float, default=128, help="the capacity loss's budget M")
    ap.add_argument("--checkpointing", default="true", choices=["true", "false"],
                    help="retain's activation checkpointing (the Python step keeps activations)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--attention", default="wmma", choices=["wmma", "triton", "reference"],
                    help="retain's retention kernels (bench train --attention)")
    ap.add_argument("--json", help="also write every figure here")
    args = ap.parse_args()
    if args.seq < 2 or args.batch < 1 or args.iters < 1 or args.warmup < 0:
        ap.error("--seq >= 2, --batch >= 1, --iters >= 1 and --warmup >= 0 are required")
    return args


def run_retain(args):
    cmd = [args.retain, "bench", "train", "--model", args.model, "--seq", str(args.seq),
           "--batch", str(args.batch), "--gates", args.gates, "--gate-width", str(args.gate_width),
           "--memory", str(args.memory), "--checkpointing", args.checkpointing,
           "--iters", str(args.iters), "--warmup", str(args.warmup), "--device", args.device,
           "--dtype", args.dtype, "--threads", str(args.threads), "--seed", str(args.seed),
           "--attention", args.attention, "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    if done.returncode != 0:
        sys.exit(f"retain failed ({' '.join(cmd)}):\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class Gates:
    """retain's GateBank: per layer linear1 (+ linear2 for mlp3) with the model's activation, a
    projection to one logit per KV head tied across layers, log sigmoid. Initialised in retain's
    order from a CPU generator seeded like retain's (seed + 1)."""

    def __init__(self, torch, config, arch, width, device, seed, bias_init=18.0, init_std=0.02):
        gen = torch.Generator().manual_seed(seed)
        d, hk = config.hidden_size, config.num_key_value_heads

        def normal(*shape):
            return torch.normal(0.0, init_std, shape, generator=gen).to(device).requires_grad_()

        def zeros(*shape):
            return torch.zeros(shape, device=device).requires_grad_()

        self.w_out = normal(hk, width)
        self.bias = torch.full((hk,), bias_init, device=device).requires_grad_()
        self.layers = []
        for _ in range(config.num_hidden_layers):
            layer = {"w1": normal(width, d), "b1": zeros(width)}
            if arch == "mlp3":
                layer.update({"w2": normal(width, width), "b2": zeros(width)})
            self.layers.append(layer)
        act = getattr(config, "hidden_act", "silu")
        self.act = {"silu": torch.nn.functional.silu, "gelu": torch.nn.functional.gelu}[act]
        self.torch = torch

    def parameters(self):
        out = [p for layer in self.layers for p in layer.values()]
        return out + [self.w_out, self.bias]

    def log_beta(self, layer, hidden):  # (B, T, d) -> (B, Hk, T) fp32
        F = self.torch.nn.functional
        g = self.layers[layer]
        h = self.act(F.linear(hidden.float(), g["w1"], g["b1"]))
        if "w2" in g:
            h = self.act(F.linear(h, g["w2"], g["b2"]))
        return F.logsigmoid(F.linear(h, self.w_out) + self.bias).transpose(1, 2)


def main():
    args = parse_args()
    import warnings

    import torch
    import transformers

    # flex attention warns that it runs unfused without torch.compile: the fallback is reported.
    warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    from transformers import AttentionInterface, AutoModelForCausalLM

    transformers.utils.logging.disable_progress_bar()

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    ours = run_retain(args)  # first: its peak RSS is its own process's

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[args.dtype]
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype,
                                                 attn_implementation="sdpa").to(args.device)
    model.eval().requires_grad_(False)
    config = model.config
    gates = Gates(torch, config, args.gates, args.gate_width, args.device, args.seed + 1)
    optimizer = torch.optim.AdamW(gates.parameters(), lr=1e-3)
    ids = torch.randint(0, config.vocab_size, (args.batch, args.seq),
                        generator=torch.Generator().manual_seed(args.seed)).to(args.device)
    T = args.seq
    block_mask = create_block_mask(lambda b, h, q, k: q >= k, None, None, T, T, device=args.device)
    log_betas = {}

    def capture(module, _args, kwargs):  # the layer's normed input drives its gate
        log_betas[module.layer_idx] = gates.log_beta(module.layer_idx, kwargs["hidden_states"])

    hooks = [layer.self_attn.register_forward_pre_hook(capture, with_kwargs=True)
             for layer in model.model.layers]
    group = config.num_attention_heads // config.num_key_value_heads
    # torch 2.11 has no flex attention backward on the CPU (compiled or not): dense from the start.
    state = {"flex": torch.compile(flex_attention, dynamic=False),
             "mode": "dense" if args.device == "cpu" else "compiled"}

    def retention_attention(module, query, key, value, attention_mask, scaling=None, **kwargs):
        lb = log_betas[module.layer_idx]

        def score_mod(score, b, h, q_idx, kv_idx):
            return score + (q_idx - kv_idx).to(score.dtype) * lb[b, h // group, kv_idx]

        def run(fn):
            return fn(query, key, value, score_mod=score_mod, block_mask=block_mask,
                      scale=scaling, enable_gqa=True)

        def dense():  # the same scores, the bias as an explicit (B, H, T, T) mask
            i = torch.arange(T, device=query.device)
            bias = (i[:, None] - i[None, :]).to(torch.float32) * \
                lb.repeat_interleave(group, 1)[:, :, None, :]
            bias = bias.masked_fill(i[:, None] < i[None, :], float("-inf")).to(query.dtype)
            return torch.nn.functional.scaled_dot_product_attention(
                query, key, value, attn_mask=bias, scale=scaling, enable_gqa=True)

        while True:
            try:
                out = dense() if state["mode"] == "dense" else run(state["flex"])
                break
            except Exception as e:  # noqa: BLE001: a failing kernel decides the fallback
                fallback = {"compiled": "uncompiled", "uncompiled": "dense"}.get(state["mode"])
                if fallback is None:
                    raise
                print(f"flex attention ({state['mode']}) failed on {args.device}: "
                      f"{type(e).__name__}: {str(e).splitlines()[0][:160]}; trying {fallback}",
                      file=sys.stderr)
                state.update(flex=flex_attention, mode=fallback)
        return out.transpose(1, 2).contiguous(), None

    AttentionInterface.register("retention_flex", retention_attention)

    def step():
        times = {}
        t0 = time.perf_counter()
        with torch.no_grad():
            model.config._attn_implementation = "sdpa"
            teacher = model(ids).logits.float()
        t1 = time.perf_counter()
        model.config._attn_implementation = "retention_flex"
        student = model(ids).logits.float()
        t2 = time.perf_counter()
        logp_t = torch.log_softmax(teacher, -1)
        # The predictions of a next token: every position but the last (transformers' shifted
        # labels), as retain's loss_targets for one whole-row document.
        logp_s = torch.log_softmax(student[:, :-1], -1)
        kl = (logp_t[:, :-1].exp() * (logp_t[:, :-1] - logp_s)).sum(-1).mean()
        # DBTrimKV's global capacity loss: S_t = sum_{j <= t} beta_j^(t - j) per layer and head,
        # summed; relu(sum - M L Hk) / max((t - M) L Hk, 1), averaged over the tokens above it.
        pos = torch.arange(T, device=ids.device, dtype=torch.float32)
        dist = (pos[:, None] - pos[None, :]).clamp_min(0)
        causal = pos[:, None] >= pos[None, :]
        total = 0
        for layer in range(config.num_hidden_layers):
            lb = log_betas[layer]  # (B, Hk, T)
            total = total + (torch.exp(dist * lb[:, :, None, :]) * causal).sum(-1).sum(1)
        scale = config.num_hidden_layers * config.num_key_value_heads
        over = torch.relu((total - args.memory * scale) /
                          ((pos - args.memory) * scale).clamp_min(1.0))
        capacity = over.sum() / max(int((over > 0).sum()), 1)
        loss = kl + capacity
        t3 = time.perf_counter()
        optimizer.zero_grad()
        loss.backward()
        t4 = time.perf_counter()
        optimizer.step()
        t5 = time.perf_counter()
        times.update(teacher_forward=t1 - t0, student_forward=t2 - t1, losses=t3 - t2,
                     backward=t4 - t3, optimizer=t5 - t4, step=t5 - t0)
        return loss.item(), times

    steps = []
    loss = math.nan
    for it in range(args.warmup + args.iters):
        loss, times = step()
        if it >= args.warmup:
            steps.append(times)
    for h in hooks:
        h.remove()

    def median(key):
        values = sorted(s[key] for s in steps)
        return values[len(values) // 2]

    peer_rate = args.batch * args.seq / median("step")
    peer_peak = (torch.cuda.max_memory_allocated() if args.device.startswith("cuda")
                 else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    row = {"retain": {k: ours[k] for k in ("tokens_per_s", "step_ms", "peak_memory_bytes",
                                            "loss", "time_ms")},
           "python": {"tokens_per_s": peer_rate, "step_ms": median("step") * 1e3,
                      "peak_memory_bytes": peer_peak, "loss": loss,
                      "attention": state["mode"],
                      "time_ms": {k: median(k) * 1e3 for k in
                                  ("teacher_forward", "student_forward", "losses", "backward",
                                   "optimizer")}},
           }
    row["speed_ratio"] = ours["tokens_per_s"] / peer_rate
    row["memory_ratio"] = ours["peak_memory_bytes"] / peer_peak
    print(f"bench train, side by side: {args.model}, batch {args.batch} x {args.seq} tokens, "
          f"gates {args.gates} width {args.gate_width}, M {args.memory:g}, {args.dtype} on "
          f"{args.device}, {torch.get_num_threads()} threads, {args.iters} timed steps after "
          f"{args.warmup}; torch {torch.__version__}, transformers {transformers.__version__}")
    print(f"{'tool':<34} {'tokens/s':>10} {'step ms':>10} {'peak memory':>14} {'loss':>12}")
    print(f"{'retain (checkpointing ' + args.checkpointing + ')':<34} "
          f"{ours['tokens_per_s']:>10.1f} {ours['step_ms']:>10.1f} "
          f"{ours['peak_memory_bytes'] / 1e9:>11.2f} GB {ours['loss']:>12.6f}")
    kind = {"compiled": "flex, compiled", "uncompiled": "flex, uncompiled",
            "dense": "SDPA + dense bias"}[state["mode"]]
    print(f"{'python step (' + kind + ')':<34} {peer_rate:>10.1f} {median('step') * 1e3:>10.1f} "
          f"{peer_peak / 1e9:>11.2f} GB {loss:>12.6f}")
    print(f"retain / python: {row['speed_ratio']:.2f}x tokens/s, {row['memory_ratio']:.2f}x peak "
          f"memory; loss after {args.warmup + args.iters} steps differs by "
          f"{abs(ours['loss'] - loss):.2e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"settings": vars(args), "row": row}, f, indent=2)


if __name__ == "__main__":
    main()
