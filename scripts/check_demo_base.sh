#!/usr/bin/env bash
# Checks that the demo's base directory holds the weights and tokenizer its sums file names, then
# writes OUT (only when its content changes, so a touched recipe does not retrain the gates).
# The sums file is the curriculum recipe (`sha256:`, `tokenizer-sha256:` and, for a base without
# BOS, `tokenizer-config-sha256:` lines) or a base.json
# written by `make demo-base` (the same keys, as JSON).
# Usage: check_demo_base.sh BASE_DIR SUMS_FILE OUT
set -euo pipefail
base="$1"; sums="$2"; out="$3"
[ -f "$sums" ] || { echo "check_demo_base: $sums: no such file (the base's sums)" >&2; exit 1; }
# The first 64-hex-digit value of KEY, YAML (`key: hex`) or JSON (`"key": "hex"`).
sum_of() {
  sed -n "s/^[[:space:]]*\"\{0,1\}$1\"\{0,1\}:[[:space:]]*\"\{0,1\}\([0-9a-f]\{64\}\)\"\{0,1\}.*/\1/p" \
    "$sums" | head -1
}
report=""
# A base trained without BOS carries tokenizer_config.json (add_bos_token false): its sum, where
# the sums file names one, guards it too (without the file retain would prompt with BOS).
pairs=("model.safetensors:sha256" "tokenizer.model:tokenizer-sha256")
[ -z "$(sum_of tokenizer-config-sha256)" ] || pairs+=("tokenizer_config.json:tokenizer-config-sha256")
for pair in "${pairs[@]}"; do
  file="${pair%%:*}"; key="${pair#*:}"
  want=$(sum_of "$key")
  [ -n "$want" ] || { echo "check_demo_base: $sums has no '$key:' with a 64-digit sha256" >&2; exit 1; }
  [ -f "$base/$file" ] || {
    echo "check_demo_base: $base/$file: no such file (the demo's base: a checkout has it in" \
      "recipes/demo/base/; \`make demo-base\` makes a new one)" >&2
    exit 1
  }
  got=$(sha256sum "$base/$file" | cut -d' ' -f1)
  [ "$got" = "$want" ] || {
    echo "check_demo_base: $base/$file: sha256 $got, but $sums says $want (\`git checkout" \
      "recipes/demo/base\` restores the committed base; another base needs its own sums:" \
      "DEMO_BASE_SUMS=DIR/base.json)" >&2
    exit 1
  }
  report+="$got  $file"$'\n'
done
mkdir -p "$(dirname "$out")"
if [ ! -f "$out" ] || [ "$(cat "$out")" != "${report%$'\n'}" ]; then
  printf '%s' "$report" > "$out.tmp" && mv "$out.tmp" "$out"
fi
