#!/usr/bin/env bash
# The peer drivers run side by side with retain on a tiny random model: bench_decode.py prints
# one row per peer (HF generate, kvpress snapkv / streaming / knorm) with retain's figures, the
# peer's and their ratio, and retain's full cache decodes the same greedy tokens as HF generate.
# Figures are printed, not asserted (speed is for benchmarks, not tests).
# Usage: peers_test.sh SOURCE_DIR RETAIN PYTHON WORK_DIR
set -euo pipefail
src=$1 retain=$2 python=$3 work=$4
source "$src/tests/tiny_fixture.sh"
enter_work_dir "$work"
peer_dir=$(RETAIN_PYTHON="$python" bash "$src/scripts/peers/install-kvpress.sh") || fail "kvpress install"
"$retain" init-model --arch qwen3 --preset tiny --seed 1 --out model 2>/dev/null || fail "init-model"

PYTHONPATH="$peer_dir" "$python" "$src/scripts/peers/bench_decode.py" --retain "$retain" \
  --model model --batch 2 --context 160 --new-tokens 16 --budget 24 --chunk 64 --threads 1 --repeat 1 \
  --json figures.json > table.txt || fail "bench_decode.py"
cat table.txt
for peer in "hf generate" "kvpress snapkv" "kvpress streaming" "kvpress knorm"; do
  grep -q "^$peer " table.txt || fail "no row for $peer"
done
grep -q "greedy tokens, retain full vs hf generate: identical" table.txt || fail "greedy tokens differ"
"$python" - <<'PY' || fail "figures.json"
import json
rows = json.load(open("figures.json"))["rows"]
assert len(rows) == 4, rows
for r in rows:
    for k in ("prefill_ratio", "decode_ratio"):
        assert r[k] > 0, (r["peer"], k, r[k])
PY

# The official-style gate step computes what retain's bench train computes: same ids, same initial
# gates, same losses, so after the same steps both losses agree.
"$python" "$src/scripts/peers/train_step.py" --retain "$retain" --model model --seq 48 \
  --gate-width 16 --memory 8 --iters 1 --warmup 1 --threads 1 --json train.json > train.txt ||
  fail "train_step.py"
cat train.txt
"$python" - <<'PY' || fail "train.json"
import json
row = json.load(open("train.json"))["row"]
assert abs(row["retain"]["loss"] - row["python"]["loss"]) < 1e-4, row
assert row["speed_ratio"] > 0 and row["memory_ratio"] > 0, row
PY

# Bad input: an unknown peer and a budget outside the prompt are refused with the reason.
if "$python" "$src/scripts/peers/bench_decode.py" --retain "$retain" --model model --peers vllm \
  2> err.txt; then fail "unknown peer accepted"; fi
grep -q "unknown \['vllm'\]" err.txt || fail "unknown peer: $(cat err.txt)"
echo "peers: ok"
