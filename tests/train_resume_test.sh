#!/usr/bin/env bash
# Kill-and-resume: a run killed with SIGKILL after a checkpoint, then resumed with
# train.resume=auto, ends with gates byte-identical to an uninterrupted run. Also: a step
# directory without manifest is ignored with a warning. Usage: train_resume_test.sh RETAIN WORKDIR
set -uo pipefail
retain="$1"
work="$2"
source "$(cd "$(dirname "$0")" && pwd)/tiny_fixture.sh"
enter_work_dir "$work"

make_tiny_fixture "$retain" python3 1 200
write_tiny_recipe \
  'model: {path: model}' \
  'data: {shards: shards, seq_len: 128}' \
  'train: {steps: 12, grad_accum: 2}' \
  'checkpoint: {every: 2, keep_last_k: 0}'

"$retain" train recipe.yaml run.dir=straight 2>/dev/null || fail "uninterrupted run"

# The same run, killed with SIGKILL as soon as step-6 exists.
"$retain" train recipe.yaml run.dir=killed 2>/dev/null &
pid=$!
for _ in $(seq 1 600); do
  [ -f killed/step-6/manifest.json ] && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.05
done
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
[ -f killed/step-12/manifest.json ] && echo "note: the run finished before the kill; resume still checked"
last=$(ls -d killed/step-* | sed 's/.*step-//' | sort -n | tail -1)
echo "killed after step $last"
# A half-written step directory (no manifest) must be ignored.
mkdir -p killed/step-999 && echo junk > killed/step-999/params.safetensors
"$retain" train recipe.yaml run.dir=killed 2> resume.log || fail "resume: $(tail -3 resume.log)"
grep -q "step-999: no manifest.json" resume.log || fail "no warning about the incomplete step directory"
grep -q "resumed from killed/step-$last" resume.log || fail "did not resume from step $last: $(grep -i resum resume.log)"

"$retain" export straight/step-12 --out straight.safetensors 2>/dev/null || fail "export straight"
"$retain" export killed/step-12 --out killed.safetensors 2>/dev/null || fail "export killed"
cmp straight.safetensors killed.safetensors || fail "resumed gates differ from the uninterrupted run"
echo "ok   kill at step $last + resume == uninterrupted (exported gates byte-identical)"
