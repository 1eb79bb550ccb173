#!/usr/bin/env bash
# Multi-process training on CPU (c10d TCPStore collective):
#   1. 2 ranks == 1 rank with the same global batch (gates, and a locret scorer, after 5 steps
#      within 1e-6),
#   2. killing one of 2 ranks makes the other exit non-zero within 60 s, naming it,
#   3. resuming a 2-rank run on 1 rank and then on 3 ranks sees every sample exactly once per epoch,
#   4. `retain launch` exits non-zero naming a failed rank.
# Usage: dist_test.sh RETAIN PYTHON WORKDIR
set -uo pipefail
retain="$1"; python="$2"; work="$3"
source "$(cd "$(dirname "$0")" && pwd)/tiny_fixture.sh"
enter_work_dir "$work"

make_tiny_fixture "$retain" "$python" 4 60
write_tiny_recipe \
  'model: {path: model, device: cpu}  # the gloo path; a GPU machine has too few GPUs for 3 ranks' \
  'data: {shards: shards, seq_len: 64}' \
  'train: {steps: 5}' \
  'checkpoint: {every: 0}' \
  'log: {samples: true}' \
  'dist: {timeout_s: 20}'

# 1. Same global batch of 4 sequences: 1 rank x batch 4, 2 ranks x batch 2.
"$retain" train recipe.yaml run.dir=one train.batch_size=4 2>/dev/null || fail "1-rank run"
"$retain" launch --nproc 2 -- train recipe.yaml run.dir=two train.batch_size=2 2>two.log || fail "2-rank run: $(grep "error" two.log | head -2)"
"$retain" export one/step-5 --out one.safetensors 2>/dev/null && "$retain" export two/step-5 --out two.safetensors 2>/dev/null || fail export
"$python" - <<'PY' || exit 1
from safetensors.torch import load_file
a, b = load_file("one.safetensors"), load_file("two.safetensors")
diff = max((a[k] - b[k]).abs().max().item() for k in a)
assert diff <= 1e-6, f"2 ranks differ from 1 rank by {diff}"
print(f"ok   2 ranks == 1 rank after 5 steps (max diff {diff:.2e})")
PY

# 1b. The same for a learned scorer (train.trainable: locret): its loss is normalised by the
# global count of labelled entries, so 2 ranks again equal 1.
"$retain" train recipe.yaml run.dir=one-locret train.batch_size=4 train.trainable=locret scorer.width=16 2>/dev/null || fail "1-rank locret run"
"$retain" launch --nproc 2 -- train recipe.yaml run.dir=two-locret train.batch_size=2 train.trainable=locret scorer.width=16 2>two-locret.log || fail "2-rank locret run: $(grep "error" two-locret.log | head -2)"
"$retain" export one-locret/step-5 --out one-locret.safetensors 2>/dev/null && "$retain" export two-locret/step-5 --out two-locret.safetensors 2>/dev/null || fail "export locret"
"$python" - <<'PY' || exit 1
from safetensors.torch import load_file
a, b = load_file("one-locret.safetensors"), load_file("two-locret.safetensors")
diff = max((a[k] - b[k]).abs().max().item() for k in a)
assert diff <= 1e-6, f"2 ranks differ from 1 rank by {diff}"
print(f"ok   locret scorer: 2 ranks == 1 rank after 5 steps (max diff {diff:.2e})")
PY

# 2. Two ranks started by hand; rank 1 is SIGKILLed mid-run; rank 0 must fail within 60 s.
port=$(free_port "$python")
start_rank() {
  RANK=$1 WORLD_SIZE=2 LOCAL_RANK=$1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$retain" train recipe.yaml run.dir=kill train.steps=100000 > rank$1.log 2>&1 &
}
start_rank 0; pid0=$!
start_rank 1; pid1=$!
for _ in $(seq 1 200); do grep -q "train " rank0.log 2>/dev/null && break; sleep 0.1; done
sleep 1
kill -9 $pid1
t0=$(date +%s)
wait $pid0; rc=$?
elapsed=$(( $(date +%s) - t0 ))
[ $rc -ne 0 ] || fail "rank 0 exited 0 after rank 1 died"
[ $elapsed -le 60 ] || fail "rank 0 took ${elapsed}s to fail"
grep -q "rank 1" rank0.log || fail "rank 0's error does not name rank 1: $(tail -2 rank0.log)"
echo "ok   rank 1 killed: rank 0 exited with $rc after ${elapsed}s: $(grep -o 'rank 1 did not.*passed)' rank0.log | head -1)"

# 3. 2 ranks for 6 steps, then 1 rank to step 13, then 3 ranks to step 20 (global batch 4, 2, 6).
"$retain" launch --nproc 2 -- train recipe.yaml run.dir=elastic train.steps=6 train.batch_size=2 checkpoint.every=6 2>elastic2.log || fail "elastic 2 ranks: $(grep -i error elastic2.log | head -3)"
"$retain" train recipe.yaml run.dir=elastic train.steps=13 train.batch_size=2 checkpoint.every=13 2>/dev/null || fail "elastic 1 rank"
"$retain" launch --nproc 3 -- train recipe.yaml run.dir=elastic train.steps=20 train.batch_size=2 checkpoint.every=20 2>/dev/null || fail "elastic 3 ranks"
"$python" - <<'PY' || exit 1
import glob, collections
seen = collections.defaultdict(list)
for path in glob.glob("elastic/samples.rank*.txt"):
    for line in open(path):
        step, epoch, sample = map(int, line.split())
        seen[epoch].append(sample)
size = len(set(s for ss in seen.values() for s in ss))
complete = [e for e in sorted(seen) if e < max(seen)]
assert complete, f"no complete epoch (epochs {sorted(seen)}); enlarge the run"
for e in sorted(seen):
    c = collections.Counter(seen[e])
    assert max(c.values()) == 1, f"epoch {e}: samples repeated {[s for s, n in c.items() if n > 1]}"
    if e in complete:
        assert len(c) == size, f"epoch {e}: {len(c)} of {size} samples"
total = sum(len(v) for v in seen.values())
assert total == 6 * 4 + 7 * 2 + 7 * 6, f"{total} samples consumed"
print(f"ok   2 -> 1 -> 3 ranks: {total} samples, epochs {complete} complete with each of {size} sequences once")
PY

# 4. The launcher names a failing rank (rank 1 gets a recipe override that fails: a bad data dir).
"$retain" launch --nproc 2 -- train recipe.yaml run.dir=bad data.shards=missing > launch.log 2>&1 && fail "launch exited 0"
grep -q "retain launch: rank [01] exited with code" launch.log || fail "launch did not name the failed rank: $(tail -3 launch.log)"
echo "ok   retain launch: $(grep 'retain launch: rank' launch.log | head -1)"
