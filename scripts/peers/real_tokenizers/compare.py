#!/usr/bin/env python
"""Compare retain's tokenizer with HF tokenizers / transformers / sentencepiece on real tokenizer
files (the model directories build_dirs.py makes; see README.md here for the whole recipe).

  PYTHONPATH=$RETAIN_HOME/realtok/site ~/.cache/retain/venv/bin/python compare.py \
      --retain build/retain --dirs $RETAIN_HOME/realtok/dirs/* --out report.md

For every model directory and test string (strings_gen.py: ~700 shared strings + strings writing
that tokenizer's special/added tokens inside text):
  retain ids     : `retain prep --format jsonl` over all strings at once (one process per dir; it
                   stores the full encoding per document, what `retain tokenize --ids` prints,
                   ending in one EOS), with the EOS prep appended removed. A sample of strings is also run
                   through `retain tokenize --file F --ids` and must agree with the prep ids
                   (--cli-sample; --encode-mode cli runs every string through the CLI instead).
  references     : (i)  tokenizers.Tokenizer.from_file(dir/tokenizer.json).encode(s).ids
                   (ii) transformers AutoTokenizer.from_pretrained(dir)(s)["input_ids"]
                        (LlamaTokenizer.from_pretrained(dir) where a dir has only tokenizer.model)
                   (iii) sentencepiece: [bos] + SentencePieceProcessor(model).encode(s), for dirs
                        holding tokenizer.model or derived from one (realtok_source.json spm_model)
  decoding       : `retain tokenize --decode IDS` (one process per string; --decode-sample N
                   strings per dir, 0 = all) on the reference ids vs AutoTokenizer.decode(ids),
                   Tokenizer.decode(ids, skip_special_tokens=False), sentencepiece decode.
Writes a markdown report (--out) and a JSON file with every mismatch (--json, default: out.json).
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import unicodedata
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import strings_gen  # noqa: E402

RETAIN_TIMEOUT = 120


# ----------------------------------------------------------------------------- retain
def run(cmd, timeout=RETAIN_TIMEOUT):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")


def last_err(stderr):
    lines = [l for l in stderr.strip().splitlines() if "error" in l.lower()] or stderr.strip().splitlines()
    return lines[-1][:300] if lines else "(no stderr)"


def retain_encode_prep(binary, d, texts, work):
    """All texts in one `retain prep` run. Returns list of id lists (EOS still appended)."""
    import h5py
    jl = os.path.join(work, "in.jsonl")
    with open(jl, "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
    out = os.path.join(work, "prep_out")
    shutil.rmtree(out, ignore_errors=True)
    rc, _, err = run([binary, "prep", "--tokenizer", d, "--input", jl, "--out", out, "--format",
                      "jsonl", "--shard-tokens", str(1 << 30)], timeout=600)
    if rc != 0:
        raise RuntimeError("retain prep failed: " + last_err(err))
    shards = sorted(x for x in os.listdir(out) if x.endswith(".h5"))
    docs = []
    for s in shards:
        with h5py.File(os.path.join(out, s), "r") as f:
            tok = f["tokens"][:].tolist()
            off = f["doc_offsets"][:].tolist()
        docs += [tok[off[i]:off[i + 1]] for i in range(len(off) - 1)]
    if len(docs) != len(texts):
        raise RuntimeError(f"retain prep returned {len(docs)} documents for {len(texts)} texts")
    return docs


def retain_encode_cli(binary, d, text, work):
    f = os.path.join(work, "text.txt")
    with open(f, "wb") as fh:
        fh.write(text.encode("utf-8"))
    rc, out, err = run([binary, "tokenize", "--model", d, "--file", f, "--ids"])
    if rc != 0:
        return None, last_err(err)
    line = out.decode().strip()
    return ([int(x) for x in line.split(",")] if line else []), None


def retain_decode_cli(binary, d, ids, skip_special=False):
    cmd = [binary, "tokenize", "--model", d, "--decode", ",".join(map(str, ids))]
    if skip_special:
        cmd.append("--skip-special")
    rc, out, err = run(cmd)
    if rc != 0:
        return None, last_err(err)
    if out.endswith(b"\n"):
        out = out[:-1]
    return out.decode("utf-8", "surrogateescape"), None


# ----------------------------------------------------------------------------- references
class Refs:
    def __init__(self, d):
        self.d = d
        self.meta = {}
        mp = os.path.join(d, "realtok_source.json")
        if os.path.exists(mp):
            self.meta = json.load(open(mp))
        cp = os.path.join(d, "tokenizer_config.json")
        self.config = json.load(open(cp)) if os.path.exists(cp) else {}
        self.tk = self.auto = self.sp = None
        self.errors = {}
        self.auto_loader = None
        tj = os.path.join(d, "tokenizer.json")
        if os.path.exists(tj):
            try:
                from tokenizers import Tokenizer
                self.tk = Tokenizer.from_file(tj)
            except Exception as e:
                self.errors["tokenizers"] = repr(e)[:300]
        only_spm = (os.path.exists(os.path.join(d, "tokenizer.model")) and not os.path.exists(tj)
                    and not os.path.exists(os.path.join(d, "tokenizer_config.json")))
        try:
            if only_spm:
                # AutoTokenizer on a bare tokenizer.model builds a generic TokenizersBackend
                # (Replace ' '->'▁', no prefix space, no BOS); LlamaTokenizer is the model's class.
                raise RuntimeError("bare tokenizer.model")
            from transformers import AutoTokenizer
            self.auto = AutoTokenizer.from_pretrained(d)
            self.auto_loader = "AutoTokenizer -> " + type(self.auto).__name__
        except Exception as e:
            first = repr(e)[:200]
            if os.path.exists(os.path.join(d, "tokenizer.model")):
                try:
                    from transformers import LlamaTokenizer
                    self.auto = LlamaTokenizer.from_pretrained(d)
                    self.auto_loader = ("LlamaTokenizer.from_pretrained" if only_spm else
                                        "LlamaTokenizer.from_pretrained (AutoTokenizer: " + first + ")")
                except Exception as e2:
                    self.errors["transformers"] = first + " / LlamaTokenizer: " + repr(e2)[:200]
            else:
                self.errors["transformers"] = first
        spm = None
        if os.path.exists(os.path.join(d, "tokenizer.model")):
            spm = os.path.join(d, "tokenizer.model")
        elif self.meta.get("spm_model") and os.path.exists(self.meta["spm_model"]):
            spm = self.meta["spm_model"]
        self.spm_path = spm
        if spm:
            try:
                import sentencepiece
                self.sp = sentencepiece.SentencePieceProcessor(model_file=spm)
            except Exception as e:
                self.errors["sentencepiece"] = repr(e)[:300]

    # encoders ---------------------------------------------------------------
    def enc_tk(self, s):
        return self.tk.encode(s, add_special_tokens=True).ids

    def enc_auto(self, s):
        return list(self.auto(s)["input_ids"])

    def enc_sp(self, s):
        ids = self.sp.encode(s)
        return ([self.sp.bos_id()] if self.sp.bos_id() >= 0 else []) + ids

    # decoders ---------------------------------------------------------------
    def dec_tk(self, ids):
        return self.tk.decode(ids, skip_special_tokens=False)

    def dec_auto(self, ids):
        return self.auto.decode(ids)

    def dec_sp(self, ids):
        return self.sp.decode(ids)

    # token names --------------------------------------------------------------
    def tok(self, i):
        try:
            if self.tk is not None:
                return self.tk.id_to_token(i)
            if self.auto is not None:
                return self.auto.convert_ids_to_tokens(i)
            if self.sp is not None:
                return self.sp.id_to_piece(i)
        except Exception:
            pass
        return None

    def special_ids(self):
        ids = set()
        if self.tk is not None:
            for i, t in self.tk.get_added_tokens_decoder().items():
                if t.special:
                    ids.add(i)
        if self.auto is not None:
            ids.update(x for x in (self.auto.all_special_ids or []) if x is not None)
        if self.sp is not None:
            for i in (self.sp.bos_id(), self.sp.eos_id(), self.sp.unk_id(), self.sp.pad_id()):
                if i >= 0:
                    ids.add(i)
        return ids

    def added_tokens(self):
        """(special tokens, other added tokens) contents."""
        special, other = [], []
        if self.tk is not None:
            for i, t in sorted(self.tk.get_added_tokens_decoder().items()):
                (special if t.special else other).append(t.content)
        elif self.auto is not None:
            for i, t in sorted(self.auto.added_tokens_decoder.items()):
                (special if t.special else other).append(t.content)
        if self.sp is not None and not special:
            for i in range(min(self.sp.get_piece_size(), 1100)):
                p = self.sp.id_to_piece(i)
                if self.sp.is_control(i) or self.sp.is_unknown(i):
                    special.append(p)
                elif not self.sp.is_byte(i) and p[:1] in "[<" and p[-1:] in "]>" and len(p) > 2:
                    other.append(p)
        return special, other


def pick_special_tokens(refs):
    special, other = refs.added_tokens()
    # Prefer the well-known roles first, then a spread over the rest (filler tokens like
    # <SPECIAL_123> or <|reserved_special_token_7|> are numerous; keep a few).
    roles = []
    for src in (refs.auto,):
        if src is None:
            continue
        for attr in ("bos_token", "eos_token", "unk_token", "pad_token"):
            v = getattr(src, attr, None)
            if isinstance(v, str) and v and v not in roles:
                roles.append(v)
    rest = [t for t in special if t not in roles]
    r = random.Random(7)
    picked = roles + rest[:6] + (r.sample(rest[6:], min(3, len(rest[6:]))) if len(rest) > 6 else [])
    picked += other[:3] + (r.sample(other[3:], min(2, len(other[3:]))) if len(other) > 3 else [])
    seen, out = set(), []
    for t in picked:
        if t and t not in seen and t.strip():
            seen.add(t)
            out.append(t)
    return out[:14], special + other


# ----------------------------------------------------------------------------- classification
def is_new_unicode(ch):
    # Python 3.11's unicodedata is Unicode 14: anything it calls unassigned that is not a
    # noncharacter / private use is (for our strings) a Unicode 15/16 character.
    cp = ord(ch)
    if unicodedata.category(ch) != "Cn":
        return False
    if (cp & 0xFFFE) == 0xFFFE or 0xFDD0 <= cp <= 0xFDEF:
        return False
    return True


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b)) if len(a) != len(b) else None


def strip_bos_eos(R, H, ctx, s_text=""):
    """Drop a leading BOS / trailing EOS that only one side has. Returns (r, h, notes)."""
    r, h, notes = list(R), list(H), []
    bos, eos, tok = ctx["bos_ids"], ctx["eos_ids"], ctx["tok"]
    if r and r[0] in bos and (not h or h[0] != r[0]):
        notes.append(f"retain adds leading {r[0]} ({tok(r[0])})")
        r = r[1:]
    elif h and h[0] in bos and (not r or r[0] != h[0]):
        notes.append(f"reference adds leading {h[0]} ({tok(h[0])})")
        h = h[1:]
    # (a trailing special token that the text itself writes is not EOS handling)
    ends_with_tok = lambda i: bool(tok(i)) and s_text.rstrip().endswith(tok(i))
    if r and r[-1] in eos and (not h or h[-1] != r[-1]) and not ends_with_tok(r[-1]):
        notes.append(f"retain adds trailing {r[-1]} ({tok(r[-1])})")
        r = r[:-1]
    elif h and h[-1] in eos and (not r or r[-1] != h[-1]) and not ends_with_tok(h[-1]):
        notes.append(f"reference adds trailing {h[-1]} ({tok(h[-1])})")
        h = h[:-1]
    return r, h, notes


def text_class(r, h, s, ctx):
    """Cause class of a remaining (BOS/EOS-independent) difference, by the text's features."""
    off = 1 if (r and h and r[0] == h[0] and r[0] in ctx["bos_ids"]) else 0
    fd = first_diff(r, h)
    if any(t in s for t in ctx["added_contents"] if t and len(t) > 1):
        return "added/special token written in text"
    if any(is_new_unicode(c) for c in s):
        return "Unicode 15/16 characters"
    if unicodedata.normalize("NFC", s) != s or unicodedata.normalize("NFKC", s) != s:
        return "normalization-sensitive text (NFC/NFD/NFKC)"
    if s[:1].isspace() and fd == off:
        return "leading whitespace / prefix handling"
    if fd == off:
        return "first token / prefix-space handling"
    if any(c.isspace() or unicodedata.category(c) in ("Cc", "Cf", "Zs") for c in s):
        return "whitespace / control / format characters"
    return "other"


def classify(R, H, s, ctx):
    """Primary cause class of a mismatch between retain ids R and reference ids H for text s."""
    r, h, notes = strip_bos_eos(R, H, ctx, s)
    if r == h:
        return "BOS/EOS handling: " + "; ".join(notes)
    c = text_class(r, h, s, ctx)
    if notes:
        c += " [+ BOS/EOS: " + "; ".join(notes) + "]"
    return c


def classify_decode(a, b, specials=()):
    if a is None:
        return "retain decode error"
    sp = sorted((t for t in specials if t), key=len, reverse=True)

    def drop(x):
        for t in sp:
            x = x.replace(t, "")
        return x
    if sp and drop(a) != drop(b) and drop(a).strip() == drop(b).strip() and \
            sum(a.count(t) for t in sp) != sum(b.count(t) for t in sp):
        return "special tokens rendered on one side (+ the space next to them)"
    if sp and drop(a) == drop(b):
        na = sum(a.count(t) for t in sp)
        nb = sum(b.count(t) for t in sp)
        return ("special tokens: reference writes them, retain does not" if nb > na else
                "special tokens: retain writes them, reference does not" if na > nb else
                "special token text differs")
    if a.strip() == b.strip():
        if a.lstrip(" ") == b.lstrip(" "):
            return "leading space"
        return "leading/trailing whitespace"
    if "\ufffd" in a or "\ufffd" in b or any(0xDC80 <= ord(c) <= 0xDCFF for c in a):
        return "invalid UTF-8 / replacement character"
    if " ".join(a.split()) == " ".join(b.split()):
        return "inner whitespace (cleanup_tokenization_spaces?)"
    return "other"


# ----------------------------------------------------------------------------- per directory
def short_list(ids, center, width=6):
    if len(ids) <= 2 * width + 4:
        return str(ids)
    lo, hi = max(0, center - width), min(len(ids), center + width)
    return ("[… " if lo else "[") + ", ".join(map(str, ids[lo:hi])) + (" …]" if hi < len(ids) else "]") \
        + f" (len {len(ids)})"


def example(R, H, s, refs, cat, ctx=None):
    fd = first_diff(R, H)
    if ctx is not None:
        # first difference beyond a BOS/EOS only one side has
        r, h, notes = strip_bos_eos(R, H, ctx, s)
        lead_r = 1 if (len(R) > len(r) and R[:1] != r[:1] and R[1:1 + len(r)] == r) else 0
        lead_h = 1 if (len(H) > len(h) and H[:1] != h[:1] and H[1:1 + len(h)] == h) else 0
        fd2 = first_diff(r, h)
        if fd2 is not None and (lead_r or lead_h):
            fd = fd2 + max(lead_r, lead_h)
            tr = r[fd2] if fd2 < len(r) else None
            th = h[fd2] if fd2 < len(h) else None
            return {"category": cat, "text": s, "retain": R, "reference": H,
                    "first_diff": fd, "first_diff_note": f"after dropping {'; '.join(notes)}: index {fd2}",
                    "retain_tok": None if tr is None else [tr, refs.tok(tr)],
                    "reference_tok": None if th is None else [th, refs.tok(th)]}
    fd = 0 if fd is None else fd
    tr = R[fd] if fd < len(R) else None
    th = H[fd] if fd < len(H) else None
    return {
        "category": cat,
        "text": s,
        "retain": R,
        "reference": H,
        "first_diff": fd,
        "retain_tok": None if tr is None else [tr, refs.tok(tr)],
        "reference_tok": None if th is None else [th, refs.tok(th)],
    }


def compare_dir(binary, d, base, args, work):
    t0 = time.time()
    name = os.path.basename(d.rstrip("/"))
    res = {"dir": d, "name": name}
    refs = Refs(d)
    res["meta"] = refs.meta
    res["tokenizer_class"] = refs.config.get("tokenizer_class") if refs.config else None
    res["auto_loader"] = refs.auto_loader
    res["ref_errors"] = refs.errors
    res["files"] = sorted(x for x in os.listdir(d) if x != "realtok_source.json")
    picked, all_added = pick_special_tokens(refs)
    res["special_tokens_in_text"] = picked
    strings = list(base) + strings_gen.special_strings(picked, name, args.seed)
    seen = set()
    strings = [(c, s) for c, s in strings if not (s in seen or seen.add(s))]
    texts = [s for _, s in strings]
    res["n_strings"] = len(texts)
    # ---- retain
    retain_ids, retain_err = [None] * len(texts), [None] * len(texts)
    res["retain_error"] = None
    # can retain load this tokenizer at all?
    probe, probe_err = retain_encode_cli(binary, d, "a", work)
    if probe is None:
        res["retain_error"] = probe_err
        res["refs"], res["decode"], res["cli_vs_prep_mismatches"] = {}, {}, []
        res["seconds"] = round(time.time() - t0, 1)
        return res
    if args.encode_mode == "prep":
        # One prep over all texts; when retain rejects some text (prep stops at the first error),
        # prep in chunks and run the strings of the failing chunks through the CLI one by one.
        prep_docs = {}
        failed = []
        try:
            docs = retain_encode_prep(binary, d, texts, work)
            prep_docs.update(enumerate(docs))
        except RuntimeError as e:
            res["prep_error"] = str(e)
            size = 40
            for lo in range(0, len(texts), size):
                hi = min(len(texts), lo + size)
                try:
                    docs = retain_encode_prep(binary, d, texts[lo:hi], work)
                    prep_docs.update((lo + k, doc) for k, doc in enumerate(docs))
                except RuntimeError:
                    failed.extend(range(lo, hi))
        # prep appends EOS to every document when the tokenizer has one: find it
        lasts = {doc[-1] for doc in prep_docs.values() if doc}
        eos = None
        if prep_docs and all(prep_docs.values()) and len(lasts) == 1 and len(prep_docs) > 2:
            eos = lasts.pop()
        res["prep_eos_stripped"] = eos
        # prep ends a document in exactly one EOS: it appends none when the full encoding already
        # ends in EOS (here: a text that ends by writing the EOS token itself).
        eos_text = None
        if eos is not None:
            tj = json.load(open(os.path.join(d, "tokenizer.json"))) if os.path.exists(os.path.join(d, "tokenizer.json")) else {}
            for a in tj.get("added_tokens", []) or []:
                if a.get("id") == eos:
                    eos_text = a.get("content")
        for i, doc in prep_docs.items():
            wrote_eos = eos_text is not None and texts[i].endswith(eos_text)
            retain_ids[i] = doc[:-1] if eos is not None and not wrote_eos else doc
        for i in failed:
            retain_ids[i], retain_err[i] = retain_encode_cli(binary, d, texts[i], work)
        res["cli_fallback_strings"] = len(failed)
    else:
        for i, s in enumerate(texts):
            retain_ids[i], retain_err[i] = retain_encode_cli(binary, d, s, work)
    # ---- CLI cross-check of the prep path
    cli_mism = []
    if args.encode_mode == "prep" and args.cli_sample > 0:
        r = random.Random(args.seed + 1)
        ok = [i for i in range(len(texts)) if retain_err[i] is None and retain_ids[i] is not None]
        idx = sorted(set(ok[:1] + ok[-1:] + r.sample(ok, min(args.cli_sample, len(ok)))))
        for i in idx:
            ids, err = retain_encode_cli(binary, d, texts[i], work)
            if err or ids != retain_ids[i]:
                cli_mism.append({"text": texts[i], "prep": retain_ids[i], "cli": ids, "error": err})
        res["cli_checked"] = len(idx)
    res["cli_vs_prep_mismatches"] = cli_mism
    # ---- references
    bos_ids, eos_ids = set(), set()
    for src in (refs.auto,):
        if src is not None:
            if src.bos_token_id is not None:
                bos_ids.add(src.bos_token_id)
            if src.eos_token_id is not None:
                eos_ids.add(src.eos_token_id)
    if refs.sp is not None:
        if refs.sp.bos_id() >= 0:
            bos_ids.add(refs.sp.bos_id())
        if refs.sp.eos_id() >= 0:
            eos_ids.add(refs.sp.eos_id())
    if res.get("prep_eos_stripped") is not None:
        eos_ids.add(res["prep_eos_stripped"])
    if refs.tk is not None:  # a leading special token the post-processor adds
        try:
            e0 = refs.tk.encode("", add_special_tokens=True).ids
            if e0:
                bos_ids.add(e0[0])
                eos_ids.add(e0[-1])
        except Exception:
            pass
    ctx = {"special_ids": refs.special_ids(), "tok": refs.tok, "bos_ids": bos_ids,
           "eos_ids": eos_ids, "added_contents": [t for t in all_added]}
    res["bos_ids"], res["eos_ids"] = sorted(bos_ids), sorted(eos_ids)
    ref_funcs = {}
    if refs.tk is not None:
        ref_funcs["tokenizers"] = refs.enc_tk
    if refs.auto is not None:
        ref_funcs["transformers"] = refs.enc_auto
    if refs.sp is not None:
        ref_funcs["sentencepiece"] = refs.enc_sp
    res["refs"] = {}
    ref_ids_store = {}
    # the primary reference (the library retain implements for this dir): tokenizers for
    # tokenizer.json dirs, sentencepiece for tokenizer.model-only dirs. A mismatch against another
    # reference where retain equals the primary is a difference between the references.
    primary = "tokenizers" if "tokenizers" in ref_funcs else ("sentencepiece" if "sentencepiece" in ref_funcs else None)
    order = [primary] + [k for k in ref_funcs if k != primary] if primary else list(ref_funcs)
    ref_funcs = {k: ref_funcs[k] for k in order}
    res["primary_reference"] = primary
    primary_ids = None
    for rname, fn in ref_funcs.items():
        mism, classes, errors = [], {}, 0
        ids_all = []
        for (cat, s), R, rerr in zip(strings, retain_ids, retain_err):
            try:
                H = fn(s)
            except Exception as e:
                H = None
                errors += 1
            ids_all.append(H)
            if H is None:
                continue
            if R is None:
                cls = "retain error: " + (rerr or "?")
                mism.append(cls)
                classes.setdefault(cls, []).append({"category": cat, "text": s, "reference": H})
                continue
            if R != H:
                cls = classify(R, H, s, ctx)
                if rname != primary and primary_ids is not None and primary_ids[len(ids_all) - 1] == R:
                    cls = f"[retain = {primary}] " + cls
                mism.append(cls)
                classes.setdefault(cls, []).append(example(R, H, s, refs, cat, ctx))
        ref_ids_store[rname] = ids_all
        if rname == primary:
            primary_ids = ids_all
        res["refs"][rname] = {"compared": sum(1 for x in ids_all if x is not None),
                              "mismatches": len(mism), "ref_errors": errors,
                              "classes": {k: {"count": len(v), "examples": v} for k, v in
                                          sorted(classes.items(), key=lambda kv: -len(kv[1]))}}
    # ---- decoding
    dec = {}
    if ref_funcs and res["retain_error"] is None:
        base_ids = None
        for rname in ([primary] if primary else []) + ["tokenizers", "transformers", "sentencepiece"]:
            if rname in ref_ids_store:
                base_ids, base_name = ref_ids_store[rname], rname
                break
        cand = [i for i, ids in enumerate(base_ids) if ids]
        if args.decode_sample and args.decode_sample < len(cand):
            # stratified by category: one per category first, then random
            r = random.Random(args.seed + 2)
            bycat = {}
            for i in cand:
                bycat.setdefault(strings[i][0], []).append(i)
            chosen = set(r.choice(v) for v in bycat.values())
            rest = [i for i in cand if i not in chosen]
            chosen.update(r.sample(rest, max(0, min(len(rest), args.decode_sample - len(chosen)))))
            cand = sorted(chosen)
        dec_refs = {}
        if refs.auto is not None:
            dec_refs["transformers"] = (False, refs.dec_auto)
            if args.decode_skip_special:
                dec_refs["transformers skip_special"] = (
                    True, lambda ids: refs.auto.decode(ids, skip_special_tokens=True))
        if refs.tk is not None:
            dec_refs["tokenizers"] = (False, refs.dec_tk)
            if args.decode_skip_special:
                dec_refs["tokenizers skip_special"] = (
                    True, lambda ids: refs.tk.decode(ids, skip_special_tokens=True))
        if refs.sp is not None:
            dec_refs["sentencepiece"] = (False, refs.dec_sp)
        dres = {k: {"compared": 0, "mismatches": 0, "classes": {}} for k in dec_refs}
        specials = [refs.tok(i) for i in ctx["special_ids"]]
        for i in cand:
            ids = base_ids[i]
            outs = {False: retain_decode_cli(binary, d, ids, skip_special=False)}
            if args.decode_skip_special:
                outs[True] = retain_decode_cli(binary, d, ids, skip_special=True)
            for k, (skip, fn) in dec_refs.items():
                out, err = outs[skip]
                try:
                    want = fn(ids)
                except Exception as e:
                    continue
                dres[k]["compared"] += 1
                if out != want:
                    cls = classify_decode(out, want, specials) if err is None else "retain decode error: " + err
                    dres[k]["mismatches"] += 1
                    dres[k]["classes"].setdefault(cls, []).append(
                        {"category": strings[i][0], "text": texts[i], "ids": ids, "retain": out,
                         "reference": want})
        for k in dres:
            dres[k]["classes"] = {c: {"count": len(v), "examples": v} for c, v in
                                  sorted(dres[k]["classes"].items(), key=lambda kv: -len(kv[1]))}
        dec = {"ids_from": base_name, "strings": len(cand), "vs": dres}
    res["decode"] = dec
    res["seconds"] = round(time.time() - t0, 1)
    return res


# ----------------------------------------------------------------------------- report
def trunc(s, n=110):
    r = repr(s)
    return r if len(r) <= n else r[:n] + "…'"


def md_escape(s):
    return s.replace("|", "\\|").replace("`", "ˋ")


def write_report(results, args, path):
    L = []
    L.append("# retain tokenizer vs real tokenizer files\n")
    L.append(f"retain binary: `{args.retain}`  ")
    L.append(f"generated: {time.strftime('%Y-%m-%d %H:%M:%S')}; seed {args.seed}; encode mode "
             f"{args.encode_mode}; decode sample {args.decode_sample or 'all'} strings/dir\n")
    try:
        import tokenizers, transformers, sentencepiece
        L.append(f"tokenizers {tokenizers.__version__}, transformers {transformers.__version__}, "
                 f"sentencepiece {sentencepiece.__version__}\n")
    except Exception:
        pass
    L.append("## Summary\n")
    L.append("| dir | tokenizer_class | strings | vs tokenizers | vs AutoTokenizer | vs sentencepiece "
             "| decode vs Auto | decode vs tokenizers | decode vs spm | decode skip-special vs Auto / tokenizers | CLI=prep |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")

    def cell(rr, key):
        x = rr.get(key)
        if x is None:
            return "–"
        return f"{x['mismatches']}/{x['compared']}"

    for r in results:
        if r.get("fatal"):
            L.append(f"| {r['name']} | | | FATAL: {md_escape(r['fatal'][:120])} | | | | | | | |")
            continue
        if r["retain_error"]:
            L.append(f"| {r['name']} | {r['tokenizer_class']} | {r['n_strings']} | retain cannot load: "
                     f"{md_escape(r['retain_error'][:150])} | | | | | | | |")
            continue
        dv = r["decode"].get("vs", {}) if r["decode"] else {}
        cli = f"{r.get('cli_checked', 0) - len(r['cli_vs_prep_mismatches'])}/{r.get('cli_checked', 0)}" \
            if r.get("cli_checked") else "–"
        L.append(f"| {r['name']} | {r['tokenizer_class']} | {r['n_strings']} | {cell(r['refs'], 'tokenizers')} | "
                 f"{cell(r['refs'], 'transformers')} | {cell(r['refs'], 'sentencepiece')} | "
                 f"{cell(dv, 'transformers')} | {cell(dv, 'tokenizers')} | {cell(dv, 'sentencepiece')} | "
                 f"{cell(dv, 'transformers skip_special')} / {cell(dv, 'tokenizers skip_special')} | {cli} |")
    L.append("\nCells: mismatches/compared. Encode: retain `encode_prompt` ids (what `retain tokenize --ids` "
             "prints) vs the reference with add_special_tokens=True. Decode: retain `tokenize --decode` "
             "of the reference ids vs the reference decode (skip_special_tokens=False).\n")
    # class overview
    L.append("## Mismatch classes (all dirs)\n")
    L.append("| dir | reference | class | count |")
    L.append("|---|---|---|---|")
    for r in results:
        if r.get("fatal") or r["retain_error"]:
            continue
        for rn, rr in r["refs"].items():
            for c, v in rr["classes"].items():
                L.append(f"| {r['name']} | {rn} | {md_escape(c)} | {v['count']} |")
        for rn, rr in (r["decode"].get("vs", {}) if r["decode"] else {}).items():
            for c, v in rr["classes"].items():
                L.append(f"| {r['name']} | decode vs {rn} | {md_escape(c)} | {v['count']} |")
    L.append("")
    # per dir details
    for r in results:
        L.append(f"## {r['name']}\n")
        if r.get("fatal"):
            L.append("FATAL: " + r["fatal"] + "\n")
            continue
        m = r.get("meta", {})
        L.append(f"- source: `{m.get('source')}` ({m.get('kind')}); {m.get('note', '')}")
        L.append(f"- files: {', '.join(r['files'])}; tokenizer_class: {r['tokenizer_class']}; "
                 f"transformers loader: {r['auto_loader']}")
        if r["ref_errors"]:
            L.append(f"- reference load errors: {r['ref_errors']}")
        L.append(f"- special/added tokens written in text: {[t for t in r['special_tokens_in_text']]}")
        if r.get("prep_error"):
            L.append(f"- retain prep over all strings failed ({r['prep_error']}); prepped in chunks of 40, "
                     f"{r.get('cli_fallback_strings')} strings of failing chunks run through `retain tokenize` one by one")
        if r.get("prep_eos_stripped") is not None:
            L.append(f"- prep appended EOS id {r['prep_eos_stripped']} (stripped)")
        if r["retain_error"]:
            L.append(f"- **retain cannot tokenize with this dir**: `{r['retain_error']}`\n")
            continue
        if r["cli_vs_prep_mismatches"]:
            L.append(f"- **CLI vs prep disagree** on {len(r['cli_vs_prep_mismatches'])} strings: "
                     + "; ".join(trunc(x['text'], 60) for x in r['cli_vs_prep_mismatches'][:3]))
        L.append(f"- time: {r['seconds']} s\n")
        for rn, rr in r["refs"].items():
            L.append(f"### encode vs {rn}: {rr['mismatches']}/{rr['compared']} mismatches\n")
            for c, v in rr["classes"].items():
                L.append(f"**{md_escape(c)}** — {v['count']}\n")
                for ex in v["examples"][:args.examples]:
                    if "retain" not in ex:
                        L.append(f"- [{ex['category']}] {md_escape(trunc(ex['text']))}: reference {ex['reference'][:20]}")
                        continue
                    fd = ex["first_diff"]
                    L.append(f"- [{ex['category']}] `{md_escape(trunc(ex['text']))}`  \n"
                             f"  retain    {short_list(ex['retain'], fd)}  \n"
                             f"  reference {short_list(ex['reference'], fd)}  \n"
                             f"  first diff at {fd}"
                             + (f" ({ex['first_diff_note']})" if ex.get('first_diff_note') else "")
                             + f": retain {ex['retain_tok']} vs reference {ex['reference_tok']}")
                L.append("")
        if r["decode"]:
            dv = r["decode"]
            L.append(f"### decode ({dv['strings']} strings, ids from {dv['ids_from']})\n")
            for rn, rr in dv["vs"].items():
                L.append(f"- vs {rn}: {rr['mismatches']}/{rr['compared']} mismatches")
                for c, v in rr["classes"].items():
                    L.append(f"  - **{md_escape(c)}** — {v['count']}")
                    for ex in v["examples"][:args.examples]:
                        L.append(f"    - [{ex['category']}] ids {short_list(ex['ids'], 0)}: retain "
                                 f"`{md_escape(trunc(ex['retain'], 80))}` vs `{md_escape(trunc(ex['reference'], 80))}`")
            L.append("")
    with open(path, "w") as f:
        f.write("\n".join(L) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--retain", required=True, help="retain binary")
    ap.add_argument("--dirs", nargs="+", required=True, help="model directories")
    ap.add_argument("--out", default="report.md")
    ap.add_argument("--json", default=None, help="full results (default: <out>.json)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--encode-mode", choices=["prep", "cli"], default="prep",
                    help="prep: one `retain prep` per dir (fast); cli: `retain tokenize --file` per string")
    ap.add_argument("--cli-sample", type=int, default=8,
                    help="strings per dir also run through `retain tokenize --ids` to check prep == CLI")
    ap.add_argument("--decode-sample", type=int, default=30,
                    help="strings per dir decoded with `retain tokenize --decode` (0 = all; ~0.5-2 s each)")
    ap.add_argument("--no-decode-skip-special", dest="decode_skip_special", action="store_false",
                    help="do not also compare `--decode --skip-special` with skip_special_tokens=True")
    ap.add_argument("--examples", type=int, default=3)
    ap.add_argument("--strings-out", default=None, help="also write the base strings as JSON")
    args = ap.parse_args()
    binary = os.path.abspath(args.retain)
    base = strings_gen.base_strings(args.seed)
    if args.strings_out:
        json.dump(base, open(args.strings_out, "w"), ensure_ascii=False, indent=0)
    dirs = [d for d in args.dirs if os.path.isdir(d)]
    results = []
    work = tempfile.mkdtemp(prefix="realtok_", dir=os.environ.get("REALTOK_TMP", tempfile.gettempdir()))
    try:
        for d in dirs:
            print(f"[compare] {d} ...", file=sys.stderr, flush=True)
            try:
                res = compare_dir(binary, os.path.abspath(d), base, args, work)
            except Exception as e:
                traceback.print_exc()
                res = {"dir": d, "name": os.path.basename(d.rstrip("/")), "fatal": repr(e)}
            results.append(res)
            if not res.get("fatal"):
                summ = {k: f"{v['mismatches']}/{v['compared']}" for k, v in res.get("refs", {}).items()}
                dsum = {k: f"{v['mismatches']}/{v['compared']}" for k, v in
                        (res["decode"].get("vs", {}) if res.get("decode") else {}).items()}
                print(f"[compare]   {res['name']}: encode {summ} decode {dsum} "
                      f"retain_error={res.get('retain_error')} ({res.get('seconds')} s)",
                      file=sys.stderr, flush=True)
            write_report(results, args, args.out)
            with open(args.json or (os.path.splitext(args.out)[0] + ".json"), "w") as f:
                json.dump(results, f, ensure_ascii=False, indent=1, default=str)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"[compare] wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
