#!/usr/bin/env bash
# The demo's speed as ratios, so a slower cache, sweep or trainer shows whatever the machine's
# speed that day (docs/measured.md, "The demo's speed as ratios"; run it before and after a change
# to eval/cache, eval/benchmarks/run_sweep.cpp, the policies or the trainer):
#   sweep / full: the demo's sweep (recipes/demo/eval.yaml: every policy at 5/10/20%) on its first
#     LIMIT questions per task, in answers/s, over the full cache alone on all 402 held-out
#     questions, in answers/s, in the same binary: the cells' caches against the model.
#   step / teacher: a demo gate step (`bench train` at the dbtrimkv recipe's shapes: mlp3 width 64,
#     M 12, 2 x 1,024 tokens) over its own teacher forward: the gates' work against the model's.
#   with --ref RETAIN (another build, e.g. an older commit's worktree): each figure of this build
#     over the same figure of the reference, the two run in turn (A B A B ...).
# Medians over RUNS rounds. Needs the demo's gate files (runs/demo/*.safetensors: `make demo`, or
# its gate steps alone); prints a table and writes OUT/bench-sweep.json.
#
#   scripts/bench-sweep.sh [--retain build/retain] [--ref OTHER/retain] [--runs 3] [--limit 6]
#                          [--demo runs/demo] [--out runs/bench-sweep]
set -euo pipefail
cd "$(dirname "$0")/.."
retain=build/retain ref="" runs=3 limit=6 demo=runs/demo out=runs/bench-sweep
while [ $# -gt 0 ]; do
  case "$1" in
    --retain) retain="$2"; shift 2 ;;
    --ref) ref="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --limit) limit="$2"; shift 2 ;;
    --demo) demo="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "bench-sweep: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
for b in "$retain" ${ref:+"$ref"}; do
  [ -x "$b" ] || { echo "bench-sweep: $b is not an executable retain (make build)" >&2; exit 2; }
done
for f in trimkv dbtrimkv locret kvzap; do
  [ -f "$demo/$f.safetensors" ] || {
    echo "bench-sweep: $demo/$f.safetensors is missing: run make demo (or its gate steps:" \
      "make $demo/$f.safetensors) first" >&2
    exit 2
  }
done
[ -f "$demo/data/heldout.jsonl" ] || { echo "bench-sweep: $demo/data/heldout.jsonl is missing" >&2; exit 2; }
[[ "$runs" =~ ^[1-9][0-9]*$ && "$limit" =~ ^[1-9][0-9]*$ ]] ||
  { echo "bench-sweep: --runs and --limit take whole numbers >= 1" >&2; exit 2; }
python="${RETAIN_HOME:-$HOME/.cache/retain}/venv/bin/python"
[ -x "$python" ] || python=python3
mkdir -p "$out"
work=$(mktemp -d "$out/tmp.XXXXXX")
trap 'rm -rf "$work"' EXIT

# figure BINARY NAME: one measurement, appended to $work/NAME.txt as a number.
figure() {
  local bin="$1" name="$2" dir="$work/run"
  rm -rf "$dir"
  case "$name" in
    sweep | full)
      local extra=(--limit "$limit")
      [ "$name" = full ] && extra=(--policy full)
      "$bin" eval synthetic --config recipes/demo/eval.yaml --model recipes/demo/base \
        --data "$demo/data/heldout.jsonl" --gates-dir "$demo" --out "$dir" "${extra[@]}" \
        > "$work/log.txt" 2>&1 || { cat "$work/log.txt" >&2; exit 1; }
      # From the closing log line ("generated N answers in S s"), which older builds print too.
      "$python" -c 'import re,sys; m=re.findall(r"generated (\d+) \S+ in ([\d.]+) s", open(sys.argv[1]).read())
print(int(m[-1][0]) / float(m[-1][1]))' "$work/log.txt" ;;
    step | teacher)
      "$bin" bench train --model recipes/demo/base --dtype fp32 --device cpu --seq 1024 --batch 2 \
        --gates mlp3 --gate-width 64 --memory 12 --iters 20 --warmup 3 --json \
        > "$work/train.json" 2> "$work/log.txt" || { cat "$work/log.txt" >&2; exit 1; }
      "$python" -c 'import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(r["step_ms"] if sys.argv[2] == "step" else r["time_ms"]["teacher_forward"])' \
        "$work/train.json" "$name" ;;
  esac
}

# Each round: the sweep, the full cache, the gate step (its teacher forward from the same run).
for round in $(seq "$runs"); do
  for side in a ${ref:+b}; do
    bin="$retain"; [ "$side" = b ] && bin="$ref"
    figure "$bin" sweep >> "$work/$side.sweep"
    figure "$bin" full >> "$work/$side.full"
    figure "$bin" step >> "$work/$side.step"
    cp "$work/train.json" "$work/$side.train.$round.json"
    "$python" -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])["time_ms"]["teacher_forward"])' \
      "$work/train.json" >> "$work/$side.teacher"
  done
  echo "bench-sweep: round $round of $runs done" >&2
done

"$python" - "$work" "$out/bench-sweep.json" "$retain" "$ref" "$limit" "$runs" <<'PY'
import json, os, statistics, sys
work, path, retain, ref, limit, runs = sys.argv[1:7]
def read(side, name):
    f = os.path.join(work, f"{side}.{name}")
    return [float(x) for x in open(f).read().split()] if os.path.exists(f) else []
out = {"retain": retain, "ref": ref or None, "limit": int(limit), "runs": int(runs), "sides": {}}
for side in ("a", "b") if ref else ("a",):
    f = {n: read(side, n) for n in ("sweep", "full", "step", "teacher")}
    out["sides"][side] = {
        "sweep_answers_per_s": statistics.median(f["sweep"]),
        "full_answers_per_s": statistics.median(f["full"]),
        "sweep_over_full": statistics.median([s / u for s, u in zip(f["sweep"], f["full"])]),
        "step_ms": statistics.median(f["step"]),
        "teacher_ms": statistics.median(f["teacher"]),
        "step_over_teacher": statistics.median([s / t for s, t in zip(f["step"], f["teacher"])]),
        "raw": f}
a = out["sides"]["a"]
print(f"{'figure':<28}{'this build':>12}" + (f"{'reference':>12}{'ratio':>8}" if ref else ""))
rows = [("sweep answers/s", "sweep_answers_per_s"), ("full-cache answers/s", "full_answers_per_s"),
        ("sweep / full", "sweep_over_full"), ("gate step ms", "step_ms"),
        ("teacher forward ms", "teacher_ms"), ("step / teacher", "step_over_teacher")]
for label, key in rows:
    line = f"{label:<28}{a[key]:>12.3f}"
    if ref:
        b = out["sides"]["b"]
        # Pair by pair, so a drifting machine cancels: this build's round k over the reference's.
        if key in ("sweep_answers_per_s", "full_answers_per_s", "step_ms", "teacher_ms"):
            name = {"sweep_answers_per_s": "sweep", "full_answers_per_s": "full", "step_ms": "step",
                    "teacher_ms": "teacher"}[key]
            ratio = statistics.median([x / y for x, y in zip(a["raw"][name], b["raw"][name])])
        else:
            ratio = a[key] / b[key]
        out.setdefault("ratios", {})[key] = ratio
        line += f"{b[key]:>12.3f}{ratio:>8.3f}"
    print(line)
json.dump(out, open(path, "w"), indent=1)
print(f"wrote {path}")
PY
