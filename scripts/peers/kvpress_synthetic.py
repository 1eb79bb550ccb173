#!/usr/bin/env python3
"""The demo's held-out synthetic tasks through NVIDIA kvpress, next to retain's
`eval synthetic --question-mode keep` predictions of the same model and token ids.

kvpress compresses the context once after its prefill and keeps the question and generated tokens
on top, which is retain's `--question-mode keep`. This driver (ours, not kvpress's pipeline)
builds the same prompt text retain builds, tokenizes it the way retain does (the model's
SentencePiece file: BOS where tokenizer_config.json adds one, then the ids; its tokenizer.json:
the post-processor's prefix, then the ids, through the `tokenizers` library; split where the last
question starts), runs the context under the press, then the question and greedy decoding
without it, and prints per (policy, budget): exact match of both tools and how many answers are
identical. The prompts must be as long as retain's records say and the full cache must agree
everywhere; where the definitions differ the answers do: retain's snapkv pools votes with a max
by default; `snapkv:pool=avg,kernel=5` is kvpress's SnapKV. kvpress prefills the whole context
before compressing: run retain's keep mode with a --chunk longer than the context to compare like
with like. A model with a tokenizer.json (SmolLM2) works the same way.

Install kvpress outside the project's venv (it needs transformers < 5.3):
  pip install --target /tmp/kvpress-peer --no-deps kvpress==0.5.5 transformers==5.2.0 \\
      'tokenizers>=0.22,<0.23' huggingface_hub httpx httpcore anyio sniffio h11 certifi idna \\
      cachetools fire termcolor protobuf requests urllib3 charset_normalizer hf_xet
  retain eval synthetic --config recipes/demo/eval.yaml --model recipes/demo/base \\
      --data runs/demo/data/heldout.jsonl --gates-dir runs/demo --out runs/keep --question-mode keep
  PYTHONPATH=/tmp/kvpress-peer python scripts/peers/kvpress_synthetic.py --model recipes/demo/base \\
      --data runs/demo/data/heldout.jsonl --retain runs/keep/predictions.jsonl
"""
import argparse
import json
import math
import os
import sys
import time
import types

# kvpress imports `datasets` for two presses' calibration downloads, which this driver never uses.
_datasets = types.ModuleType("datasets")
_datasets.load_dataset = lambda *a, **k: (_ for _ in ()).throw(  # noqa: E731
    RuntimeError("datasets is not installed (kvpress calibration presses are not used here)"))
sys.modules.setdefault("datasets", _datasets)

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, DynamicCache  # noqa: E402

import kvpress  # noqa: E402


def synthetic_prompt(example, turn):
    """retain's data/synthetic.cpp synthetic_prompt."""
    prompt = example["context"] + "\n"
    for t in range(turn + 1):
        question, answer = example["turns"][t]["question"], example["turns"][t]["answer"]
        prompt += "\nQuestion: " + question + "\nAnswer:"
        if t < turn:
            prompt += " " + answer
    return prompt


def first_line_trimmed(text):
    line = text.split("\n", 1)[0]
    return line.strip()


class SentencePieceIds:
    """retain's SentencePieceTokenizer as the driver needs it: BOS where tokenizer_config.json's
    add_bos_token says so (true when it is absent, as transformers' LlamaTokenizer), then the
    text's pieces. The demo's base says false: a BOS put there by the driver shifted every position
    by one, which the full cache shrugged off (402/402 answers alike) but eviction did not."""

    def __init__(self, model_dir):
        import sentencepiece

        self.sp = sentencepiece.SentencePieceProcessor(model_file=f"{model_dir}/tokenizer.model")
        tc_path = f"{model_dir}/tokenizer_config.json"
        add_bos = True
        if os.path.exists(tc_path):
            add_bos = json.load(open(tc_path)).get("add_bos_token", True)
        self.prefix = [self.sp.bos_id()] if add_bos else []
        self.eos = {self.sp.eos_id()}

    def encode(self, text):
        return self.sp.encode(text)

    def decode(self, ids):
        return self.sp.decode(ids)


class TokenizerJsonIds:
    """retain's HfTokenizer as the driver needs it: encode_prompt is the post-processor's prefix
    (the special tokens its template puts before the text) and the text's ids without them;
    generation stops at config.json's EOS ids and the tokenizer's EOS, as retain's stop_ids."""

    def __init__(self, model_dir):
        from tokenizers import Tokenizer

        path = f"{model_dir}/tokenizer.json"
        self.tok = Tokenizer.from_file(path)
        post = json.load(open(path)).get("post_processor")
        self.prefix = []
        if post is not None and post.get("type") == "TemplateProcessing":
            for item in post["single"]:
                if "Sequence" in item:
                    break
                name = item["SpecialToken"]["id"]
                self.prefix += post["special_tokens"][name]["ids"]
        elif post is not None and post.get("type") not in ("ByteLevel",):
            sys.exit(f"{path}: post_processor {post.get('type')} is not handled by this driver "
                     "(TemplateProcessing, ByteLevel or none)")
        config = json.load(open(f"{model_dir}/config.json"))
        eos = config.get("eos_token_id")
        self.eos = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
        tc_path = f"{model_dir}/tokenizer_config.json"
        if os.path.exists(tc_path):
            token = json.load(open(tc_path)).get("eos_token")
            token = token.get("content") if isinstance(token, dict) else token
            if token is not None and self.tok.token_to_id(token) is not None:
                self.eos.add(self.tok.token_to_id(token))

    def encode(self, text):
        return self.tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids):
        return self.tok.decode(ids, skip_special_tokens=True)


def load_ids(model_dir):
    if os.path.exists(f"{model_dir}/tokenizer.json"):
        return TokenizerJsonIds(model_dir)
    return SentencePieceIds(model_dir)


def resolve_budget(budget, tokens):
    """retain's eval/cache_factory.cpp resolve_budget."""
    if budget >= 1:
        return int(budget)
    return max(1, int(math.floor(budget * tokens + 0.5)))


def make_press(spec, keep, context_len):
    """kvpress's press for a retain policy spec, keeping `keep` of `context_len` entries."""
    name, _, opts = spec.partition(":")
    options = dict(kv.split("=") for kv in opts.split(",") if kv)
    # kvpress keeps int(n * (1 - ratio)) entries: aim half an entry above `keep` so that rounding
    # in floating point cannot drop one.
    ratio = 1.0 - (keep + 0.5) / context_len
    if name == "streaming":
        sinks = int(options.get("sinks", min(4, keep // 4)))
        return kvpress.StreamingLLMPress(compression_ratio=ratio, n_sink=sinks)
    alloc = options.get("alloc", "uniform")
    if name == "knorm":
        press = kvpress.KnormPress(compression_ratio=ratio)
    elif name == "snapkv":
        # retain's defaults: window min(32, M/2), kernel 7; pool=avg is kvpress's definition.
        window = int(options.get("window", min(32, keep // 2)))
        kernel = int(options.get("kernel", 7))
        if alloc == "pyramid":
            # kvpress falls back to uniform SnapKV when M / beta < window; retain never does.
            return kvpress.PyramidKVPress(compression_ratio=ratio, window_size=window,
                                          kernel_size=kernel,
                                          beta=float(options.get("pyramid_beta", 20)))
        press = kvpress.SnapKVPress(compression_ratio=ratio, window_size=window, kernel_size=kernel)
    elif name == "expected_attention":
        press = kvpress.ExpectedAttentionPress(
            compression_ratio=ratio, n_sink=int(options.get("sinks", min(4, keep // 4))),
            n_future_positions=int(options.get("n_future", 512)),
            use_covariance=options.get("covariance", "on") == "on",
            use_vnorm=options.get("vnorm", "on") == "on")
    else:
        return None
    if alloc == "adakv":
        return kvpress.AdaKVPress(press, alpha_safeguard=float(options.get("safeguard", 0.2)))
    return press


@torch.inference_mode()
def answer(model, context_ids, question_ids, press, max_new_tokens, eos_ids):
    cache = DynamicCache()
    ctx = torch.tensor([context_ids])
    if press is not None:
        with press(model):
            model(input_ids=ctx, past_key_values=cache, use_cache=True)
    else:
        model(input_ids=ctx, past_key_values=cache, use_cache=True)
    start = len(context_ids)
    ids = torch.tensor([question_ids])
    out_tokens = []
    for _ in range(max_new_tokens):
        n = ids.shape[1]
        positions = torch.arange(start, start + n).unsqueeze(0)
        cache_len = cache.get_seq_length()
        logits = model(
            input_ids=ids,
            past_key_values=cache,
            position_ids=positions,
            cache_position=torch.arange(cache_len, cache_len + n),
            use_cache=True,
        ).logits
        token = int(logits[0, -1].argmax())
        out_tokens.append(token)
        if token in eos_ids:
            break
        start += n
        ids = torch.tensor([[token]])
    return out_tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="retain/HF model directory")
    ap.add_argument("--data", required=True, help="held-out tasks (retain synth's heldout.jsonl)")
    ap.add_argument("--retain", required=True,
                    help="predictions.jsonl of retain eval synthetic --question-mode keep")
    ap.add_argument("--policies", default="full,streaming,knorm,snapkv",
                    help="policy names to compare (retain specs are matched by name)")
    ap.add_argument("--max-new-tokens", type=int, default=12)
    ap.add_argument("--limit", type=int, default=0, help="examples (0: all)")
    ap.add_argument("--require-identical", default="",
                    help="comma-separated policy names whose every answer must equal retain's "
                         "(exit 1 otherwise; the full cache always must)")
    args = ap.parse_args()

    examples = {}
    with open(args.data) as f:
        for line in f:
            if line.strip():
                ex = json.loads(line)
                examples[ex["id"]] = ex
    wanted = set(args.policies.split(","))
    rows = []
    with open(args.retain) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                if r["policy"].split(":")[0] in wanted:
                    rows.append(r)
    if args.limit:
        ids = sorted(examples)[: args.limit]
        rows = [r for r in rows if r["id"] in ids]
    if not rows:
        sys.exit(f"no predictions of {sorted(wanted)} in {args.retain}")

    tok = load_ids(args.model)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    model.eval()

    cells = {}
    t0 = time.time()
    for r in rows:
        ex = examples[r["id"]]
        turn = r["turn"]
        text = synthetic_prompt(ex, turn)
        question = "\nQuestion: " + ex["turns"][turn]["question"]
        before = text[: text.rfind(question)]
        full_ids = tok.prefix + tok.encode(text)
        # The full cache can answer alike from slightly different ids (an extra BOS did, 402 of
        # 402): compare the prompt's length with retain's record before any answer.
        if "prompt_tokens" in r and r["prompt_tokens"] != len(full_ids):
            sys.exit(f"{r['id']} turn {turn}: the driver's prompt has {len(full_ids)} tokens, "
                     f"retain's {r['prompt_tokens']}: the inputs do not match")
        split = len(tok.prefix) + (len(tok.encode(before)) if before else 0)
        context_ids, question_ids = full_ids[:split], full_ids[split:]
        name = r["policy"].split(":")[0]
        press = None
        if name != "full":
            keep = resolve_budget(float(r["budget"]), len(context_ids))
            press = make_press(r["policy"], keep, len(context_ids))
        key = (r["policy"], json.dumps(r["budget"]))
        c = cells.setdefault(key, {"n": 0, "kv": 0, "retain": 0, "same": 0, "failed": 0})
        try:
            tokens = answer(model, context_ids, question_ids, press, args.max_new_tokens, tok.eos)
        except RuntimeError as e:
            # kvpress 0.5.5's PyramidKVPress leaves layers of different lengths, which the
            # question's attention mask (built for the first layer) then does not fit.
            c["failed"] += 1
            c.setdefault("error", str(e).splitlines()[0])
            continue
        if tokens and tokens[-1] in tok.eos:
            tokens = tokens[:-1]
        pred = first_line_trimmed(tok.decode(tokens))
        c["n"] += 1
        c["kv"] += pred == ex["turns"][turn]["answer"]
        c["retain"] += bool(r["correct"])
        c["same"] += pred == first_line_trimmed(r["pred"])
    elapsed = time.time() - t0

    width = max([40] + [len(policy) for policy, _ in cells])
    print(f"{'policy':<{width}} {'budget':>7} {'n':>4} {'EM kvpress':>11} {'EM retain':>10} "
          f"{'same answer':>12}")
    for (policy, budget), c in cells.items():
        n = c["n"]
        if n == 0:
            print(f"{policy:<{width}} {budget:>7} kvpress failed on all {c['failed']}: {c['error']}")
            continue
        print(f"{policy:<{width}} {budget:>7} {n:>4} {100 * c['kv'] / n:>11.1f} "
              f"{100 * c['retain'] / n:>10.1f} {c['same']:>7}/{n:<4}"
              + (f" (kvpress failed on {c['failed']} more)" if c["failed"] else ""))
    print(f"kvpress {kvpress.__version__ if hasattr(kvpress, '__version__') else ''}: "
          f"{len(rows)} answers in {elapsed:.1f} s (model loaded before)")
    # The same-run ratio: retain's scores.json says how long its sweep generated (model load and
    # set-up aside, like the time above); run it with the same --policy list for like with like.
    scores_file = os.path.join(os.path.dirname(os.path.abspath(args.retain)), "scores.json")
    run = json.load(open(scores_file)).get("run") if os.path.exists(scores_file) else None
    if run and run.get("generation_seconds", 0) > 0:
        ours = run["generated"] / run["generation_seconds"]
        theirs = len(rows) / elapsed
        print(f"retain: {run['generated']} answers in {run['generation_seconds']:.1f} s (batch "
              f"size {run['batch_size']}): {ours:.1f}/s; kvpress: {theirs:.1f}/s; retain / kvpress "
              f"= {ours / theirs:.2f}x")
    full = [c for (p, _), c in cells.items() if p.split(":")[0] == "full"]
    if full and any(c["same"] != c["n"] for c in full):
        sys.exit("the full cache differs between kvpress and retain: the inputs do not match")
    required = {name for name in args.require_identical.split(",") if name}
    unknown = required - {p.split(":")[0] for p, _ in cells}
    if unknown:
        sys.exit(f"--require-identical: no predictions of {sorted(unknown)} were compared")
    differing = [f"{p} at {b}: {c['same']}/{c['n']}" for (p, b), c in cells.items()
                 if p.split(":")[0] in required and (c["same"] != c["n"] or c["failed"])]
    if differing:
        sys.exit("answers differ from kvpress's: " + "; ".join(differing))


if __name__ == "__main__":
    main()
