#!/usr/bin/env python
"""Build model directories (tokenizer.json / tokenizer.model + tokenizer_config.json) that retain
can read, from real tokenizer files shipped in PyPI packages:
  * mistral-common wheel: mistral_common/data/tokenizer.model.v1, mistral_instruct_tokenizer_*.model.v*,
    tekken_*.json
  * llama-cpp-python sdist: vendor/llama.cpp/models/ggml-vocab-*.gguf (vocab-only GGUFs)

Each directory gets a sidecar realtok_source.json: {source, kind, tokenizer_class, spm_model?, note}.
compare.py reads it (spm_model = the SentencePiece .model the dir derives from, used for the
sentencepiece reference).

Usage:
  PYTHONPATH=$RETAIN_HOME/realtok/site ~/.cache/retain/venv/bin/python build_dirs.py \
      --src $RETAIN_HOME/realtok/src --out $RETAIN_HOME/realtok/dirs   (README.md: the downloads)
"""
import argparse
import glob
import json
import os
import shutil
import sys
import traceback
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def write_meta(d, **meta):
    with open(os.path.join(d, "realtok_source.json"), "w") as f:
        json.dump(meta, f, indent=1)


def tok_class(d):
    p = os.path.join(d, "tokenizer_config.json")
    if os.path.exists(p):
        return json.load(open(p)).get("tokenizer_class")
    return None


def fresh(d):
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)


def build_spm(src_model, name, out, log):
    from transformers import LlamaTokenizer
    # (1) only tokenizer.model: retain reads it with SentencePiece
    d = os.path.join(out, name + "-spm")
    fresh(d)
    shutil.copy(src_model, os.path.join(d, "tokenizer.model"))
    write_meta(d, source=src_model, kind="sentencepiece-model-only", tokenizer_class=None,
               spm_model=os.path.join(d, "tokenizer.model"),
               note="tokenizer.model only (retain: SentencePiece library)")
    log.append((d, "ok", None))
    # (2) transformers' LlamaTokenizer converted from the .model, saved as tokenizer.json
    d = os.path.join(out, name + "-hf")
    fresh(d)
    try:
        tmp = os.path.join(out, ".tmp_" + name)
        fresh(tmp)
        shutil.copy(src_model, os.path.join(tmp, "tokenizer.model"))
        tok = LlamaTokenizer.from_pretrained(tmp)
        tok.save_pretrained(d)
        shutil.rmtree(tmp)
        # keep only tokenizer.json so retain and AutoTokenizer both read the converted file
        tm = os.path.join(d, "tokenizer.model")
        if os.path.exists(tm):
            os.remove(tm)
        write_meta(d, source=src_model, kind="transformers-LlamaTokenizer-from-spm",
                   tokenizer_class=tok_class(d), spm_model=src_model,
                   note="LlamaTokenizer.from_pretrained(dir with tokenizer.model).save_pretrained")
        log.append((d, "ok", None))
    except Exception as e:
        shutil.rmtree(d, ignore_errors=True)
        log.append((d, "FAILED", repr(e)))


def build_tekken(src_json, name, out, log):
    from transformers.integrations.mistral.tokenizer import convert_tekken_tokenizer
    d = os.path.join(out, name)
    fresh(d)
    try:
        raw = json.load(open(src_json))
        note = "transformers convert_tekken_tokenizer(tekken.json).save_pretrained"
        if "special_tokens" not in raw:
            # old tekken format: the special-token names mistral-common's Tekkenizer gives such
            # files (its DEPRECATED_SPECIAL_TOKENS, ranks 0..19), the rest <SPECIAL_i>
            names = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]",
                     "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]",
                     "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]", "[PREFIX]", "[MIDDLE]",
                     "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]"]
            raw["special_tokens"] = [{"rank": i, "token_str": s, "is_control": True}
                                     for i, s in enumerate(names)]
            note += " (special_tokens added from mistral-common's DEPRECATED_SPECIAL_TOKENS)"
        tmp = os.path.join(out, ".tmp_" + name)
        fresh(tmp)
        tj = os.path.join(tmp, "tekken.json")
        json.dump(raw, open(tj, "w"))
        tok = convert_tekken_tokenizer(tj)
        tok.save_pretrained(d)
        shutil.rmtree(tmp)
        for extra in ("tekken.json",):
            p = os.path.join(d, extra)
            if os.path.exists(p):
                os.remove(p)
        write_meta(d, source=src_json, kind="tekken-converted", tokenizer_class=tok_class(d),
                   spm_model=None, note=note)
        log.append((d, "ok", None))
    except Exception as e:
        traceback.print_exc()
        shutil.rmtree(d, ignore_errors=True)
        log.append((d, "FAILED", repr(e)))


def build_gguf(src, name, out, log):
    from transformers import AutoTokenizer
    d = os.path.join(out, name)
    fresh(d)
    try:
        tok = AutoTokenizer.from_pretrained(os.path.dirname(src), gguf_file=os.path.basename(src))
        tok.save_pretrained(d)
        write_meta(d, source=src, kind="gguf-converted", tokenizer_class=tok_class(d),
                   spm_model=None,
                   note="AutoTokenizer.from_pretrained(dir, gguf_file=...).save_pretrained")
        log.append((d, "ok", None))
    except Exception as e:
        # AutoTokenizer refuses architectures it has no config for (gemma4 config validation,
        # gptneox, mpt, ...); the tokenizer converter itself is generic, so build the backend
        # directly from the GGUF vocabulary.
        first = repr(e)[:200]
        try:
            from transformers import TokenizersBackend
            fresh(d)
            tok = TokenizersBackend.from_pretrained(os.path.dirname(src),
                                                    gguf_file=os.path.basename(src))
            tok.save_pretrained(d)
            write_meta(d, source=src, kind="gguf-converted-fallback",
                       tokenizer_class=tok_class(d), spm_model=None,
                       note="AutoTokenizer failed (" + first + "); "
                            "TokenizersBackend.from_pretrained(dir, gguf_file=...).save_pretrained")
            log.append((d, "ok", "fallback: " + first))
        except Exception as e2:
            shutil.rmtree(d, ignore_errors=True)
            log.append((d, "FAILED", first + " / fallback: " + repr(e2)[:200]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default=None, help="substring filter on source names")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    log = []
    data = os.path.join(a.src, "mistral_common", "data")
    spm = [("mistral-v1", "tokenizer.model.v1"),
           ("mistral-instruct-v2", "mistral_instruct_tokenizer_240216.model.v2"),
           ("mistral-instruct-v3", "mistral_instruct_tokenizer_240323.model.v3"),
           ("mistral-instruct-v7", "mistral_instruct_tokenizer_241114.model.v7")]
    # (v7m1 is byte-identical to v7)
    for name, f in spm:
        if a.only and a.only not in name:
            continue
        build_spm(os.path.join(data, f), name, a.out, log)
    for f in sorted(glob.glob(os.path.join(data, "tekken_*.json"))):
        name = "mistral-" + os.path.basename(f)[:-5].replace("_", "-")
        if a.only and a.only not in name:
            continue
        build_tekken(f, name, a.out, log)
    models = glob.glob(os.path.join(a.src, "llama_cpp_python-*", "vendor", "llama.cpp", "models"))
    for m in models:
        for f in sorted(glob.glob(os.path.join(m, "ggml-vocab-*.gguf"))):
            name = "gguf-" + os.path.basename(f)[len("ggml-vocab-"):-len(".gguf")]
            if a.only and a.only not in name:
                continue
            build_gguf(f, name, a.out, log)
    for d, st, err in log:
        cls = tok_class(d) if st == "ok" else None
        print(f"{st:7s} {d}  class={cls}" + (f"  {err}" if err else ""))
    with open(os.path.join(a.out, "..", "build_log.json"), "w") as f:
        json.dump(log, f, indent=1)


if __name__ == "__main__":
    main()
