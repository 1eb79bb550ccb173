#!/usr/bin/env python3
"""Where a base looks when it answers a kv question (docs/demo-base.md, "Where the lookup fails").

For the first turn of each kv example of a `retain synth` heldout.jsonl, builds the harness's
prompt (the context, "\\n", then "\\nQuestion: Q\\nAnswer:": data/synthetic.cpp, synthetic_prompt),
runs the HF model with eager attention and sums, for every head of every layer, the attention
from the prompt's last token (where the answer is predicted) over these parts of the prompt:
  R-key R-sep R-val R-dot   the asked fact "Key hj: value 79." ("▁hj", ":▁value", "▁79", ".")
  O-key O-sep O-val O-dot   the same tokens of the other facts (summed over them)
  question                  the question's tokens;  filler  everything else
(the demo's tokenizer holds ": value" as one piece: base-data.yaml's tokenizer-pieces). It prints
the parts that get >= 2% of a head's mass, averaged over the prompts, and how often the greedy
first token is the answer. A model that looks its answer up puts its mass on R-val or R-dot.
  python3 scripts/lookup_probe.py --model recipes/demo/base --data heldout.jsonl [--limit 40]
"""
import argparse
import json
import re
import sys
from collections import Counter

import sentencepiece as spm
import torch
from transformers import LlamaForCausalLM

PARTS = ("key", "sep", "val", "dot")  # a fact's tokens from its key on


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True, help="an HF Llama directory with tokenizer.model")
    p.add_argument("--data", required=True, help="a retain synth heldout.jsonl")
    p.add_argument("--limit", type=int, default=40, help="kv prompts to probe")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    sp = spm.SentencePieceProcessor(model_file=f"{args.model}/tokenizer.model")
    separator = sp.piece_to_id(":▁value")
    if separator == sp.unk_id():
        sys.exit(f"{args.model}/tokenizer.model: no piece ':▁value' (the demo's tokenizer has one)")
    bos = [sp.bos_id()]
    try:
        with open(f"{args.model}/tokenizer_config.json") as f:
            if not json.load(f).get("add_bos_token", True):
                bos = []
    except FileNotFoundError:
        pass
    model = LlamaForCausalLM.from_pretrained(args.model, attn_implementation="eager").eval()
    mass, correct, probed = {}, 0, 0
    with open(args.data) as f:
        for number, line in enumerate(f, 1):
            example = json.loads(line)
            if example.get("task") != "kv":
                continue
            try:
                context = example["context"]
                question, answer = example["turns"][0]["question"], example["turns"][0]["answer"]
            except (KeyError, IndexError) as e:
                sys.exit(f"{args.data}:{number}: expected a synth example with a context and "
                         f"turns: {e!r}")
            asked = re.search(r"key (\w+)\?", question).group(1)
            context_ids = bos + sp.encode(context)
            ids = bos + sp.encode(context + "\n" + f"\nQuestion: {question}\nAnswer:")
            part = ["filler"] * len(context_ids) + ["question"] * (len(ids) - len(context_ids))
            for i in range(1, len(context_ids) - 1):
                if ids[i] == separator:
                    side = "R" if sp.id_to_piece(ids[i - 1]).lstrip("▁") == asked else "O"
                    for offset, name in zip((-1, 0, 1, 2), PARTS):
                        if i + offset < len(context_ids):
                            part[i + offset] = f"{side}-{name}"
            with torch.no_grad():
                out = model(torch.tensor([ids]), output_attentions=True)
            for layer, attention in enumerate(out.attentions):
                for head, row in enumerate(attention[0, :, -1].tolist()):
                    sums = mass.setdefault((layer, head), Counter())
                    for name, weight in zip(part, row):
                        sums[name] += weight
            guess = sp.decode([out.logits[0, -1].argmax().item()]).strip()
            correct += guess == answer.strip()
            probed += 1
            if probed >= args.limit:
                break
    if not probed:
        sys.exit(f"{args.data}: no kv example")
    print(f"{probed} kv prompts, first token right {100 * correct / probed:.0f}%")
    for (layer, head), sums in sorted(mass.items()):
        parts = sorted(sums.items(), key=lambda kv: -kv[1])
        print(f"layer {layer} head {head}: " + "  ".join(
            f"{name} {weight / probed:.2f}" for name, weight in parts if weight / probed >= 0.02))


if __name__ == "__main__":
    main()
