#!/usr/bin/env bash
# Every recipe resolves (no unknown keys), and the tiny recipe's header commands run as written,
# from a scratch copy of the repository layout. Usage: recipe_test.sh RETAIN SOURCE_DIR WORKDIR
set -uo pipefail
retain="$1"; src="$2"; work="$3"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
ln -s "$src/core" core && ln -s "$src/model" model && ln -s "$src/recipes" recipes
for r in "$src"/recipes/*.yaml "$src"/recipes/demo/{trimkv,dbtrimkv,locret,kvzap}.yaml \
         "$src"/recipes/smollm2/{trimkv,dbtrimkv,dbtrimkv-long,locret,kvzap}.yaml; do
  # train.steps=0 is rejected after resolution, so this checks the keys without training.
  out=$("$retain" train "$r" train.steps=0 2>&1)
  if echo "$out" | grep -q "unknown recipe key"; then echo "FAIL $r: $out"; exit 1; fi
  echo "$out" | grep -q "must be positive" || { echo "FAIL $r did not resolve: $out"; exit 1; }
  echo "ok   $(basename "$r") resolves"
done
# The header of tiny-gates.yaml: the lines after "Run from the repository root:".
sed -n '/^# Run from the repository root:/,/^[^#]/p' "$src/recipes/tiny-gates.yaml" | grep '^#   retain ' |
  sed 's/^#   retain //' > commands.txt
[ -s commands.txt ] || { echo "FAIL no commands in the tiny recipe header"; exit 1; }
while read -r line; do
  echo "\$ retain $line"
  # shellcheck disable=SC2086
  eval "\"$retain\" $line" > log.txt 2>&1 || { echo "FAIL: retain $line"; tail -5 log.txt; exit 1; }
done < commands.txt
[ -f runs/tiny-gates/gates.safetensors ] || { echo "FAIL no exported gates"; exit 1; }
python3 - <<'PY' || exit 1
import json
lines = [json.loads(l) for l in open("runs/tiny-gates/metrics.jsonl")]
first = sum(l["capacity"] for l in lines[:5]) / 5
last = sum(l["capacity"] for l in lines[-5:]) / 5
assert last < first, f"capacity loss did not fall: {first} -> {last}"
print(f"ok   tiny-gates: {len(lines)} steps, capacity loss {first:.3f} -> {last:.3f}, "
      f"{lines[-1]['tokens_per_s']:.0f} tokens/s")
PY
