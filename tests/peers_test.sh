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

# Answers under kvpress's semantics: the demo's committed base on a few of its held-out questions,
# through kvpress's presses and through retain's keep mode. full, streaming, kvpress's SnapKV and
# knorm must answer alike once kvpress breaks equal scores as retain does (--ties later: layer 0's
# key norms tie exactly, and torch.topk's order among them is not retain's: with it, 14 of these
# 18 knorm answers at 5% were alike; docs/peers.md). The RULER step below compares with kvpress's
# own order.
base="$src/recipes/demo/base"
"$retain" synth --config "$src/recipes/demo/data.yaml" --out demo-data 2>/dev/null || fail "synth"
"$retain" eval synthetic --model "$base" --data demo-data/heldout.jsonl --limit 3 --question-mode keep \
  --policy full,streaming:buffer=0,snapkv:pool=avg,kernel=5,buffer=0,knorm:buffer=0 --budget 0.05,0.2 \
  --chunk 4096 --max-new-tokens 6 --threads 1 --out keep 2>/dev/null || fail "eval synthetic"
PYTHONPATH="$peer_dir" "$python" "$src/scripts/peers/kvpress_synthetic.py" --model "$base" \
  --data demo-data/heldout.jsonl --retain keep/predictions.jsonl --max-new-tokens 6 --ties later \
  --require-identical full,streaming,snapkv,knorm > kvpress.txt 2>&1 || { cat kvpress.txt; fail "kvpress_synthetic.py"; }
cat kvpress.txt
# A driver whose prompts differ from retain's by one BOS is refused before any answer (the full
# cache answered alike through such a BOS, eviction did not).
cp -r "$base" bos-base && echo '{"add_bos_token": true}' > bos-base/tokenizer_config.json
if PYTHONPATH="$peer_dir" "$python" "$src/scripts/peers/kvpress_synthetic.py" --model bos-base \
  --data demo-data/heldout.jsonl --retain keep/predictions.jsonl > bos.txt 2>&1; then
  fail "a prompt longer than retain's by a BOS was compared"
fi
grep -q "the inputs do not match" bos.txt || fail "BOS: $(cat bos.txt)"

# RULER through kvpress on the ids retain read (the demo base answers no needle, but its 128-token
# answers differ by policy, so identical ones mean the same cache): a finished keep-mode sweep rerun with
# --write-prompts writes prompts.jsonl alone (no answer redone), and kvpress answers every prompt
# as retain did for the full cache, streaming and kvpress's SnapKV.
ruler=(eval ruler --model "$base" --no-chat --question-mode keep --chunk 0 --lengths 1024 --samples 2
  --tasks niah_single_1,niah_multikey_1 --policy full,streaming:buffer=0,snapkv:pool=avg,kernel=5,buffer=0
  --budget 0.1,0.25 --threads 1 --out ruler-keep)
"$retain" "${ruler[@]}" 2>/dev/null || fail "eval ruler"
[[ ! -e ruler-keep/prompts.jsonl ]] || fail "prompts.jsonl written without --write-prompts"
cp ruler-keep/predictions.jsonl predictions.before
"$retain" "${ruler[@]}" --write-prompts 2> write.txt || { cat write.txt; fail "eval ruler --write-prompts"; }
cmp -s ruler-keep/predictions.jsonl predictions.before || fail "--write-prompts changed the answers"
[[ $(wc -l < ruler-keep/prompts.jsonl) == 4 ]] || fail "prompts.jsonl: $(wc -l < ruler-keep/prompts.jsonl) lines, expected 4"
PYTHONPATH="$peer_dir" "$python" "$src/scripts/peers/kvpress_ruler.py" --model "$base" --run ruler-keep \
  --require-identical full,streaming,snapkv > kvpress-ruler.txt 2>&1 || { cat kvpress-ruler.txt; fail "kvpress_ruler.py"; }
cat kvpress-ruler.txt
grep -q "kvpress .*: 20 answers in" kvpress-ruler.txt || fail "kvpress_ruler.py compared other than 20 answers"
# A run that compressed its contexts chunk by chunk is not kvpress's setting: refused, as is a run
# without prompts.jsonl.
cp -r ruler-keep ruler-chunked
"$python" - <<'PY'
import json
config = json.load(open("ruler-chunked/config.yaml"))
config["chunk"] = 64
json.dump(config, open("ruler-chunked/config.yaml", "w"))
PY
if PYTHONPATH="$peer_dir" "$python" "$src/scripts/peers/kvpress_ruler.py" --model "$base" \
  --run ruler-chunked > chunked.txt 2>&1; then fail "a chunked keep-mode run was compared"; fi
grep -q "rerun retain with --chunk 0" chunked.txt || fail "chunked: $(cat chunked.txt)"
rm ruler-chunked/prompts.jsonl
if PYTHONPATH="$peer_dir" "$python" "$src/scripts/peers/kvpress_ruler.py" --model "$base" \
  --run ruler-chunked > missing.txt 2>&1; then fail "a run without prompts.jsonl was compared"; fi
grep -q "rerun the retain sweep with --write-prompts" missing.txt || fail "missing: $(cat missing.txt)"
# A policy kvpress has no press for is refused, never answered by kvpress's full cache.
"$retain" eval ruler --model "$base" --no-chat --question-mode keep --chunk 0 --lengths 1024 --samples 1 \
  --tasks niah_single_1 --policy h2o --budget 0.1 --threads 1 --write-prompts --out ruler-h2o 2>/dev/null ||
  fail "eval ruler h2o"
if PYTHONPATH="$peer_dir" "$python" "$src/scripts/peers/kvpress_ruler.py" --model "$base" --run ruler-h2o \
  --policies h2o > h2o.txt 2>&1; then fail "h2o was compared"; fi
grep -q "the drivers map no kvpress press to it" h2o.txt || fail "h2o: $(cat h2o.txt)"
# --ties later only replaces ScorerPress's selection: PyramidKV and AdaKV select with their own
# code, which it would silently make uniform, so they are refused.
for spec in snapkv:alloc=pyramid knorm:alloc=adakv; do
  if PYTHONPATH="$peer_dir:$src/scripts/peers" "$python" -c \
    "import kvpress_common as c; c.make_press('$spec', 10, 100, ties='later')" > ties.txt 2>&1; then
    fail "--ties later accepted $spec"
  fi
  grep -q "selects with its own compress" ties.txt || fail "--ties later, $spec: $(cat ties.txt)"
done

# Bad input: an unknown peer and a budget outside the prompt are refused with the reason.
if "$python" "$src/scripts/peers/bench_decode.py" --retain "$retain" --model model --peers vllm \
  2> err.txt; then fail "unknown peer accepted"; fi
grep -q "unknown \['vllm'\]" err.txt || fail "unknown peer: $(cat err.txt)"
echo "peers: ok"
