#!/usr/bin/env bash
# Tensor parallelism on CPU ranks (c10d TCPStore collective):
#   1. tensor_parallel_worker at TP 2 (tiny qwen3 with q/k-norm, tiny qwen2 with q/k/v biases):
#      logits <= 1e-5 of one process, identical greedy tokens and survivors under every policy,
#      alloc=adakv refused;
#   2. trained gates: TP 2 (2 ranks) and TP 2 x DP 2 (4 ranks) equal one process with the same
#      global batch after 5 steps (<= 1e-6), and log the same losses;
#   3. `retain launch --nproc 2 -- generate --tp 2` prints what one process prints (dbtrimkv with
#      the trained gates, sampled with a seed);
#      eval synthetic --tp 2 writes what one process writes; bench decode/train --tp 2 run; a tiny
#      qwen3_vl generates the same tokens from an image;
#   4. refusals: heads that do not divide, --tp without a launcher, a scorer trained with TP;
#   5. a killed rank stops its group within dist.timeout_s, naming it.
# Usage: tensor_parallel_test.sh RETAIN PYTHON WORKER WORKDIR
set -uo pipefail
# One thread per process: up to four ranks share the 2 cores with the rest of make test.
export OMP_NUM_THREADS=1
retain="$1" python="$2" worker="$3" work="$4"
source "$(cd "$(dirname "$0")" && pwd)/tiny_fixture.sh"
enter_work_dir "$work"
started=()
trap 'for p in "${started[@]}"; do kill -9 "$p" 2>/dev/null; done' EXIT

# ranks N LOG COMMAND...: runs COMMAND as N ranks (torchrun's environment), waits for all; fails
# naming the first rank that failed.
ranks() {
  local n=$1 log=$2
  shift 2
  local port pids=()
  port=$(free_port "$python")
  for r in $(seq 0 $((n - 1))); do
    RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" \
      > "$log.rank$r" 2>&1 &
    pids+=($!)
    started+=($!)
  done
  local rc=0
  for r in $(seq 0 $((n - 1))); do
    wait "${pids[$r]}" || { rc=1; echo "rank $r failed: $(grep -m2 -i 'error\|FAIL' "$log.rank$r")"; }
  done
  return $rc
}

make_tiny_fixture "$retain" "$python" 5 60

# 1. The worker, on two families.
"$retain" init-model --arch qwen2 --preset tiny --seed 6 --out model-qwen2 2>/dev/null || fail "init-model qwen2"
for m in model model-qwen2; do
  ranks 2 "worker-$m" "$worker" "$m" || fail "worker on $m: $(cat "worker-$m.rank0" | tail -5)"
  sed "s/^/$m: /" "worker-$m.rank0"
  grep -q FAIL "worker-$m.rank0" && fail "worker on $m"
done

# 2. Trained gates: one process (batch 4), TP 2 (batch 4 per replica), TP 2 x DP 2 (batch 2).
write_tiny_recipe \
  'model: {path: model, device: cpu}' \
  'data: {shards: shards, seq_len: 64}' \
  'train: {steps: 5}' \
  'checkpoint: {every: 0}' \
  'dist: {timeout_s: 60}'
"$retain" train recipe.yaml run.dir=one train.batch_size=4 2>one.log || fail "1-rank run: $(tail -3 one.log)"
ranks 2 tp2 "$retain" train recipe.yaml run.dir=tp2 train.batch_size=4 dist.tensor_parallel=2 ||
  fail "TP 2 run"
ranks 4 tp2dp2 "$retain" train recipe.yaml run.dir=tp2dp2 train.batch_size=2 dist.tensor_parallel=2 \
  log.samples=true || fail "TP 2 x DP 2 run"
grep -q "tensor parallel 2 x data parallel 2" tp2dp2.rank0 || fail "TP 2 x DP 2: the run does not say its grid: $(grep training tp2dp2.rank0)"
for run in one tp2 tp2dp2; do
  "$retain" export "$run/step-5" --out "$run.safetensors" 2>/dev/null || fail "export $run"
done
"$python" - <<'PY' || exit 1
import json
from safetensors.torch import load_file
one = load_file("one.safetensors")
def losses(run):
    return [json.loads(l)["loss"] for l in open(f"{run}/metrics.jsonl")]
for run in ("tp2", "tp2dp2"):
    other = load_file(f"{run}.safetensors")
    assert other.keys() == one.keys(), f"{run}: gate tensors {sorted(other)} != {sorted(one)}"
    diff = max((one[k] - other[k]).abs().max().item() for k in one)
    loss = max(abs(a - b) for a, b in zip(losses("one"), losses(run)))
    assert diff <= 1e-6, f"{run}: trained gates differ from one process by {diff}"
    assert loss <= 1e-5, f"{run}: losses differ from one process by {loss}"
    print(f"ok   {run}: gates after 5 steps == one process (max diff {diff:.2e}), losses (max diff {loss:.2e})")
# One sample log per data-parallel shard (ranks 0 and 2), each step's 2 x 2 sequences distinct.
import glob, collections
files = sorted(glob.glob("tp2dp2/samples.rank*.txt"))
assert [f.split("/")[-1] for f in files] == ["samples.rank0.txt", "samples.rank2.txt"], files
steps = collections.defaultdict(list)
for f in files:
    for line in open(f):
        step, epoch, sample = map(int, line.split())
        steps[step].append(sample)
assert sorted(steps) == [1, 2, 3, 4, 5] and all(len(set(v)) == 4 == len(v) for v in steps.values()), steps
print("ok   tp2dp2: one sample log per data-parallel shard, 4 distinct sequences per step")
PY

# 3. generate --tp 2 through the launcher == one process, dbtrimkv with the trained gates. Sampled
# (the random tiny model's greedy output repeats one token), so the tokens say more.
gen=(generate --model model --prompt-ids 5,9,13,200,7,61,88,3,14,15,92,65,35,89,79,32,38,46,26,43
     --max-new-tokens 12 --ignore-eos --temperature 1 --seed 3 --policy dbtrimkv --budget 4
     --chunk 6 --gates one.safetensors --json)
"$retain" "${gen[@]}" 2>/dev/null > gen-one.json || fail "generate on one process"
"$retain" launch --nproc 2 -- "${gen[@]}" --tp 2 > gen-tp2.json 2>gen-tp2.log ||
  fail "generate --tp 2: $(grep -m2 error gen-tp2.log)"
"$python" - <<'PY' || exit 1
import json
one, tp = [json.loads(l) for l in open("gen-one.json")], [json.loads(l) for l in open("gen-tp2.json")]
assert len(tp) == 1, f"generate --tp 2 printed {len(tp)} results (rank 0 alone prints)"
assert one[0]["ids"] == tp[0]["ids"], f"generate --tp 2 gave {tp[0]['ids']}, one process {one[0]['ids']}"
print(f"ok   generate --tp 2 == one process: {tp[0]['ids']}")
PY

# 3b. eval synthetic --tp 2 == one process (predictions and scores); rank 0 alone writes, and a
# re-run of the finished sweep resumes everything on every rank.
syn=(eval synthetic --model model --policy full,dbtrimkv:gates=one.safetensors,snapkv --budget 6
     --count 2 --words 60 --max-new-tokens 4 --tasks kv,needle)
"$retain" "${syn[@]}" --out syn-one > syn-one.log 2>&1 || fail "eval synthetic: $(grep -m2 error syn-one.log)"
"$retain" launch --nproc 2 -- "${syn[@]}" --out syn-tp2 --tp 2 > syn-tp2.log 2>&1 ||
  fail "eval synthetic --tp 2: $(grep -m2 error syn-tp2.log)"
"$retain" launch --nproc 2 -- "${syn[@]}" --out syn-tp2 --tp 2 > syn-resume.log 2>&1 ||
  fail "eval synthetic --tp 2 resumed: $(grep -m2 error syn-resume.log)"
"$python" - <<'PY' || exit 1
import json
def preds(d):
    return sorted((r["policy"], str(r["budget"]), r["id"], r["pred"], r["correct"])
                  for r in map(json.loads, open(f"{d}/predictions.jsonl")))
one, tp = preds("syn-one"), preds("syn-tp2")
assert one == tp, f"eval synthetic --tp 2 predictions differ:\n{one}\n{tp}"
assert len(tp) == len(set(tp)), "a rank other than 0 wrote predictions too (duplicates)"
s1, s2 = json.load(open("syn-one/scores.json")), json.load(open("syn-tp2/scores.json"))
# Rates and KV bytes differ (a rank holds half the heads); the scores and their intervals agree.
def scores(s):
    return [(r["policy"], r["budget"], r["intervals"],
             {k: v for k, v in r["metrics"].items() if k.startswith("em")}) for r in s["results"]]
assert scores(s1) == scores(s2), f"scores differ: {scores(s1)} vs {scores(s2)}"
print(f"ok   eval synthetic --tp 2 == one process: {len(tp)} predictions, same scores; re-run resumed")
PY
grep -q "generated 0 " syn-resume.log || fail "the re-run generated again: $(grep generated syn-resume.log)"

# 3c. bench decode / bench train --tp 2 run and print one result (rank 0's share).
"$retain" launch --nproc 2 -- bench decode --preset tiny --arch qwen3 --device cpu --dtype fp32 \
  --context 64 --new-tokens 4 --batch 1 --policy dbtrimkv --budget 8 --tp 2 --json \
  > bench-decode.json 2>bench-decode.log || fail "bench decode --tp 2: $(grep -m2 error bench-decode.log)"
"$retain" launch --nproc 2 -- bench train --preset tiny --arch qwen3 --device cpu --dtype fp32 \
  --seq 64 --iters 1 --warmup 0 --tp 2 --json \
  > bench-train.json 2>bench-train.log || fail "bench train --tp 2: $(grep -m2 error bench-train.log)"
"$python" - <<'PY' || exit 1
import json
for name in ("bench-decode", "bench-train"):
    lines = [json.loads(l) for l in open(f"{name}.json")]
    assert len(lines) == 1 and lines[0]["tensor_parallel"] == 2, f"{name}: {lines}"
print("ok   bench decode / bench train --tp 2: one result each, from rank 0")
PY

# 3d. A vision-language model (tiny random qwen3_vl: replicated vision tower, DeepStack, M-RoPE):
# generate --tp 2 with an image == one process.
"$retain" init-model --arch qwen3_vl --preset tiny --seed 7 --out model-vl 2>/dev/null || fail "init-model qwen3_vl"
"$python" -c "
from PIL import Image
Image.new('RGB', (90, 60), (200, 30, 60)).save('red.png')" || fail "writing an image"
vl=(generate --model model-vl --image red.png --prompt "what is this" --max-new-tokens 8 --temperature 1
    --seed 2 --ignore-eos --policy snapkv --budget 16 --json)
"$retain" "${vl[@]}" > vl-one.json 2>vl-one.log || fail "VL generate: $(grep -m2 error vl-one.log)"
"$retain" launch --nproc 2 -- "${vl[@]}" --tp 2 > vl-tp2.json 2>vl-tp2.log ||
  fail "VL generate --tp 2: $(grep -m2 error vl-tp2.log)"
"$python" - <<'PY' || exit 1
import json
one, tp = json.load(open("vl-one.json")), json.load(open("vl-tp2.json"))
assert one["ids"] == tp["ids"], f"qwen3_vl generate --tp 2 gave {tp['ids']}, one process {one['ids']}"
print(f"ok   qwen3_vl with an image: generate --tp 2 == one process: {tp['ids']}")
PY

# 4. Refusals.
check_refused() {  # check_refused NAME EXPECTED COMMAND...
  local name=$1 expected=$2
  shift 2
  "$@" > refused.log 2>&1 && fail "$name: exited 0"
  grep -q -- "$expected" refused.log || fail "$name: no '$expected' in: $(grep -m2 -i error refused.log)"
  echo "ok   refused: $name: $(grep -m1 -o "error: .*" refused.log | cut -c1-150)"
}
check_refused "TP 4 with 2 KV heads" "must divide num_key_value_heads (2)" \
  "$retain" launch --nproc 4 -- "${gen[@]}" --tp 4
check_refused "--tp 2 without a launcher" "found WORLD_SIZE 1" "$retain" "${gen[@]}" --tp 2
check_refused "a scorer with TP" "trains retention gates only" \
  "$retain" launch --nproc 2 -- train recipe.yaml run.dir=scorer dist.tensor_parallel=2 train.trainable=locret
check_refused "TP 2 on 3 ranks" "does not divide the 3 ranks" \
  "$retain" launch --nproc 3 -- train recipe.yaml run.dir=odd dist.tensor_parallel=2

# 5. A killed rank: the other rank of its group fails within the timeout, naming it.
port=$(free_port "$python")
pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$retain" train recipe.yaml run.dir=killed train.steps=100000 dist.tensor_parallel=2 \
    dist.timeout_s=10 checkpoint.every=1 > "killed.rank$r.log" 2>&1 &
  pids+=($!)
  started+=($!)
done
for _ in $(seq 1 1200); do compgen -G "killed/step-*" >/dev/null && break; sleep 0.1; done
compgen -G "killed/step-*" >/dev/null || fail "killed: training did not start: $(tail -2 killed.rank0.log)"
kill -9 "${pids[1]}"
t0=$(date +%s)
wait "${pids[0]}"
rc=$?
elapsed=$(($(date +%s) - t0))
[ $rc -ne 0 ] || fail "killed: rank 0 exited 0"
[ $elapsed -le 25 ] || fail "killed: rank 0 took ${elapsed}s to fail"
grep -q "rank 1 did not reach collective" killed.rank0.log ||
  fail "killed: rank 0's error does not name rank 1: $(grep -m1 error killed.rank0.log)"
echo "ok   killed rank 1 of a TP 2 run: rank 0 exited $rc after ${elapsed}s: $(grep -m1 -o 'rank 1 did not reach collective [^ ]*' killed.rank0.log)"
