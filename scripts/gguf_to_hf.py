#!/usr/bin/env python3
"""Turns a GGUF checkpoint into a HuggingFace directory retain reads (config.json, fp32
model.safetensors, tokenizer.json, tokenizer_config.json with the GGUF's chat template).

transformers' own GGUF loader does the work (it dequantizes every tensor to fp32 and rebuilds the
tokenizer from the GGUF vocabulary); this script checks what it is given first, so that a GGUF retain
cannot run fails here naming what is wrong, and writes the directory atomically (a temp dir renamed
into place: a killed run leaves no half-written model).

Usage: gguf_to_hf.py --gguf FILE --out DIR [--source-note TEXT]
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
warnings.filterwarnings("ignore")

# The GGUF architectures whose HF model_type retain's decoder implements (Mistral GGUFs say llama).
ARCHITECTURES = {"llama", "qwen2", "qwen3"}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_gguf(path):
    """Refuses an architecture retain has no decoder for, or a tensor type nothing here dequantizes."""
    import gguf

    try:
        reader = gguf.GGUFReader(path)
    except Exception as e:  # the reader raises ValueError/struct errors on a bad file
        sys.exit(f"{path}: not a readable GGUF file ({e})")
    field = reader.fields.get("general.architecture")
    if field is None:
        sys.exit(f"{path}: no general.architecture key; is this a model GGUF (not a vocab-only one)?")
    arch = bytes(field.parts[field.data[0]]).decode()
    if arch not in ARCHITECTURES:
        sys.exit(f"{path}: architecture '{arch}' is not supported (retain runs {', '.join(sorted(ARCHITECTURES))})")
    dense = {gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16, gguf.GGMLQuantizationType.BF16}
    known = dense | set(gguf.quants._type_traits)
    bad = sorted({t.tensor_type.name for t in reader.tensors if t.tensor_type not in known})
    if bad:
        sys.exit(f"{path}: quantization {', '.join(bad)} cannot be dequantized by gguf {gguf.__version__}")
    if not reader.tensors:
        sys.exit(f"{path}: holds no tensors (a vocab-only GGUF?)")
    types = sorted({t.tensor_type.name for t in reader.tensors})
    return arch, types


def convert(gguf_path, out, note):
    arch, types = check_gguf(gguf_path)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = os.path.split(os.path.abspath(gguf_path))
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype="float32")
    # The weights are dense fp32 now; save_pretrained refuses a model that still names its GGUF
    # quantizer, so the quantizer and its config go.
    model.hf_quantizer = None
    model.config.quantization_config = None
    if hasattr(model.config, "_name_or_path"):
        model.config._name_or_path = ""

    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".gguf-to-hf-", dir=parent)
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        config_path = os.path.join(tmp, "config.json")
        with open(config_path) as f:
            config = json.load(f)
        config.pop("quantization_config", None)
        with open(config_path, "w") as f:
            json.dump(config, f, indent=2)
        with open(os.path.join(tmp, "source.json"), "w") as f:
            json.dump({"gguf": name, "gguf_sha256": sha256(gguf_path), "architecture": arch,
                       "gguf_tensor_types": types, "note": note}, f, indent=1)
        os.chmod(tmp, 0o755)  # mkdtemp's 0700 would hide the model from other users of the cache
        if os.path.exists(out):
            shutil.rmtree(out)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--source-note", default="")
    args = ap.parse_args()
    if not os.path.isfile(args.gguf):
        sys.exit(f"{args.gguf}: no such file")
    convert(args.gguf, args.out, args.source_note)


if __name__ == "__main__":
    main()
