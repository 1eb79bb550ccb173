#!/usr/bin/env bash
# Fetches the chat templates the Jinja engine is tested against (tests/jinja_test.cpp through
# tests/fixtures/make_chat_template_cases.py): llama.cpp's collection of real models' templates
# (models/templates/*.jinja) and its vocabulary GGUFs (whose metadata carry more templates), both
# shipped inside the llama-cpp-python sdist on PyPI. Only those files are kept; nothing is built.
#
#   scripts/fetch_llama_cpp_python.sh [PYTHON]   -> $RETAIN_HOME/llama-cpp-python/models/
#
# Idempotent: a finished directory holds a stamp naming the sdist's SHA-256, and then this returns
# at once. The sdist is pinned by version and SHA-256: a different file stops here before tar reads
# it. The models/ directory appears whole or not at all (extracted beside it, then renamed).
set -euo pipefail

RETAIN_HOME="${RETAIN_HOME:-$HOME/.cache/retain}"
PYTHON="${1:-$RETAIN_HOME/venv/bin/python}"
VERSION=0.3.36
SDIST=llama_cpp_python-$VERSION.tar.gz
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
DIR="$RETAIN_HOME/llama-cpp-python"
OUT="$DIR/models"
STAMP="$OUT/.retain-source"

[ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$SDIST $SHA256" ] && exit 0

mkdir -p "$DIR"
sha_ok() { [ -f "$1" ] && echo "$SHA256  $1" | sha256sum -c --status; }
if ! sha_ok "$DIR/$SDIST"; then
  rm -f "$DIR/$SDIST"
  echo "setup: downloading the llama-cpp-python==$VERSION sdist (its chat templates, ~77 MB)"
  "$PYTHON" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$DIR"
fi
if ! sha_ok "$DIR/$SDIST"; then
  echo "setup: $DIR/$SDIST: SHA-256 $(sha256sum "$DIR/$SDIST" | cut -c1-64), expected $SHA256" >&2
  exit 1
fi

work=$(mktemp -d "$DIR/.models-XXXXXX")
trap 'rm -rf "$work"' EXIT
inner="llama_cpp_python-$VERSION/vendor/llama.cpp/models"
tar -xzf "$DIR/$SDIST" -C "$work" --wildcards "$inner/templates/*.jinja" "$inner/ggml-vocab-*.gguf"
echo "$SDIST $SHA256" > "$work/$inner/.retain-source"
rm -rf "$OUT"
mv "$work/$inner" "$OUT"
