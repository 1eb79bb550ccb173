#!/usr/bin/env bash
# Installs NVIDIA kvpress 0.5.5 and the transformers it needs (< 5.3) into a folder outside the
# project's venv, for the peer drivers in scripts/peers/ (put the folder first on PYTHONPATH).
# The project's venv keeps transformers 5.23 for the parity tests; kvpress would downgrade it.
# The pins live here only: the GPU bundle downloads the same wheels with --download.
# Idempotent: a finished folder holds a stamp naming the pins; an interrupted install leaves
# nothing half-written.
#
#   scripts/peers/install-kvpress.sh [DIR]                  # from PyPI; default $RETAIN_HOME/kvpress-peer
#   scripts/peers/install-kvpress.sh --wheels WHEELS [DIR]  # offline, from downloaded wheels
#   scripts/peers/install-kvpress.sh --download WHEELS      # download them (CPython 3.12, manylinux)
#   PYTHONPATH=DIR python scripts/peers/bench_decode.py ...
set -euo pipefail

RETAIN_HOME="${RETAIN_HOME:-$HOME/.cache/retain}"
PYTHON="${RETAIN_PYTHON:-$RETAIN_HOME/venv/bin/python}"
# What transformers 5.2 and kvpress need beyond what a torch environment with transformers 5.23
# already has (the project's venv; the GPU machine with the bundle's wheels): hf_xet is left out
# (hub downloads only; nothing is downloaded here).
PINS=(kvpress==0.5.5 transformers==5.2.0 'tokenizers>=0.22,<0.23' 'huggingface_hub>=1.3,<2'
  httpx httpcore anyio sniffio h11 certifi idna cachetools fire termcolor protobuf requests
  urllib3 charset_normalizer)

if [ "${1:-}" = "--download" ]; then
  wheels=${2:?usage: $0 --download WHEELS_DIR}
  stamp="$wheels/.retain-stamp"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${PINS[*]}" ]; then exit 0; fi
  rm -rf "$wheels.part" && mkdir -p "$wheels.part"
  "$PYTHON" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d "$wheels.part" \
    "${PINS[@]}" >&2
  echo "${PINS[*]}" > "$wheels.part/.retain-stamp"
  rm -rf "$wheels" && mv "$wheels.part" "$wheels"
  exit 0
fi

source_args=()
if [ "${1:-}" = "--wheels" ]; then
  wheels=${2:?usage: $0 --wheels WHEELS_DIR [DIR]}
  source_args=(--no-index --find-links "$wheels")
  shift 2
fi
DIR="${1:-$RETAIN_HOME/kvpress-peer}"
STAMP="$DIR/.retain-stamp"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "${PINS[*]}" ]; then
  echo "$DIR"
  exit 0
fi
rm -rf "$DIR.part"
"$PYTHON" -m pip install -q --disable-pip-version-check --no-deps --no-compile \
  "${source_args[@]}" --target "$DIR.part" "${PINS[@]}" >&2
echo "${PINS[*]}" > "$DIR.part/.retain-stamp"
rm -rf "$DIR"
mv "$DIR.part" "$DIR"
echo "$DIR"
