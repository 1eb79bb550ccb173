#!/usr/bin/env bash
# Kill anywhere: a tiny gate training with a checkpoint every step is SIGKILLed at 10 random
# moments (during steps, checkpoint writes, startup), with an `export` killed at a random moment
# after each; then it resumes to the end. The exported gates must be byte-identical to an
# uninterrupted run's, every export that finished must verify, and a killed export must leave
# either nothing or the whole file. Then an eval sweep is killed at 5 random moments: its
# predictions.jsonl must hold whole JSON lines only, and the resumed scores must equal an
# uninterrupted sweep's. Usage: kill_anywhere_test.sh RETAIN PYTHON WORKDIR
set -uo pipefail
# One thread per process: these runs share the 2 cores with the rest of make test.
export OMP_NUM_THREADS=1
retain="$1" python="$2" work="$3"
source "$(cd "$(dirname "$0")" && pwd)/tiny_fixture.sh"
enter_work_dir "$work"
# Seeded random delays in seconds, one per line.
delays() { "$python" -c "import random; r = random.Random($1); print('\n'.join('%.2f' % r.uniform($2, $3) for _ in range($4)))"; }

make_tiny_fixture "$retain" "$python" 1 200
write_tiny_recipe \
  'model: {path: model}' \
  'data: {shards: shards, seq_len: 128}' \
  'train: {steps: 100, grad_accum: 2}' \
  'checkpoint: {every: 1, keep_last_k: 3}'
"$retain" train recipe.yaml run.dir=straight 2>/dev/null || fail "uninterrupted run"
"$retain" export straight --out straight.safetensors 2>/dev/null || fail "export straight"

# While COMMAND... runs in the background into DIR, the same command again must refuse at once,
# naming the first one's pid (DIR/.retain.lock); the first is then SIGKILLed, and its lock dies
# with it: the same command then starts (killed again once it holds the lock).
second_refused() {
  local dir=$1 what=$2 verdict=""
  shift 2
  "$@" >/dev/null 2>&1 &
  local first=$!
  holds "$dir" $first
  if "$@" >second.log 2>&1; then
    verdict="a second command into $dir ran beside the first"
  elif ! grep -q "$dir is in use by another retain command (host .*, pid $first)" second.log; then
    verdict="the second command's error does not name the first: $(tail -2 second.log)"
  fi
  kill -9 $first 2>/dev/null
  wait $first 2>/dev/null
  [ -z "$verdict" ] || fail "$what: $verdict"
  echo "ok   $what: a second command into $dir refused: $(grep -o 'is in use.*' second.log | head -1)"
  "$@" >/dev/null 2>&1 &
  local again=$!
  holds "$dir" $again || verdict="the lock of a killed command was not released"
  kill -9 $again 2>/dev/null
  wait $again 2>/dev/null
  [ -z "$verdict" ] || fail "$what: $verdict"
}
# Waits (up to 30 s) until process PID holds DIR's lock.
holds() {
  for _ in $(seq 600); do
    grep -q "pid $2\$" "$1/.retain.lock" 2>/dev/null && return 0
    sleep 0.05
  done
  return 1
}

trial=0 torn_total=0
while read -r delay; do
  trial=$((trial + 1))
  "$retain" train recipe.yaml run.dir=killed >/dev/null 2>&1 &
  pid=$!
  sleep "$delay"
  kill -9 $pid 2>/dev/null
  wait $pid 2>/dev/null
  newest=$(ls -d killed/step-* 2>/dev/null | sed 's/.*step-//' | sort -n | tail -1)
  torn=$(ls -d killed/.step-*.tmp.* 2>/dev/null | wc -l)
  torn_total=$((torn_total + torn))
  echo "trial $trial: killed after ${delay}s, newest complete step: ${newest:-none}, interrupted checkpoint writes left: $torn"
  # An export killed at a random moment leaves nothing or the whole file.
  if [ -n "$newest" ]; then
    rm -f partial.safetensors
    "$retain" export killed --out partial.safetensors >/dev/null 2>&1 &
    epid=$!
    sleep "$("$python" -c "import random; print('%.2f' % random.Random($trial).uniform(0, 0.6))")"
    kill -9 $epid 2>/dev/null
    wait $epid 2>/dev/null
    if [ -f partial.safetensors ]; then
      "$retain" export killed --out whole.safetensors 2>/dev/null || fail "trial $trial: export after the kill"
      cmp -s partial.safetensors whole.safetensors || fail "trial $trial: a killed export left a torn file"
    fi
  fi
done < <(delays 7 0.4 1.5 10)
# (Long runs into fresh directories: a short first one could end before the second starts.)
second_refused locked-run "train" "$retain" train recipe.yaml run.dir=locked-run train.steps=100000
"$retain" train recipe.yaml run.dir=killed 2>resume.log || fail "final resume: $(tail -3 resume.log)"
[ -z "$(ls -d killed/.step-*.tmp.* 2>/dev/null)" ] || fail "interrupted checkpoint writes were not cleaned up"
"$retain" export killed --out killed.safetensors 2>/dev/null || fail "export killed"
cmp straight.safetensors killed.safetensors || fail "gates after 10 kills differ from the uninterrupted run"
echo "ok   10 kills (training and export; $torn_total of them inside a checkpoint write) + resume == uninterrupted (exported gates byte-identical)"

# The eval sweep.
sweep() {
  "$retain" eval synthetic --model model --tasks kv,needle --count 10 --words 120 --policy full,streaming,h2o \
    --budget 0.3,0.6 --max-new-tokens 3 --chunk 32 --out "$1"
}
sweep sweep-straight >/dev/null 2>&1 || fail "uninterrupted sweep"
trial=0
while read -r delay; do
  trial=$((trial + 1))
  sweep sweep-killed >/dev/null 2>&1 &
  pid=$!
  sleep "$delay"
  kill -9 $pid 2>/dev/null
  wait $pid 2>/dev/null
  lines=0
  [ -f sweep-killed/predictions.jsonl ] && lines=$(wc -l < sweep-killed/predictions.jsonl)
  "$python" - sweep-killed/predictions.jsonl <<'PY' || fail "trial $trial: predictions.jsonl holds a torn line"
import json, os, sys
path = sys.argv[1]
if os.path.exists(path):
    data = open(path).read()
    assert data == "" or data.endswith("\n"), "no newline at the end"
    for line in data.splitlines():
        json.loads(line)
PY
  echo "sweep trial $trial: killed after ${delay}s with $lines predictions written"
done < <(delays 11 0.6 1.8 5)
# (The command itself, not a shell function: $! must be retain's pid.)
second_refused sweep-locked "eval synthetic" "$retain" eval synthetic --model model --tasks kv,needle \
  --count 2000 --words 120 --policy full --max-new-tokens 3 --chunk 32 --out sweep-locked
sweep sweep-killed >/dev/null 2>&1 || fail "resumed sweep"
"$python" - <<'PY' || fail "resumed scores differ from the uninterrupted sweep's"
import json
def scores(d):
    out = []
    for r in json.load(open(d + "/scores.json"))["results"]:
        m = {k: v for k, v in r["metrics"].items() if not k.endswith("_per_s")}
        out.append((r["policy"], r["budget"], m))
    return out
a, b = scores("sweep-straight"), scores("sweep-killed")
assert a == b, (a, b)
PY
echo "ok   5 sweep kills + resume == uninterrupted (whole lines only, same scores)"
