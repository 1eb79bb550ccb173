#!/usr/bin/env python3
"""RULER prompts through NVIDIA kvpress, next to retain's `eval ruler --question-mode keep` answers,
on the very token ids retain read.

retain makes RULER's haystacks, needles and chat-rendered prompts itself (data/ruler.cpp, seeded),
so rather than rebuild them this driver reads the ids retain wrote with `--write-prompts`
(DIR/prompts.jsonl: each prompt's ids, where its context ends, the ids generation stops at and its
token limit). For each of retain's (policy, budget) records it runs the context under kvpress's
press for that policy, then the question and greedy decoding on top without it (kvpress's
semantics, retain's keep mode), and compares the answers after RULER's post-processing (strip,
control characters to newlines) and its string match (every reference for the needle tasks, any
one for qa), as in RULER's evaluate.py and retain's data/ruler.cpp. The full cache must agree
everywhere; where the definitions differ the answers do (retain's snapkv pools votes with a max by
default: `snapkv:pool=avg,kernel=5` is kvpress's SnapKV), and equal scores may be kept differently
(knorm's layer-0 key norms tie exactly: `--ties later` selects as retain does). kvpress reads the
whole context before compressing it: the retain run must too (`--chunk 0`), which this driver
checks.

  retain eval ruler --model M --question-mode keep --chunk 0 --write-prompts \\
      --policy full,streaming,knorm,snapkv:pool=avg,kernel=5 --budget 0.1,0.25 --out runs/keep
  PYTHONPATH=$(bash scripts/peers/install-kvpress.sh) python scripts/peers/kvpress_ruler.py \\
      --model M --run runs/keep
"""
import argparse
import json
import os
import sys
import time

from kvpress_common import (add_ties_flag, answer_or_fail, load_ids, load_model, new_cell,
                            press_for, read_jsonl, report)


def ruler_postprocess(text):
    """RULER's postprocess_pred: strip, every control character to a newline, strip again."""
    text = text.strip()
    text = "".join("\n" if ord(ch) < 0x20 else ch for ch in text)
    return text.strip()


def ruler_string_match(pred, references, every):
    """RULER's string_match_all (every=True: the share of references found) or string_match_part
    (any one found), case-insensitive."""
    found = [ref.lower() in pred.lower() for ref in references]
    if not references:
        return 0.0
    return sum(found) / len(references) if every else float(any(found))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="the HF model directory retain ran")
    ap.add_argument("--run", required=True,
                    help="retain's eval ruler --question-mode keep --write-prompts directory")
    ap.add_argument("--policies", default="full,streaming,knorm,snapkv",
                    help="policy names to compare (retain specs are matched by name)")
    ap.add_argument("--limit", type=int, default=0,
                    help="the first N samples of each task and length (0: all)")
    add_ties_flag(ap)
    ap.add_argument("--require-identical", default="",
                    help="comma-separated policy names whose every answer must equal retain's "
                         "(exit 1 otherwise; the full cache always must)")
    args = ap.parse_args()

    prompts_file = os.path.join(args.run, "prompts.jsonl")
    if not os.path.exists(prompts_file):
        sys.exit(f"{prompts_file} is missing: rerun the retain sweep with --write-prompts (a "
                 "finished sweep only writes the file)")
    config_file = os.path.join(args.run, "config.yaml")
    config = json.load(open(config_file))  # retain writes its resolved config as JSON
    if config.get("benchmark") != "ruler":
        sys.exit(f"{config_file}: benchmark {config.get('benchmark')!r}, expected 'ruler'")
    chunk = config.get("chunk", 0)
    prompts = {}
    for p in read_jsonl(prompts_file, "a prompt"):
        prompts[p["unit"]] = p
        if p["context_tokens"] <= 0:
            sys.exit(f"{prompts_file}: {p['unit']} has no context of its own: kvpress compresses "
                     f"the context before the question, retain's --question-mode keep (this run "
                     f"is {config.get('question_mode')!r})")
        if chunk > 0 and p["context_tokens"] > chunk:
            sys.exit(f"{config_file}: --chunk {chunk} is shorter than {p['unit']}'s context of "
                     f"{p['context_tokens']} tokens: retain compressed it after each chunk, kvpress "
                     "after reading it whole; rerun retain with --chunk 0")

    wanted = set(args.policies.split(","))
    predictions_file = os.path.join(args.run, "predictions.jsonl")
    rows = [r for r in read_jsonl(predictions_file, "a prediction")
            if r["policy"].split(":")[0] in wanted]
    if args.limit:
        rows = [r for r in rows if int(r["id"].rsplit("-", 1)[1]) < args.limit]
    if not rows:
        sys.exit(f"no predictions of {sorted(wanted)} in {predictions_file}")
    for r in rows:
        p = prompts.get(r["id"])
        if p is None:
            sys.exit(f"{predictions_file}: {r['id']} has no prompt in {prompts_file}")
        if r["prompt_tokens"] != len(p["prompt_ids"]):
            sys.exit(f"{r['id']}: {prompts_file} holds {len(p['prompt_ids'])} ids, the record "
                     f"says retain read {r['prompt_tokens']}: the inputs do not match")

    tok = load_ids(args.model)
    model = load_model(args.model)
    cells = {}
    t0 = time.time()
    for r in rows:
        p = prompts[r["id"]]
        split = p["context_tokens"]
        context_ids, question_ids = p["prompt_ids"][:split], p["prompt_ids"][split:]
        c = new_cell(cells, r["policy"], r["budget"])
        tokens = answer_or_fail(model, context_ids, question_ids,
                                press_for(r["policy"], r["budget"], len(context_ids), args.ties),
                                p["max_new_tokens"], set(p["stop_ids"]), c)
        if tokens is None:
            continue
        pred = ruler_postprocess(tok.decode(tokens))
        c["n"] += 1
        c["kv"] += ruler_string_match(pred, r["outputs"], not r["task"].startswith("qa"))
        c["retain"] += r["score"]
        c["same"] += pred == r["pred"]
    elapsed = time.time() - t0
    report(cells, len(rows), elapsed, os.path.join(args.run, "scores.json"),
           args.require_identical, score_name="score")


if __name__ == "__main__":
    main()
