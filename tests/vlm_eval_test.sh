#!/usr/bin/env bash
# Vision-language benchmarks end to end on tiny random VLMs: `eval mmmu` on MMMU's parquet
# release layout and on the JSONL layout, `eval mmstar`, resume, `eval score` reproducing the
# sweep's scores from predictions.jsonl alone, and bad input refused with a message naming it.
# Usage: vlm_eval_test.sh RETAIN WORKDIR FIXTURES
set -uo pipefail
retain="$1"
work="$2"
fixtures="$3"
rm -rf "$work" && mkdir -p "$work"
failures=0
mmmu="$fixtures/mmmu"

check() {  # check NAME COMMAND... : the command must succeed
  local name="$1"; shift
  if ! "$@" > "$work/out.txt" 2> "$work/err.txt"; then
    echo "FAIL $name: exit $? ($(tail -3 "$work/err.txt"))"; failures=$((failures + 1))
  else
    echo "ok   $name"
  fi
}

check_error() {  # check_error NAME EXPECTED_TEXT COMMAND... : non-zero exit, message on stderr
  local name="$1" expected="$2"; shift 2
  "$@" > "$work/out.txt" 2> "$work/err.txt"
  local rc=$?
  if [ $rc -eq 0 ]; then
    echo "FAIL $name: exited 0"; failures=$((failures + 1))
  elif ! grep -qF -- "$expected" "$work/err.txt"; then
    echo "FAIL $name: stderr lacks '$expected': $(cat "$work/err.txt")"; failures=$((failures + 1))
  else
    echo "ok   $name (exit $rc)"
  fi
}

# Every (policy, budget, question) once in predictions.jsonl, and `eval score` gives scores.json.
check_run() {  # check_run NAME RUN_DIR BENCHMARK EXPECTED_LINES
  local name="$1" dir="$2" benchmark="$3" lines="$4"
  python3 - "$dir" "$lines" <<'PY' || { echo "FAIL $name: predictions"; failures=$((failures + 1)); }
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/predictions.jsonl")]
assert len(rows) == int(sys.argv[2]), (len(rows), sys.argv[2])
keys = {(r["policy"], json.dumps(r["budget"]), r.get("id", r.get("index"))) for r in rows}
assert len(keys) == len(rows), "a unit twice"
assert any(r["image_tokens"] > 0 for r in rows), "no image tokens at all"
PY
  check "$name-score" "$retain" eval score --benchmark "$benchmark" \
    --predictions "$dir/predictions.jsonl" --out "$dir/rescored"
  python3 - "$dir/scores.json" "$dir/rescored/scores.json" <<'PY' || { echo "FAIL $name: eval score differs"; failures=$((failures + 1)); }
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for ra, rb in zip(a["results"], b["results"]):
    for k, v in rb["metrics"].items():
        assert ra["metrics"][k] == v, (ra["policy"], k, ra["metrics"][k], v)
assert len(a["results"]) == len(b["results"]) > 0
PY
}

vl="$work/qwen3-vl"
check init-model "$retain" init-model --arch qwen3_vl --preset tiny --seed 5 --out "$vl"
check mmmu-release "$retain" eval mmmu --model "$vl" --data "$mmmu/release" \
  --policy full,snapkv,streaming --budget 0.5 --max-new-tokens 6 --batch-size 2 --out "$work/mmmu"
grep -q "Art and Design" "$work/out.txt" || { echo "FAIL mmmu-release: no table"; failures=$((failures + 1)); }
[ -f "$work/mmmu/plot.png" ] && [ -f "$work/mmmu/memory.png" ] || { echo "FAIL mmmu-release: no plots"; failures=$((failures + 1)); }
check_run mmmu-release "$work/mmmu" mmmu 27
check mmmu-resume "$retain" eval mmmu --model "$vl" --data "$mmmu/release" \
  --policy full,snapkv,streaming --budget 0.5 --max-new-tokens 6 --batch-size 2 --out "$work/mmmu"
grep -q "generated 0 q" "$work/err.txt" || { echo "FAIL mmmu-resume regenerated: $(grep generated "$work/err.txt")"; failures=$((failures + 1)); }
check mmmu-jsonl-first "$retain" eval mmmu --model "$vl" --data "$mmmu/jsonl" --images first \
  --subjects Art_Theory,Math --limit 2 --policy full --max-new-tokens 4 --out "$work/mmmu-jsonl"
check_run mmmu-jsonl-first "$work/mmmu-jsonl" mmmu 4

check mmstar "$retain" eval mmstar --model "$vl" --data "$fixtures/mmstar/mmstar.parquet" \
  --policy full,snapkv --budget 16 --max-new-tokens 4 --out "$work/mmstar"
grep -q "coarse perception" "$work/out.txt" || { echo "FAIL mmstar: no table"; failures=$((failures + 1)); }
check_run mmstar "$work/mmstar" mmstar 6

text_model="$work/qwen3"
check init-text-model "$retain" init-model --arch qwen3 --preset tiny --out "$text_model"
check_error mmmu-text-only-model "a text-only model; this benchmark needs a vision-language model" \
  "$retain" eval mmmu --model "$text_model" --data "$mmmu/release" --out "$work/bad1"
check_error mmmu-bad-letter "row 0: answer 'D' is not one of the option letters A-C" \
  "$retain" eval mmmu --model "$vl" --data "$mmmu/bad/bad_letter" --out "$work/bad2"
check_error mmmu-missing-image "<image 3> is referenced but image_3 is empty" \
  "$retain" eval mmmu --model "$vl" --data "$mmmu/bad/missing_image" --out "$work/bad3"
check_error mmmu-other-schema "no column 'id'" \
  "$retain" eval mmmu --model "$vl" --data "$mmmu/bad/other_schema" --out "$work/bad4"
check_error mmmu-bad-image "bad_image/Art/validation-00000-of-00001.parquet row 0 image_1" \
  "$retain" eval mmmu --model "$vl" --data "$mmmu/bad/bad_image" --out "$work/bad5"
check_error mmmu-test-split "no test.jsonl and no test-*.parquet" \
  "$retain" eval mmmu --model "$vl" --data "$mmmu/release" --split test --out "$work/bad6"
check_error mmstar-other-schema "no column 'index'" \
  "$retain" eval mmstar --model "$vl" --data "$fixtures/mmstar/bad.parquet" --out "$work/bad7"

echo "$failures failed"
[ "$failures" -eq 0 ]
