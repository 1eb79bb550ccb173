#!/usr/bin/env python3
"""Trains the demo's base model on a curriculum of recall documents (docs/demo-base.md).

The demo's tiny Llama (2 layers, d 128) stays on a plateau where it copies *some* value of its
context unless it first learns associative recall in an easy layout and is then walked, stage by
stage, to the harness's wording. This script trains it with HF transformers (answer-only loss,
AdamW, one document per row) and prints, every --eval-every steps, the argmax accuracy of the
answer tokens on fixed held-out documents next to what picking a uniformly random value of the
document scores ("chance").

Two modes:
  --recipe FILE --out DIR   every stage of a curriculum (recipes/demo/base-curriculum.yaml), each
                            from the previous stage's weights; a re-run keeps every stage whose
                            settings, tokenizer and predecessors did not change (fingerprints).
                            Writes DIR/model/ (config.json, model.safetensors, tokenizer.model)
                            and DIR/model/base.json (every stage's accuracy, the SHA-256 of the
                            weights and tokenizer). `make demo-base` runs it.
  stage flags               one stage (how docs/demo-base.md's experiments were run), e.g.
      python3 scripts/base_curriculum.py --tokenizer T.model --format pairs --periodic 0.5 \\
          --steps 16000 --save runs/pairs

Formats (--format):
  template  the harness's wording: "Key hj: value 79. ... Question: What is the value of key
            hj?\\nAnswer: 79" (optionally with --filler sentences between the facts)
  pairs     Zoology's MQAR layout: "hj 79 db 25 ... hj 79 db 25" (the answer follows its key)
  offsets   the template's token offsets without its other words: facts "hj :_value 79", questions
            "hj ?\\nAnswer: 79" (needs the pieces ":_value" and "?\\nAnswer:", synth --tokenizer-pieces)
  jsonl     documents of a `retain synth` train.jsonl (--data; every task in the harness's exact
            wording, filler included), cut to --seq tokens. --mix F draws a share F of a template,
            pairs, offsets or vars stage's documents from --data instead.
  vars      the harness's variable chains: "VAR tg = 15. VAR ns = VAR tg. ... Question: What is the
            value of VAR ns?\nAnswer: 15", every variable (not only the chain's end) asked
            (--facts direct assignments, --var-hops, --chains, --filler)
A stage can also grow the model first: --widen-heads (more attention heads), --add-pieces (more
tokenizer pieces, written beside the weights), --insert-layers (no-op layers, or --copy-layers).
The loss is on each answer (the tokens after a "?\\nAnswer:" piece up to the first that holds a
newline: a model must end its answers); the accuracy printed is that of each answer's first token,
on 64 fixed documents of the stage's layout ("all") and, per task, on --eval-data (a synth file of
another --seed).
--periodic F replaces a fraction F of the documents by random key/value tokens repeating with
period 2 or 3, which a model predicts by reading the token 1 or 2 back (the first layer's half of
retrieval); every token after the first period is a label.
"""
import argparse
import copy
import hashlib
import json
import os
import random
import re
import shutil
import sys
import time

import sentencepiece as spm
import torch
import yaml
from tqdm import tqdm
from transformers import LlamaConfig, LlamaForCausalLM

KEY_ALPHABET = "bcdfghjklmnpqrst"  # recipes/demo/base-data.yaml: 2 consonants per key
KEYS = [a + b for a in KEY_ALPHABET for b in KEY_ALPHABET]
VALUES = range(10, 100)  # 2-digit values, one token each in the demo's tokenizers


# Label kinds: an answer's first token (scored), the tokens that end it, any other token of a
# document (trained only under --lm-weight). 0: padding, and a document's first token.
ANSWER, ANSWER_END, TEXT = 1, 2, 3


def parse_range(text):
    lo, _, hi = str(text).partition(":")
    return int(lo), int(hi or lo)


class Documents:
    def __init__(self, args, sp):
        self.args, self.sp = args, sp
        self.key_ids = [self.piece("▁" + k) for k in KEYS]
        self.value_ids = {v: self.piece(f"▁{v}") for v in VALUES}
        # retain (prep, eval) starts every document with BOS, as HF's Llama tokenizers do.
        if not args.no_bos and sp.bos_id() < 0:
            raise SystemExit(f"{args.tokenizer}: no BOS piece (retain starts every prompt with one)")
        self.start = [] if args.no_bos else [sp.bos_id()]
        self.answer = self.piece("?\nAnswer:") \
            if args.format in ("offsets", "template", "jsonl", "vars") or args.data else None
        self.newline = None
        if args.end_answers:
            self.newline = sp.piece_to_id("\n")
            if self.newline == sp.unk_id():
                raise SystemExit(f"{args.tokenizer} has no piece '\\n': --end-answers appends one "
                                 "after each document's last answer")
        self.filler = []
        if args.filler:
            with open(args.filler_from) as f:
                text = f.read()
            self.filler = sorted(set(re.findall(r"(?:A|An|The|Our|Every)[a-z ]+\.", text)))
            if not self.filler:
                raise SystemExit(f"{args.filler_from}: no filler sentences found")
        self.train_docs = self.jsonl(args.data) if args.data else None

    def piece(self, piece):
        i = self.sp.piece_to_id(piece)
        if i == self.sp.unk_id():
            raise SystemExit(f"{self.args.tokenizer} has no piece {piece!r}: keys and values must "
                             "be single pieces (the demo's tokenizer), and --format offsets and "
                             "jsonl also need synth --tokenizer-pieces ': value' and '?\\nAnswer:'")
        return i

    def jsonl(self, path):
        """Tokenized synth documents: [(task, ids, labels)] (labels as with_answer_labels)."""
        out = []
        with open(path) as f:
            for number, line in enumerate(f, 1):
                try:
                    doc = json.loads(line)
                    text, task = doc["text"], doc["task"]
                except (ValueError, KeyError) as e:
                    raise SystemExit(f"{path}:{number}: expected a synth document "
                                     f"{{\"text\", \"task\"}}: {e}")
                ids, mask = self.with_answer_labels(self.sp.encode(text))
                ids, mask = ids[: self.args.seq], mask[: self.args.seq]
                if ANSWER in mask:
                    out.append((task, ids, mask))
        if not out:
            raise SystemExit(f"{path}: no document with an answer within {self.args.seq} tokens")
        return out

    def make(self, rng, periodic_share, mix_share):
        """(ids, label mask, chance of a uniform pick among the document's values)."""
        if rng.random() < periodic_share:
            period = rng.choice([2, 3])
            pool = self.key_ids + list(self.value_ids.values())
            base = [rng.choice(pool) for _ in range(period)]
            n = self.args.seq - len(self.start)
            ids = self.start + [base[i % period] for i in range(n)]
            return ids, [0] * (len(self.start) + period) + [ANSWER] * (n - period), None
        # rng.random() only where a share is mixed in: stages without one draw the same documents
        # as before --mix existed.
        if self.args.format == "jsonl" or (mix_share and rng.random() < mix_share):
            _, ids, mask = rng.choice(self.train_docs)
            return ids, mask, None
        if self.args.format == "vars":
            return self.make_vars(rng)
        n = rng.randint(*parse_range(self.args.facts))
        keys = rng.sample(range(len(KEYS)), n)
        values = [rng.choice(VALUES) for _ in keys]
        if self.args.shared_values:
            # A fact's value repeated under another key: a model that answers by elimination
            # (attending to the values whose key does not match and saying the one left) pushes
            # down the right value too when it also stands under another key; only a lookup of the
            # asked key's own value answers these (docs/demo-base.md).
            for i in range(1, n):
                if rng.random() < self.args.shared_values:
                    values[i] = values[rng.randrange(i)]
        if self.args.distinct_questions:
            asked = rng.sample(range(n), min(n, self.args.questions))
        else:
            asked = [rng.randrange(n) for _ in range(self.args.questions)]
        if self.args.format in ("pairs", "offsets"):
            fact_sep = [self.piece(":▁value")] if self.args.format == "offsets" else []
            question_sep = [self.answer] if self.args.format == "offsets" else []
            ids, mask = list(self.start), [0] * len(self.start)
            for k, v in zip(keys, values):
                ids += [self.key_ids[k]] + fact_sep + [self.value_ids[v]]
                mask += [0] * (2 + len(fact_sep))
            for i in asked:
                ids += [self.key_ids[keys[i]]] + question_sep + [self.value_ids[values[i]]]
                mask += [0] * (1 + len(question_sep)) + [ANSWER]
            return ids, mask, 1 / len(set(values))
        sentences = [f"Key {KEYS[k]}: value {v}." for k, v in zip(keys, values)]
        for _ in range(rng.randint(0, self.args.filler)):
            sentences.insert(rng.randint(0, len(sentences)), rng.choice(self.filler))
        # The harness's document (data/synthetic.cpp, synthetic_document), encoded whole as retain
        # encodes a prompt: encoding its pieces apart would add a "▁" before each question.
        text = " ".join(sentences) + "\n" + "".join(
            f"\nQuestion: What is the value of key {KEYS[keys[i]]}?\nAnswer: {values[i]}"
            for i in asked)
        ids, mask = self.with_answer_labels(self.sp.encode(text))
        return ids, mask, 1 / len(set(values))

    def make_vars(self, rng):
        """The harness's vars layout (data/synthetic.cpp): --facts direct assignments "VAR x =
        N.", --chains of them (the harness: one) the root of a chain of --var-hops "VAR y = VAR
        x." statements that follow it in order (the rest anywhere), and --questions distinct
        variables asked, each answered by the value its chain resolves to. The harness asks only the chain's end; asking
        every variable teaches the parts of it: a direct "VAR x" lookup first (the base's key
        lookup knows the wording "Key x: value N." only), then a hop at a time."""
        n = rng.randint(*parse_range(self.args.facts))
        chains = min(n, self.args.chains)
        hops = [rng.randint(*parse_range(self.args.var_hops)) for _ in range(chains)]
        names = [KEYS[k] for k in rng.sample(range(len(KEYS)), n + sum(hops))]
        values = [rng.choice(VALUES) for _ in range(n)]
        value_of = dict(zip(names, values))
        sentences, fresh = [], iter(names[n:])
        for root in range(chains):
            # A chain's statements keep their order (each after the one it refers to), the next
            # chain's anywhere among them.
            chain, name = [f"VAR {names[root]} = {values[root]}."], names[root]
            for _ in range(hops[root]):
                next_name = next(fresh)
                chain.append(f"VAR {next_name} = VAR {name}.")
                value_of[next_name], name = values[root], next_name
            slots = sorted(rng.randint(0, len(sentences)) for _ in chain)
            for offset, (slot, sentence) in enumerate(zip(slots, chain)):
                sentences.insert(slot + offset, sentence)
        for i in range(chains, n):
            sentences.insert(rng.randint(0, len(sentences)), f"VAR {names[i]} = {values[i]}.")
        for _ in range(rng.randint(0, self.args.filler)):
            sentences.insert(rng.randint(0, len(sentences)), rng.choice(self.filler))
        asked = rng.sample(names, min(len(names), self.args.questions))
        text = " ".join(sentences) + "\n" + "".join(
            f"\nQuestion: What is the value of VAR {name}?\nAnswer: {value_of[name]}"
            for name in asked)
        ids, mask = self.with_answer_labels(self.sp.encode(text))
        return ids, mask, 1 / len(set(values))

    def with_answer_labels(self, ids):
        """BOS + ids, and their labels: ANSWER for the token after each "?\nAnswer:" piece (the
        answer's first token, scored), ANSWER_END for the tokens after it up to the first one
        that holds a newline (the harness's exact match reads the first line, so a model must end
        its answer: one trained on the answer's first token alone writes on). With --end-answers
        a newline follows the document's last answer, which otherwise ends the document unlabelled
        (the newline is appended as its own piece: "96\n" encoded whole is another piece)."""
        ids = self.start + ids + ([self.newline] if self.newline is not None else [])
        labels, inside = [0], False
        for prev, token in zip(ids, ids[1:]):
            if prev == self.answer:
                labels.append(ANSWER)
                inside = "\n" not in self.sp.id_to_piece(token)
            elif inside:
                labels.append(ANSWER_END)
                inside = "\n" not in self.sp.id_to_piece(token)
            else:
                labels.append(0)
        return ids, labels

    def rows(self, docs):
        """(ids, labels): [(ids, mask)] as padded rows of --seq tokens (documents are cut)."""
        ids = torch.full((len(docs), self.args.seq),
                         self.sp.pad_id() if self.sp.pad_id() >= 0 else 0)
        labels = torch.zeros((len(docs), self.args.seq), dtype=torch.int8)
        for row, (doc, mask) in enumerate(docs):
            doc, mask = doc[: self.args.seq], mask[: self.args.seq]
            ids[row, : len(doc)] = torch.tensor(doc)
            kinds = torch.tensor(mask, dtype=torch.int8)
            labels[row, 1: len(doc)] = TEXT
            labels[row, : len(mask)] = torch.where(kinds > 0, kinds, labels[row, : len(mask)])
        return ids, labels

    def batch(self, rng, size, periodic_share, mix_share):
        docs, chances = [], []
        for _ in range(size):
            doc, mask, chance = self.make(rng, periodic_share, mix_share)
            docs.append((doc, mask))
            if chance is not None:
                chances += [chance] * mask[: self.args.seq].count(ANSWER)
        ids, labels = self.rows(docs)
        return ids, labels, (sum(chances) / len(chances) if chances else float("nan"))

    def held_out(self):
        """[(ids, labels, chance, tasks)]: the fixed documents every stage is scored on: 64 of
        the stage's own layout (their own generator, never periodic or mixed: the same documents
        on every run; none for --format jsonl) and those of --eval-data (scored per task)."""
        sets = []
        if self.args.format != "jsonl":
            ids, labels, chance = self.batch(random.Random(12345), 64, 0.0, 0.0)
            sets.append((ids, labels, chance, None))
        if self.args.eval_data:
            held = self.jsonl(self.args.eval_data)
            ids, labels = self.rows([(doc, mask) for _, doc, mask in held])
            sets.append((ids, labels, float("nan"), [task for task, _, _ in held]))
        return sets


def grow(model, count, seed, copies=False):
    """Inserts `count` decoder layers after the first. Their attention and MLP output projections
    start at zero, so each is the identity on the residual stream and the grown model computes
    what the old one did; training then gives them a use (e.g. resolving one hop of a variable
    chain in the context before the last layer's lookup). With `copies` each is instead a copy of
    the second layer (the demo's lookup layer): the grown model then computes something else at
    first, but starts with a working key lookup where a hop needs one, which a no-op layer did
    not learn in 3,000 steps (docs/demo-base.md, "Vars")."""
    torch.manual_seed(seed + 1)
    config = model.config
    layers = list(model.model.layers)
    fresh = []
    for _ in range(count):
        if copies:
            fresh.append(copy.deepcopy(layers[1]))
            continue
        layer = type(layers[0])(config, 0)
        layer.apply(model._init_weights)  # the model's own initialisation (initializer_range)
        layer.self_attn.o_proj.weight.data.zero_()
        layer.mlp.down_proj.weight.data.zero_()
        fresh.append(layer)
    layers = layers[:1] + fresh + layers[1:]
    for i, layer in enumerate(layers):
        layer.self_attn.layer_idx = i
    model.model.layers = torch.nn.ModuleList(layers)
    config.num_hidden_layers = len(layers)
    if getattr(config, "layer_types", None):
        config.layer_types = [config.layer_types[0]] * len(layers)


def add_pieces(tokenizer, pieces, out):
    """Writes `tokenizer` with `pieces` appended as user-defined pieces (always one token each,
    as synth --tokenizer-pieces makes them) to `out`. Only text that holds a piece changes ids;
    the others keep theirs, so a trained model grows its vocabulary instead of starting over."""
    try:
        from sentencepiece import sentencepiece_model_pb2 as model_pb2  # needs protobuf
    except ImportError as e:
        raise SystemExit(f"--add-pieces edits the tokenizer's protobuf: {e} (scripts/setup.sh "
                         "installs protobuf)")
    proto = model_pb2.ModelProto()
    with open(tokenizer, "rb") as f:
        proto.ParseFromString(f.read())
    known = {p.piece for p in proto.pieces}
    for piece in pieces:
        if piece in known:
            raise SystemExit(f"--add-pieces: {tokenizer} already has the piece {piece!r}")
        known.add(piece)
        new = proto.pieces.add()
        new.piece, new.score = piece, 0.0
        new.type = model_pb2.ModelProto.SentencePiece.USER_DEFINED
    with open(out, "wb") as f:
        f.write(proto.SerializeToString())


def grow_vocabulary(model, old_sp, new_sp):
    """The model's (tied) embeddings grown to `new_sp`'s pieces: each new piece starts as the mean
    of the old pieces that spelled it."""
    old_n, new_n = old_sp.get_piece_size(), new_sp.get_piece_size()
    table = model.get_input_embeddings().weight.data
    rows = []
    for i in range(old_n, new_n):
        spelled = old_sp.encode(new_sp.id_to_piece(i).replace("▁", " "))
        if not spelled:  # an empty piece: nothing to average
            raise SystemExit(f"--add-pieces: {new_sp.id_to_piece(i)!r} has no old pieces to "
                             "start its embedding from")
        rows.append(table[spelled].mean(0))
    model.resize_token_embeddings(new_n, mean_resizing=False)
    model.get_input_embeddings().weight.data[old_n:] = torch.stack(rows)
    model.config.vocab_size = new_n


def widen(model, heads, seed):
    """A model with `heads` query heads per layer, each with its own key/value head (grouped
    heads are repeated: a query head keeps the key and value it read), the new heads' output
    projections at zero: it computes what the old one did, with more attention to train (the
    demo's 2 key/value heads are shared by pairs of query heads)."""
    config = model.config
    old_heads, old_kv = config.num_attention_heads, config.num_key_value_heads
    if heads < old_heads:
        raise SystemExit(f"--widen-heads {heads}: the model already has {old_heads} heads")
    dim = config.head_dim
    wide_config = type(config).from_dict({**config.to_dict(), "num_attention_heads": heads,
                                          "num_key_value_heads": heads})
    torch.manual_seed(seed + 2)
    wide = type(model)(wide_config)
    state = model.state_dict()
    wide_state = wide.state_dict()  # the new heads keep their fresh initialisation
    group = old_heads // old_kv
    for name, tensor in state.items():
        if ".self_attn." not in name:
            wide_state[name] = tensor
            continue
        rows = wide_state[name].clone()
        if "q_proj" in name:
            rows[: old_heads * dim] = tensor
        elif "k_proj" in name or "v_proj" in name:
            for h in range(old_heads):
                kv = h // group
                rows[h * dim:(h + 1) * dim] = tensor[kv * dim:(kv + 1) * dim]
        elif "o_proj" in name:
            rows.zero_()
            rows[:, : old_heads * dim] = tensor
        else:
            raise SystemExit(f"--widen-heads: unexpected attention weight {name}")
        wide_state[name] = rows
    wide.load_state_dict(wide_state)
    return wide


def evaluate(model, held):
    """{"all": accuracy, task: accuracy, ...} of the argmax at each answer's first token: "all"
    over the first held-out set (the stage's layout), a task's over --eval-data's documents."""
    scores = {}
    for ids, labels, _, tasks in held:
        answers = labels[:, 1:] == ANSWER
        with torch.no_grad():
            hits = torch.cat([model(ids[i:i + 16]).logits[:, :-1].argmax(-1)
                              for i in range(0, len(ids), 16)]) == ids[:, 1:]
        scores.setdefault("all", hits[answers].float().mean().item())
        for task in sorted(set(tasks or [])):
            rows = torch.tensor([t == task for t in tasks])
            scores[task] = hits[rows][answers[rows]].float().mean().item()
    return scores


def new_model(args, vocab_size):
    # The demo's shape by default (tied embeddings, intermediate 3 x hidden).
    config = LlamaConfig(vocab_size=vocab_size, hidden_size=args.hidden,
                         num_hidden_layers=args.layers, num_attention_heads=args.heads,
                         num_key_value_heads=args.kv_heads, head_dim=args.head_dim,
                         intermediate_size=3 * args.hidden, tie_word_embeddings=True,
                         max_position_embeddings=4096)
    return LlamaForCausalLM(config)


def learning_rate(args, step):
    """Linear warm-up over 50 steps, constant, then (--cooldown F) a linear decay to a tenth over
    the last F of the steps: a stage that ends the curriculum settles its weights."""
    lr = args.lr * min(1.0, (step + 1) / 50)
    decay_start = args.steps * (1 - args.cooldown)
    if args.cooldown > 0 and step >= decay_start:
        lr *= 1 - 0.9 * (step - decay_start) / max(1.0, args.steps - decay_start)
    return lr


def train_stage(args, model=None, progress=False, tokenizer_out=None):
    """Trains one stage; returns (model, [(step, scores)]). With --add-pieces the stage's
    tokenizer (--tokenizer and the pieces) is written to `tokenizer_out` first."""
    torch.set_num_threads(args.threads)
    sp = spm.SentencePieceProcessor(model_file=args.tokenizer)
    old_sp = sp
    if args.add_pieces:
        add_pieces(args.tokenizer, args.add_pieces, tokenizer_out)
        sp = spm.SentencePieceProcessor(model_file=tokenizer_out)
    docs = Documents(args, sp)
    torch.manual_seed(args.seed)
    if model is None:
        model = (LlamaForCausalLM.from_pretrained(args.init) if args.init
                 else new_model(args, old_sp.get_piece_size()))
    if model.config.vocab_size != old_sp.get_piece_size():
        raise SystemExit(f"{args.init}: vocabulary {model.config.vocab_size} != the tokenizer's "
                         f"{old_sp.get_piece_size()}")
    if args.widen_heads:
        model = widen(model, args.widen_heads, args.seed)
    if args.add_pieces:
        grow_vocabulary(model, old_sp, sp)
    if args.insert_layers:
        grow(model, args.insert_layers, args.seed, copies=args.copy_layers)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.95))
    held = docs.held_out()
    rng = random.Random(args.seed)
    history = []
    start = time.time()
    bar = tqdm(total=args.steps, unit="step", disable=not progress, dynamic_ncols=True)
    for step in range(args.steps + 1):
        if step % args.eval_every == 0 or step == args.steps:
            scores = evaluate(model, held)
            history.append((step, scores))
            per_task = "".join(f" {t} {s:.2f}" for t, s in scores.items() if t != "all")
            bar.write(f"step {step:6d}  answer accuracy {scores['all']:.3f}  "
                      f"(chance {held[0][2]:.3f}){per_task}  {time.time() - start:6.0f} s")
        if step == args.steps:
            break
        for group in opt.param_groups:
            group["lr"] = learning_rate(args, step)
        ids, labels, _ = docs.batch(rng, args.batch, args.periodic, args.mix)
        kinds = labels[:, 1:]
        mask = (kinds == ANSWER) | (kinds == ANSWER_END)
        if not mask.any():
            raise SystemExit(f"step {step}: no answer within --seq {args.seq} tokens in a whole "
                             "batch; raise --seq")
        logits = model(ids).logits[:, :-1]
        loss = torch.nn.functional.cross_entropy(logits[mask], ids[:, 1:][mask])
        if args.lm_weight:
            text = kinds > 0
            loss = loss + args.lm_weight * torch.nn.functional.cross_entropy(logits[text],
                                                                             ids[:, 1:][text])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
    bar.close()
    return model, history


def stage_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    p.add_argument("--tokenizer", help="the demo's SentencePiece tokenizer.model")
    p.add_argument("--format", choices=["template", "pairs", "offsets", "jsonl", "vars"],
                   default="template")
    p.add_argument("--data", help="a synth train.jsonl to train on (--format jsonl, or a --mix "
                   "share of another format's documents)")
    p.add_argument("--eval-data", help="a synth train.jsonl (another --seed) to score per task")
    p.add_argument("--mix", type=float, default=0.0, help="share of documents drawn from --data "
                   "(a synth train.jsonl) in a template, pairs, offsets or vars stage")
    p.add_argument("--facts", default="2:6", help="facts per document, N or MIN:MAX")
    p.add_argument("--var-hops", default="2", help="--format vars: statements in the chain, N or "
                   "MIN:MAX")
    p.add_argument("--chains", type=int, default=1, help="--format vars: chains per document "
                   "(the harness has one; more make a model read the question)")
    p.add_argument("--questions", type=int, default=6, help="questions per document (keys drawn "
                   "with replacement: no answer by elimination)")
    p.add_argument("--distinct-questions", action="store_true", help="each question asks another "
                   "fact (at most --facts questions): a repeated question is answered by copying "
                   "the earlier answer, a shortcut in the question's own layout that half the "
                   "labels then teach instead of the lookup in the facts")
    p.add_argument("--end-answers", action="store_true", help="end every template and synth "
                   "document with a newline after its last answer, so each answer's end is "
                   "labelled: a one-question document (needle, vars) otherwise never shows what "
                   "follows its answer, and with --lm-weight the model writes on as after a value "
                   "in the context (\"19.\" where exact match wants \"19\")")
    p.add_argument("--shared-values", type=float, default=0.0, help="chance that a fact takes "
                   "the value of an earlier fact of its document (under its own key): answering "
                   "by elimination fails on those, a lookup does not")
    p.add_argument("--filler", type=int, default=0, help="at most N filler sentences (template)")
    p.add_argument("--filler-from", help="a synth train.jsonl to take the filler sentences from")
    p.add_argument("--periodic", type=float, default=0.0, help="share of periodic documents")
    p.add_argument("--seq", type=int, default=64, help="tokens per row (documents are cut)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--lm-weight", type=float, default=0.0, help="add W x the next-token loss "
                   "over every token of the documents (a base that is also a language model on its "
                   "text: the gates' loss preserves its predictions everywhere)")
    p.add_argument("--cooldown", type=float, default=0.0, help="decay the learning rate linearly "
                   "to a tenth over this fraction of the last steps")
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--no-bos", action="store_true", help="documents without a BOS token; a "
                   "recipe whose last stage has it writes tokenizer_config.json add_bos_token "
                   "false beside the base, so retain prompts it without one too")
    p.add_argument("--init", help="start from this saved model directory (a curriculum's stage)")
    p.add_argument("--insert-layers", type=int, default=0, help="grow the model: insert N "
                   "layers after its first, each a no-op at first (zero output projections)")
    p.add_argument("--copy-layers", action="store_true", help="--insert-layers: each inserted "
                   "layer a copy of the second (the lookup layer) instead of a no-op")
    p.add_argument("--add-pieces", nargs="+", metavar="PIECE", help="append these user-defined "
                   "pieces to the tokenizer (written beside the weights: --save, or the stage's "
                   "directory) and grow the embeddings; e.g. '▁VAR' '▁=' '▁=▁VAR'")
    p.add_argument("--widen-heads", type=int, default=0, help="widen the model's attention to "
                   "N query heads per layer, each with its own key/value head (the new ones a "
                   "no-op at first: zero output projections)")
    p.add_argument("--save", help="save the trained model to this directory")
    p.add_argument("--recipe", help="a curriculum recipe: run every stage (needs --out)")
    p.add_argument("--out", help="--recipe: the run directory (stages/, model/)")
    return p


def check_stage(p, args, where):
    if not args.tokenizer:
        p.error(f"{where}: --tokenizer is required")
    if args.filler and not args.filler_from:
        p.error(f"{where}: --filler needs --filler-from")
    if args.filler and args.format not in ("template", "vars"):
        p.error(f"{where}: --filler is for --format template or vars (got --format {args.format})")
    for name in ("seq", "batch", "eval_every", "threads"):
        if getattr(args, name) < 1:
            p.error(f"{where}: --{name.replace('_', '-')} must be >= 1, found {getattr(args, name)}")
    if not 0 <= args.shared_values <= 1 or (args.shared_values and args.format == "jsonl"):
        p.error(f"{where}: --shared-values is a chance (0 to 1) for a template, pairs or offsets "
                f"stage, found {args.shared_values} with --format {args.format}")
    if args.steps < 0 or args.questions < 1 or not 0 <= args.periodic <= 1:
        p.error(f"{where}: expected --steps >= 0, --questions >= 1 and --periodic in [0, 1], found "
                f"{args.steps}, {args.questions}, {args.periodic}")
    if not 0 <= args.cooldown <= 1:
        p.error(f"{where}: --cooldown is a fraction of the steps (0 to 1), found {args.cooldown}")
    most = {}
    for name, least in (("facts", 1), ("var_hops", 0)):
        text = str(getattr(args, name))
        lo, most[name] = parse_range(text) if re.fullmatch(r"[0-9]+(:[0-9]+)?", text) else (-1, -1)
        if not least <= lo <= most[name] <= len(KEYS):
            p.error(f"{where}: --{name.replace('_', '-')} {text}: expected N or MIN:MAX with "
                    f"{least} <= MIN <= MAX <= {len(KEYS)}")
    if args.chains < 1:
        p.error(f"{where}: --chains must be >= 1, found {args.chains}")
    # A vars document names every variable with its own key.
    names = most["facts"] + min(most["facts"], args.chains) * most["var_hops"]
    if args.format == "vars" and names > len(KEYS):
        p.error(f"{where}: --facts, --chains and --var-hops make up to {names} variables, more "
                f"than the {len(KEYS)} keys")
    if args.copy_layers and not args.insert_layers:
        p.error(f"{where}: --copy-layers is how --insert-layers grows the model; found no "
                "--insert-layers")
    if args.format == "jsonl" and not (args.data and args.eval_data):
        p.error(f"{where}: --format jsonl needs --data and --eval-data")
    if not 0 <= args.mix <= 1 or (args.mix > 0) != bool(args.data and args.format != "jsonl"):
        p.error(f"{where}: --mix F (0 to 1) and --data go together in a non-jsonl stage, found "
                f"--mix {args.mix} and --data {args.data or '(none)'}")
    for name in ("tokenizer", "data", "eval_data", "filler_from", "init"):
        path = getattr(args, name)
        if path and not os.path.exists(path):
            p.error(f"{where}: --{name.replace('_', '-')} {path}: no such file or directory")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


MODEL_KEYS = ("layers", "hidden", "heads", "kv-heads", "head-dim")
BOOLEAN_FLAGS = ("no-bos", "distinct-questions", "end-answers", "copy-layers")
# A committed base's sums (scripts/check_demo_base.sh checks them before the demo reads the base).
SUM_KEYS = ("sha256", "tokenizer-sha256", "tokenizer-config-sha256")


def resolve_stages(p, cli, recipe):
    """[(name, args)] for every stage, all checked before any trains (a typo in the last stage
    must not wait for hours of the first ones)."""
    names = {a.dest for a in p._actions}
    model_keys = recipe.get("model") or {}
    if not isinstance(model_keys, dict) or set(model_keys) - set(MODEL_KEYS):
        p.error(f"{cli.recipe}: `model` must be a map of {', '.join(MODEL_KEYS)}, found "
                f"{model_keys!r}")
    stages = []
    for index, stage in enumerate(recipe["stages"]):
        where = f"{cli.recipe}: stage {index + 1}"
        if not isinstance(stage, dict) or not isinstance(stage.get("name"), str) \
                or not re.fullmatch(r"[a-z0-9-]+", stage["name"]):
            p.error(f"{where}: expected a map with a `name` of lower-case letters, digits or '-'")
        where += f" ({stage['name']})"
        argv = ["--tokenizer", cli.tokenizer, "--threads", str(cli.threads)]
        for key, value in {**model_keys, "seed": recipe.get("seed", 0), **stage}.items():
            flag = str(key).replace("_", "-")
            if flag == "name":
                continue
            if flag.replace("-", "_") not in names or flag in (
                    "recipe", "out", "init", "save", "tokenizer", "threads", "help"):
                p.error(f"{where}: unknown key '{key}'")
            if flag in MODEL_KEYS and key in stage:
                p.error(f"{where}: '{key}' belongs in the recipe's `model` map (a stage starts "
                        "from the previous one's weights)")
            if flag in ("facts", "var-hops") and not (isinstance(value, str) and re.fullmatch(
                    r"[0-9]+(:[0-9]+)?", value)):
                # Unquoted, YAML reads 2:8 as the base-60 integer 128.
                p.error(f"{where}: {key} must be a quoted \"N\" or \"MIN:MAX\", found {value!r}")
            # Data files are named relative to the run directory, where `make demo-base` writes
            # them.
            if flag in ("data", "eval-data", "filler-from"):
                value = os.path.join(cli.out, str(value))
            if flag in BOOLEAN_FLAGS:
                if not isinstance(value, bool):
                    p.error(f"{where}: '{key}' is true or false, found {value!r}")
                argv += [f"--{flag}"] if value else []
                continue
            if flag == "add-pieces":
                if not (isinstance(value, list) and value
                        and all(isinstance(v, str) and v for v in value)):
                    p.error(f"{where}: add-pieces is a list of pieces, found {value!r}")
                argv += [f"--{flag}", *value]
                continue
            argv += [f"--{flag}", str(value)]
        args = p.parse_args(argv)
        check_stage(p, args, where)
        stages.append((stage, args))
    return stages


def fingerprint(p, previous, stage, args, tokenizer_digest):
    """What a stage's weights depend on: its settings, the tokenizer and the stage before it.
    Only settings away from their defaults count, so a flag added to this script later (with a
    default that keeps the old behaviour) leaves finished stages valid."""
    settings = {k: v for k, v in vars(args).items()
                if k not in ("tokenizer", "threads", "recipe", "out", "save", "init")
                and v != p.get_default(k)}
    return hashlib.sha256(json.dumps([previous, stage, settings, tokenizer_digest],
                                     sort_keys=True).encode()).hexdigest()


def run_recipe(p, cli):
    """Every stage of cli.recipe in order, into cli.out. A stage whose directory holds the
    fingerprint of its settings, tokenizer and predecessor is skipped; the first stage that does
    not is trained again, and so is every stage after it."""
    try:
        with open(cli.recipe) as f:
            recipe = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as e:
        p.error(f"--recipe {cli.recipe}: {e}")
    if not isinstance(recipe, dict) or not isinstance(recipe.get("stages"), list) \
            or not recipe["stages"]:
        p.error(f"{cli.recipe}: expected a map with a non-empty list `stages`")
    unknown = set(recipe) - {"model", "seed", "stages", *SUM_KEYS}
    if unknown:
        p.error(f"{cli.recipe}: unknown keys {sorted(unknown)} (expected model, seed, stages, "
                f"{', '.join(SUM_KEYS)})")
    stages = resolve_stages(p, cli, recipe)
    out = cli.out
    os.makedirs(os.path.join(out, "stages"), exist_ok=True)
    tokenizer_digest = sha256(cli.tokenizer)
    # A stage with add-pieces saves its tokenizer beside its weights; the stages after it (and
    # the final model) read that one.
    tokenizer = cli.tokenizer
    model, summary, previous, previous_print = None, [], None, None
    stale = False
    for index, (stage, args) in enumerate(stages):
        stage_dir = os.path.join(out, "stages", f"{index + 1:02d}-{stage['name']}")
        print_ = fingerprint(p, previous_print, stage, args, tokenizer_digest)
        args.tokenizer = tokenizer
        done = os.path.join(stage_dir, "stage.json")
        record = None
        if not stale and os.path.exists(done):
            with open(done) as f:
                record = json.load(f)
            if record.get("fingerprint") != print_:
                print(f"stage {index + 1} ({stage['name']}): its settings, tokenizer or an "
                      "earlier stage changed; training it again", flush=True)
                record = None
        if record is not None:
            summary.append(record)
            print(f"stage {index + 1} ({stage['name']}): done, skipped", flush=True)
            previous, previous_print, model = stage_dir, print_, None
            if args.add_pieces:
                tokenizer = os.path.join(stage_dir, "tokenizer.model")
            continue
        stale = True  # every later stage starts from new weights
        if model is None and previous:
            model = LlamaForCausalLM.from_pretrained(previous)
        print(f"stage {index + 1} of {len(stages)} ({stage['name']}): {json.dumps(stage)}",
              flush=True)
        start = time.time()
        grown = stage_dir + ".tokenizer.tmp" if args.add_pieces else None
        model, history = train_stage(args, model, progress=True, tokenizer_out=grown)
        shutil.rmtree(stage_dir + ".tmp", ignore_errors=True)
        model.save_pretrained(stage_dir + ".tmp")
        if args.add_pieces:
            os.replace(grown, os.path.join(stage_dir + ".tmp", "tokenizer.model"))
        record = {"name": stage["name"], "stage": stage, "fingerprint": print_,
                  "seconds": round(time.time() - start),
                  "history": [{"step": s, **scores} for s, scores in history]}
        with open(os.path.join(stage_dir + ".tmp", "stage.json"), "w") as f:
            json.dump(record, f, indent=1)
        shutil.rmtree(stage_dir, ignore_errors=True)
        os.replace(stage_dir + ".tmp", stage_dir)
        summary.append(record)
        previous, previous_print = stage_dir, print_
        if args.add_pieces:
            tokenizer = os.path.join(stage_dir, "tokenizer.model")
    final = os.path.join(out, "model")
    shutil.rmtree(final + ".tmp", ignore_errors=True)
    shutil.copytree(previous, final + ".tmp", ignore=shutil.ignore_patterns("stage.json"))
    shutil.copy(tokenizer, os.path.join(final + ".tmp", "tokenizer.model"))
    tokenizer_digest = sha256(tokenizer)
    if stages[-1][1].no_bos:
        # A base trained without BOS is prompted without one: retain (and transformers 5) read
        # add_bos_token from tokenizer_config.json beside a lone tokenizer.model.
        with open(os.path.join(final + ".tmp", "tokenizer_config.json"), "w") as f:
            json.dump({"add_bos_token": False, "add_eos_token": False}, f, indent=1)
    digest = sha256(os.path.join(final + ".tmp", "model.safetensors"))
    sums = {"sha256": digest, "tokenizer-sha256": tokenizer_digest}
    if stages[-1][1].no_bos:
        sums["tokenizer-config-sha256"] = sha256(os.path.join(final + ".tmp",
                                                              "tokenizer_config.json"))
    with open(os.path.join(final + ".tmp", "base.json"), "w") as f:
        json.dump({"recipe": cli.recipe, **sums, "stages": summary}, f, indent=1)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(final + ".tmp", final)
    print(f"wrote {final}: model.safetensors sha256 {digest}, tokenizer.model sha256 "
          f"{tokenizer_digest}", flush=True)
    expected = recipe.get("sha256")
    if expected and expected != digest:
        print(f"note: the recipe's sha256 is {expected} (the committed base); this run's differs "
              "(floating-point sums depend on the machine and thread count)", flush=True)


def main():
    p = stage_parser()
    args = p.parse_args()
    if args.recipe:
        if not (args.out and args.tokenizer):
            p.error("--recipe needs --out and --tokenizer")
        run_recipe(p, args)
        return
    check_stage(p, args, "arguments")
    if args.add_pieces and not args.save:
        p.error("--add-pieces needs --save (the grown tokenizer is saved beside the weights)")
    print(json.dumps(vars(args)), flush=True)
    tokenizer_out = None
    if args.add_pieces:
        os.makedirs(args.save, exist_ok=True)
        tokenizer_out = os.path.join(args.save, "tokenizer.model")
    model, _ = train_stage(args, tokenizer_out=tokenizer_out)
    if args.save:
        model.save_pretrained(args.save)


if __name__ == "__main__":
    sys.exit(main())
