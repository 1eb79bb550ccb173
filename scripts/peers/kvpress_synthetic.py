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
by default; `snapkv:pool=avg,kernel=5` is kvpress's SnapKV; equal scores may be kept differently
(knorm's layer-0 key norms tie exactly: `--ties later` selects as retain does). kvpress prefills
the whole context before compressing: run retain's keep mode with a --chunk longer than the
context to compare like with like. A model with a tokenizer.json (SmolLM2) works the same way.

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
import os
import sys
import time

from kvpress_common import (add_ties_flag, answer_or_fail, load_ids, load_model, new_cell,
                            press_for, read_jsonl, report)


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
    add_ties_flag(ap)
    ap.add_argument("--require-identical", default="",
                    help="comma-separated policy names whose every answer must equal retain's "
                         "(exit 1 otherwise; the full cache always must)")
    args = ap.parse_args()

    examples = {ex["id"]: ex for ex in read_jsonl(args.data, "a task")}
    wanted = set(args.policies.split(","))
    rows = [r for r in read_jsonl(args.retain, "a prediction")
            if r["policy"].split(":")[0] in wanted]
    if args.limit:
        ids = sorted(examples)[: args.limit]
        rows = [r for r in rows if r["id"] in ids]
    if not rows:
        sys.exit(f"no predictions of {sorted(wanted)} in {args.retain}")

    tok = load_ids(args.model)
    model = load_model(args.model)

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
        press = press_for(r["policy"], r["budget"], len(context_ids), args.ties)
        c = new_cell(cells, r["policy"], r["budget"])
        tokens = answer_or_fail(model, context_ids, question_ids, press, args.max_new_tokens,
                                tok.eos, c)
        if tokens is None:
            continue
        pred = first_line_trimmed(tok.decode(tokens))
        c["n"] += 1
        c["kv"] += pred == ex["turns"][turn]["answer"]
        c["retain"] += bool(r["correct"])
        c["same"] += pred == first_line_trimmed(r["pred"])
    elapsed = time.time() - t0

    scores_file = os.path.join(os.path.dirname(os.path.abspath(args.retain)), "scores.json")
    report(cells, len(rows), elapsed, scores_file, args.require_identical)


if __name__ == "__main__":
    main()
