#!/usr/bin/env bash
# Ranks that die or hang: three ranks train (CPU collectives, dist.timeout_s 10, a checkpoint
# every step); one is SIGKILLed, SIGSTOPped (a hang), or the store host (rank 0) is killed. Every
# other rank must exit non-zero within the timeout (+ 15 s of slack), saying what happened, and
# every step directory left must be complete (a manifest; half-written ones are hidden temp
# directories a resume removes). Rank 0 (the store host) names the rank that died or hung; a rank
# that loses the store first (rank 0 exited) says so. Prints each case's exit times.
# Usage: rank_failures_test.sh RETAIN PYTHON WORKDIR
set -uo pipefail
# One thread per process: these runs share the 2 cores with the rest of make test.
export OMP_NUM_THREADS=1
retain="$1" python="$2" work="$3"
source "$(cd "$(dirname "$0")" && pwd)/tiny_fixture.sh"
enter_work_dir "$work"

make_tiny_fixture "$retain" "$python" 4 60
write_tiny_recipe \
  'model: {path: model, device: cpu}' \
  'data: {shards: shards, seq_len: 64}' \
  'train: {steps: 100000}' \
  'checkpoint: {every: 1, keep_last_k: 2}' \
  'dist: {timeout_s: 10}'
timeout_s=10 slack=15
# Every rank this script starts dies with it, whatever the outcome: a failed case must not leave
# three ranks training (train.steps 100000) beside the rest of make test.
started=()
trap 'for p in "${started[@]}"; do kill -9 "$p" 2>/dev/null; done' EXIT

# case NAME SIGNAL VICTIM CAUSE: starts 3 ranks, sends SIGNAL to rank VICTIM once training runs,
# and waits for the others, whose error must contain CAUSE.
case_run() {
  local name=$1 signal=$2 victim=$3 cause=$4
  local port
  port=$(free_port "$python")
  local pids=()
  for r in 0 1 2; do
    RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$retain" train recipe.yaml run.dir="$name" > "$name.rank$r.log" 2>&1 &
    pids+=($!)
    started+=($!)
  done
  # Training runs once a step directory exists (keep_last_k prunes old ones: any will do). Up to
  # 120 s: three ranks start LibTorch and train on a loaded 2-core machine during make test.
  # compgen -G only reads the directory: `ls step-*` raced the pruning (a name globbed, then
  # removed before ls stat'ed it, failed the check while training ran).
  local started_training=0
  for _ in $(seq 1 1200); do
    compgen -G "$name/step-*" >/dev/null && { started_training=1; break; }
    sleep 0.1
  done
  [ $started_training = 1 ] || fail "$name: training did not start"
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
    # Rank 0 hosts the store and names the missing rank; when it exits first, the others lose
    # the store before their own timeout, and say that.
    local expect=$cause
    [ "$r" != 0 ] && expect="$cause\|lost the rendezvous store"
    grep -q -- "$expect" "$name.rank$r.log" || fail "$name: rank $r's error does not say '$cause': $why"
    line="$line rank $r: exit $rc after ${t}s (\"$why\");"
  done
  kill -9 "${pids[$victim]}" 2>/dev/null  # the stopped one
  wait "${pids[$victim]}" 2>/dev/null
  for d in "$name"/step-*; do
    [ -f "$d/manifest.json" ] || fail "$name: $d has no manifest"
  done
  echo "ok   $name:$line"
}
case_run killed KILL 2 "rank 2 did not reach collective"
case_run hung STOP 1 "rank 1 did not reach collective"
case_run store-host-killed KILL 0 "lost the rendezvous store"
