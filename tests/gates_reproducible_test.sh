#!/usr/bin/env bash
# The demo's gate training gives the same gate file bit for bit whatever runs beside it: the
# dbtrimkv and trimkv recipes (recipes/demo/, shortened and with a low bias so the gates move
# within the run), each trained twice on 2 threads, once as it comes and once beside a busy
# core (which also makes retain's OpenMP team wait passively: core/openmp_wait.h), then the
# exported files compared with cmp. A user's `make demo` on another machine of this kind trains
# the same weights, so it prints the README's table.
# Usage: gates_reproducible_test.sh SOURCE_DIR RETAIN WORKDIR
set -euo pipefail
src="$1"; retain="$2"; work="$3"
rm -rf "$work" && mkdir -p "$work"
cd "$src"
"$retain" synth --config recipes/demo/data.yaml --train-count 24 --train-words 40:200 \
  --heldout-questions 4 --out "$work/data" > "$work/synth.log" 2>&1
"$retain" prep --config recipes/demo/prep.yaml --tokenizer recipes/demo/base \
  --input "$work/data/train.jsonl" --out "$work/shards" > "$work/prep.log" 2>&1
failures=0
for gates in dbtrimkv trimkv; do
  train() {  # train NAME: a run and its export
    OMP_NUM_THREADS=2 "$retain" train "recipes/demo/$gates.yaml" run.dir="$work/$gates-$1" \
      model.path=recipes/demo/base data.shards="$work/shards" data.seq_len=512 train.steps=24 \
      checkpoint.every=24 gates.bias_init=3 optim.warmup_steps=2 > "$work/$gates-$1.log" 2>&1
    "$retain" export "$work/$gates-$1" --out "$work/$gates-$1.safetensors" > /dev/null 2>&1
  }
  train plain
  ( while :; do :; done ) &
  busy=$!
  train beside-a-busy-core
  kill "$busy"; wait "$busy" 2>/dev/null || true
  # The gates moved (a run that leaves them at their start would match trivially).
  grep -aq "beta=0\." "$work/$gates-plain.log" ||
    { echo "FAIL $gates: the gates did not move: $(grep -a '24/24' "$work/$gates-plain.log")"; exit 1; }
  if cmp -s "$work/$gates-plain.safetensors" "$work/$gates-beside-a-busy-core.safetensors"; then
    echo "ok   $gates: the same gate file alone and beside a busy core" \
      "($(sha256sum < "$work/$gates-plain.safetensors" | cut -c1-16))"
  else
    echo "FAIL $gates: the gate files differ"; failures=$((failures + 1))
  fi
done
[ "$failures" -eq 0 ] || exit 1
echo "gate training is reproducible"
