#!/usr/bin/env bash
# Installs NVIDIA kvpress 0.5.5 and the transformers it needs (< 5.3) into a folder outside the
# project's venv, for the peer drivers in scripts/peers/ (put the folder first on PYTHONPATH).
# The project's venv keeps transformers 5.23 for the parity tests; kvpress would downgrade it.
# Idempotent: a finished folder holds a stamp naming the pins.
#
#   scripts/peers/install-kvpress.sh [DIR]     # default: $RETAIN_HOME/kvpress-peer
#   PYTHONPATH=DIR python scripts/peers/bench_decode.py ...
set -euo pipefail

RETAIN_HOME="${RETAIN_HOME:-$HOME/.cache/retain}"
DIR="${1:-$RETAIN_HOME/kvpress-peer}"
PYTHON="${RETAIN_PYTHON:-$RETAIN_HOME/venv/bin/python}"
PINS=(kvpress==0.5.5 transformers==5.2.0 'tokenizers>=0.22,<0.23' 'huggingface_hub>=1.3,<2'
  httpx httpcore anyio sniffio h11 certifi idna cachetools fire termcolor protobuf requests
  urllib3 charset_normalizer hf_xet)
STAMP="$DIR/.retain-stamp"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "${PINS[*]}" ]; then
  echo "$DIR"
  exit 0
fi
# Into a temporary folder, then renamed: an interrupted install leaves nothing half-written.
rm -rf "$DIR.part"
"$PYTHON" -m pip install -q --disable-pip-version-check --no-deps --target "$DIR.part" \
  "${PINS[@]}" >&2
echo "${PINS[*]}" > "$DIR.part/.retain-stamp"
rm -rf "$DIR"
mv "$DIR.part" "$DIR"
echo "$DIR"
