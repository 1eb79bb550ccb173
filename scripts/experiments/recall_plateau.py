#!/usr/bin/env python3
"""How long the demo's tiny Llama takes to learn associative recall, outside retain.

The demo's base answers needles but not key-value questions (docs/demo-base.md). This script
trains the same model shape with HF transformers on generated recall documents and prints, every
--eval-every steps, the argmax accuracy of the answer tokens on 64 fixed documents next to what
picking a uniformly random value of the document scores ("chance"). It isolates the learning
problem from retain's data path, trainer and evaluation.

Formats (--format):
  template  the harness's wording: "Key hj: value 79. ... Question: What is the value of key
            hj?\\nAnswer: 79" (optionally with --filler sentences between the facts)
  pairs     Zoology's MQAR layout: "hj 79 db 25 ... hj 79 db 25" (the answer follows its key)
  offsets   the template's token offsets without its other words: facts "hj :_value 79", questions
            "hj ?\nAnswer: 79" (needs the pieces ":_value" and "?\nAnswer:", synth --tokenizer-pieces)
--periodic F replaces a fraction F of the documents by random key/value tokens repeating with
period 2 or 3, which a model predicts by reading the token 1 or 2 back (the first layer's half of
retrieval); every token after the first period is a label.

  python3 scripts/experiments/recall_plateau.py --tokenizer runs/demo/data/tokenizer.model \\
      --format pairs --facts 2:6 --periodic 0.5 --steps 9000
"""
import argparse
import json
import random
import re
import time

import sentencepiece as spm
import torch
from transformers import LlamaConfig, LlamaForCausalLM

KEY_ALPHABET = "bcdfghjklmnpqrst"  # recipes/demo/data.yaml: 2 consonants per key
KEYS = [a + b for a in KEY_ALPHABET for b in KEY_ALPHABET]
VALUES = range(10, 100)  # 2-digit values, one token each in the demo's tokenizers


def parse_range(text):
    lo, _, hi = text.partition(":")
    return int(lo), int(hi or lo)


class Documents:
    def __init__(self, args, sp):
        self.args, self.sp = args, sp
        self.key_ids = [self.piece("▁" + k) for k in KEYS]
        self.value_ids = {v: self.piece(f"▁{v}") for v in VALUES}
        self.filler = []
        if args.filler:
            text = open(args.filler_from).read()
            self.filler = sorted(set(re.findall(r"(?:A|An|The|Our|Every)[a-z ]+\.", text)))
            if not self.filler:
                raise SystemExit(f"{args.filler_from}: no filler sentences found")

    def piece(self, piece):
        i = self.sp.piece_to_id(piece)
        if i == self.sp.unk_id():
            raise SystemExit(f"{self.args.tokenizer} has no piece {piece!r}: keys and values must "
                             "be single pieces (the demo's tokenizer), and --format offsets also "
                             "needs synth --tokenizer-pieces ': value' and '?\\nAnswer:'")
        return i

    def make(self, rng, periodic_share):
        """(ids, label mask, chance of a uniform pick among the document's values)."""
        if rng.random() < periodic_share:
            period = rng.choice([2, 3])
            pool = self.key_ids + list(self.value_ids.values())
            base = [rng.choice(pool) for _ in range(period)]
            n = self.args.seq
            return [base[i % period] for i in range(n)], [0] * period + [1] * (n - period), None
        n = rng.randint(*parse_range(self.args.facts))
        keys = rng.sample(range(len(KEYS)), n)
        values = [rng.choice(VALUES) for _ in keys]
        asked = [rng.randrange(n) for _ in range(self.args.questions)]
        if self.args.format in ("pairs", "offsets"):
            fact_sep = [self.piece(":▁value")] if self.args.format == "offsets" else []
            question_sep = [self.piece("?\nAnswer:")] if self.args.format == "offsets" else []
            ids, mask = [], []
            for k, v in zip(keys, values):
                ids += [self.key_ids[k]] + fact_sep + [self.value_ids[v]]
                mask += [0] * (2 + len(fact_sep))
            for i in asked:
                ids += [self.key_ids[keys[i]]] + question_sep + [self.value_ids[values[i]]]
                mask += [0] * (1 + len(question_sep)) + [1]
            return ids, mask, 1 / len(set(values))
        sentences = [f"Key {KEYS[k]}: value {v}." for k, v in zip(keys, values)]
        for _ in range(rng.randint(0, self.args.filler)):
            sentences.insert(rng.randint(0, len(sentences)), rng.choice(self.filler))
        ids = self.sp.encode(" ".join(sentences) + "\n")
        mask = [0] * len(ids)
        for i in asked:
            question = self.sp.encode(
                f"\nQuestion: What is the value of key {KEYS[keys[i]]}?\nAnswer:")
            ids += question + [self.value_ids[values[i]]]
            mask += [0] * len(question) + [1]
        return ids, mask, 1 / len(set(values))

    def batch(self, rng, size, periodic_share):
        ids = torch.full((size, self.args.seq), self.sp.pad_id() if self.sp.pad_id() >= 0 else 0)
        labels = torch.zeros((size, self.args.seq), dtype=torch.bool)
        chances = []
        for row in range(size):
            doc, mask, chance = self.make(rng, periodic_share)
            doc, mask = doc[: self.args.seq], mask[: self.args.seq]
            ids[row, : len(doc)] = torch.tensor(doc)
            labels[row, : len(mask)] = torch.tensor(mask, dtype=torch.bool)
            if chance is not None:
                chances += [chance] * sum(mask)
        return ids, labels, (sum(chances) / len(chances) if chances else float("nan"))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokenizer", required=True, help="the demo's SentencePiece tokenizer.model")
    p.add_argument("--format", choices=["template", "pairs", "offsets"], default="template")
    p.add_argument("--facts", default="2:6", help="facts per document, N or MIN:MAX")
    p.add_argument("--questions", type=int, default=6, help="questions per document (keys drawn "
                   "with replacement: no answer by elimination)")
    p.add_argument("--filler", type=int, default=0, help="at most N filler sentences (template)")
    p.add_argument("--filler-from", help="a synth train.jsonl to take the filler sentences from")
    p.add_argument("--periodic", type=float, default=0.0, help="share of periodic documents")
    p.add_argument("--seq", type=int, default=64, help="tokens per row (documents are cut)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--init", help="start from this saved model directory (a curriculum's stage)")
    p.add_argument("--save", help="save the trained model to this directory")
    args = p.parse_args()
    if args.filler and not args.filler_from:
        p.error("--filler needs --filler-from")
    if args.filler and args.format != "template":
        p.error(f"--filler is for --format template (got --format {args.format})")
    torch.set_num_threads(args.threads)
    sp = spm.SentencePieceProcessor(model_file=args.tokenizer)
    docs = Documents(args, sp)
    # recipes/demo/model.yaml's shape by default (tied embeddings, intermediate 3 x hidden).
    config = LlamaConfig(vocab_size=sp.get_piece_size(), hidden_size=args.hidden,
                         num_hidden_layers=args.layers, num_attention_heads=args.heads,
                         num_key_value_heads=args.kv_heads, head_dim=args.head_dim,
                         intermediate_size=3 * args.hidden, tie_word_embeddings=True,
                         max_position_embeddings=4096)
    torch.manual_seed(args.seed)
    model = LlamaForCausalLM.from_pretrained(args.init) if args.init else LlamaForCausalLM(config)
    if model.config.vocab_size != sp.get_piece_size():
        raise SystemExit(f"{args.init}: vocabulary {model.config.vocab_size} != the tokenizer's "
                         f"{sp.get_piece_size()}")
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.95))
    # Held-out documents come from their own generator (never periodic); training from another.
    eval_ids, eval_labels, chance = docs.batch(random.Random(12345), 64, 0.0)
    rng = random.Random(args.seed)
    print(json.dumps(vars(args)))
    start = time.time()
    for step in range(args.steps + 1):
        if step % args.eval_every == 0:
            with torch.no_grad():
                logits = model(eval_ids).logits[:, :-1]
            hit = (logits.argmax(-1) == eval_ids[:, 1:])[eval_labels[:, 1:]]
            print(f"step {step:6d}  answer accuracy {hit.float().mean():.3f}  "
                  f"(chance {chance:.3f})  {time.time() - start:6.0f} s", flush=True)
        for group in opt.param_groups:  # linear warm-up over 50 steps, then constant
            group["lr"] = args.lr * min(1.0, (step + 1) / 50)
        ids, labels, _ = docs.batch(rng, args.batch, args.periodic)
        logits = model(ids).logits[:, :-1]
        mask = labels[:, 1:]
        loss = torch.nn.functional.cross_entropy(logits[mask], ids[:, 1:][mask])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    if args.save:
        model.save_pretrained(args.save)


if __name__ == "__main__":
    main()
