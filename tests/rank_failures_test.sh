#!/usr/bin/env bash
# Ranks that die or hang: three ranks train (CPU collectives, dist.timeout_s 10, a checkpoint
# every step); one is SIGKILLed, SIGSTOPped (a hang), or the store host (rank 0) is killed. Every
# other rank must exit non-zero within the timeout (+ 15 s of slack), saying what happened, and
# every step directory left must be complete (a manifest; half-written ones are hidden temp
# directories a resume removes). Prints each case's exit times.
# Usage: rank_failures_test.sh RETAIN PYTHON WORKDIR
set -uo pipefail
retain="$1" python="$2" work="$3"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
fail() { echo "FAIL $*"; exit 1; }

"$retain" init-model --arch qwen3 --preset tiny --seed 4 --out model 2>/dev/null || fail init-model
"$python" - <<'PY'
import json, random
r = random.Random(4)
words = "alpha beta gamma delta key value door cache the a of reads keeps".split()
with open("docs.jsonl", "w") as f:
    for _ in range(60):
        f.write(json.dumps({"text": " ".join(r.choice(words) for _ in range(r.randint(10, 90)))}) + "\n")
PY
"$retain" prep --tokenizer model --input docs.jsonl --format jsonl --out shards 2>/dev/null || fail prep
cat > recipe.yaml <<'YAML'
model: {path: model, device: cpu}
gates: {arch: mlp3, width: 16, bias_init: 3.0}
loss: {memory: 8, logit_block_size: 64}
data: {shards: shards, seq_len: 64}
optim: {warmup_steps: 2, lr: 5.0e-3}
train: {steps: 100000}
checkpoint: {every: 1, keep_last_k: 2}
dist: {timeout_s: 10}
YAML
timeout_s=10 slack=15

# case NAME SIGNAL VICTIM: starts 3 ranks, sends SIGNAL to rank VICTIM once training runs, and
# waits for the others.
case_run() {
  local name=$1 signal=$2 victim=$3
  local port
  port=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  local pids=()
  for r in 0 1 2; do
    RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$retain" train recipe.yaml run.dir="$name" > "$name.rank$r.log" 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 1 300); do [ -d "$name/step-2" ] && break; sleep 0.1; done
  [ -d "$name/step-2" ] || fail "$name: training did not start"
  kill -"$signal" "${pids[$victim]}"
  local t0 line=""
  t0=$("$python" -c 'import time; print(time.time())')
  for r in 0 1 2; do
    [ "$r" = "$victim" ] && continue
    wait "${pids[$r]}"
    local rc=$?
    local t
    t=$("$python" -c "import time; print('%.1f' % (time.time() - $t0))")
    [ $rc -ne 0 ] || fail "$name: rank $r exited 0"
    "$python" -c "import sys; sys.exit(0 if float('$t') <= $timeout_s + $slack else 1)" ||
      fail "$name: rank $r took ${t}s to exit"
    local why
    why=$(grep -m1 'error' "$name.rank$r.log" | cut -c1-160)
    [ -n "$why" ] || fail "$name: rank $r exited without an error message: $(tail -2 "$name.rank$r.log")"
    line="$line rank $r: exit $rc after ${t}s (\"$why\");"
  done
  kill -9 "${pids[$victim]}" 2>/dev/null  # the stopped one
  wait "${pids[$victim]}" 2>/dev/null
  for d in "$name"/step-*; do
    [ -f "$d/manifest.json" ] || fail "$name: $d has no manifest"
  done
  echo "ok   $name:$line"
}
case_run killed KILL 2
case_run hung STOP 1
case_run store-host-killed KILL 0
