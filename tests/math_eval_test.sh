#!/usr/bin/env bash
# `retain eval math` end to end on a tiny random model: GSM8K / MATH-500 JSONL and AIME parquet
# layouts, sampled generations of 300 tokens under a budget of 16 (the bound checked for every
# token of every prediction), a killed sweep resumed with the same samples, `eval score` giving
# the sweep's scores, and bad input refused naming the file, the line and the field.
# Usage: math_eval_test.sh RETAIN WORKDIR PYTHON
set -uo pipefail
retain="$1"
work="$2"
python="$3"
rm -rf "$work" && mkdir -p "$work"
source "$(cd "$(dirname "$0")" && pwd)/cli_checks.sh"

model="$work/tiny"
check init-model "$retain" init-model --arch qwen3 --preset tiny --seed 11 --out "$model"

cat > "$work/gsm8k.jsonl" <<'EOF'
{"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did she sell altogether?", "answer": "48/2 = <<48/2=24>>24\n48+24 = <<48+24=72>>72\n#### 72"}
{"question": "Weng earns $12 an hour for babysitting. Yesterday she did 50 minutes. How much did she earn?", "answer": "12/60 = 0.2 per minute; 0.2 x 50 = 10\n#### 10"}
{"question": "What is 1,000 + 234?", "answer": "#### 1,234"}
EOF
cat > "$work/math500.jsonl" <<'EOF'
{"problem": "What is $\\frac{1}{2} + \\frac{1}{4}$?", "solution": "$\\boxed{\\frac{3}{4}}$", "answer": "\\frac{3}{4}", "subject": "Prealgebra", "level": 1, "unique_id": "test/prealgebra/1.json"}
{"problem": "Compute $\\sqrt{16}$.", "solution": "$\\boxed{4}$", "answer": "4", "subject": "Algebra", "level": 1, "unique_id": "test/algebra/2.json"}
EOF
"$python" - "$work/aime.parquet" <<'PY'
import sys
import pyarrow as pa, pyarrow.parquet as pq
pq.write_table(pa.table({"id": pa.array([60, 61], pa.int64()),
                         "problem": ["Find the remainder when 2^10 is divided by 1000.", "Compute 3 * 11."],
                         "answer": pa.array([24, 33], pa.int64())}), sys.argv[1])
PY

# Every prediction's bound, and the long generations it held over.
check_bound() {  # check_bound NAME RUN_DIR EXPECTED_LINES
  "$python" - "$2/predictions.jsonl" "$3" <<'PY' || { echo "FAIL $1: predictions"; failures=$((failures + 1)); }
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == int(sys.argv[2]), (len(rows), sys.argv[2])
assert len({(r["policy"], json.dumps(r["budget"]), r["id"], r["sample"]) for r in rows}) == len(rows)
for r in rows:
    if r["budget"] is not None:  # streaming:buffer=0 at 16: 16 entries + the query's own
        assert r["max_attended_entries"] <= 17, r
    assert r["new_tokens"] >= 1 and r["correct"] in (True, False) and "response" in r, r
    assert (r["answer"] is None) == r["unparsed"], r
long = [r for r in rows if r["budget"] is not None and r["new_tokens"] == 300]
assert long, "no generation ran to --max-new-tokens under the budget"
assert all(r["truncated"] for r in long)
PY
}

sweep=(eval math --model "$model" --chat-template chatml --data "$work/gsm8k.jsonl" --benchmark gsm8k
       --policy full,streaming:buffer=0 --budget 16 --samples 3 --temperature 0.9 --top-p 0.95
       --top-k 40 --seed 5 --max-new-tokens 300 --batch-size 2)
check gsm8k "$retain" "${sweep[@]}" --out "$work/gsm8k"
grep -q "pass@1" "$work/out.txt" || { echo "FAIL gsm8k: no table"; failures=$((failures + 1)); }
[ -f "$work/gsm8k/plot.png" ] || { echo "FAIL gsm8k: no plot"; failures=$((failures + 1)); }
check_bound gsm8k "$work/gsm8k" 18

# A sweep killed after some predictions resumes with the same samples: drop the last 5 lines (the
# streaming cell's last problem and more) and run again; every line comes back as it was.
cp "$work/gsm8k/predictions.jsonl" "$work/complete.jsonl"
head -n 13 "$work/complete.jsonl" > "$work/gsm8k/predictions.jsonl"
check gsm8k-resume "$retain" "${sweep[@]}" --out "$work/gsm8k"
grep -q "generated 5 gen" "$work/err.txt" || { echo "FAIL gsm8k-resume: $(grep generated "$work/err.txt")"; failures=$((failures + 1)); }
"$python" - "$work/complete.jsonl" "$work/gsm8k/predictions.jsonl" <<'PY' || { echo "FAIL gsm8k-resume: other samples"; failures=$((failures + 1)); }
import json, sys
key = lambda r: (r["policy"], json.dumps(r["budget"]), r["id"], r["sample"])
a, b = ({key(r): r for r in map(json.loads, open(p))} for p in sys.argv[1:])
assert a.keys() == b.keys()
for k in a:
    assert a[k]["response"] == b[k]["response"] and a[k]["seed"] == b[k]["seed"], k
PY

check gsm8k-score "$retain" eval score --benchmark math --predictions "$work/gsm8k/predictions.jsonl" --out "$work/rescored"
"$python" - "$work/gsm8k/scores.json" "$work/rescored/scores.json" <<'PY' || { echo "FAIL gsm8k-score: differs"; failures=$((failures + 1)); }
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert len(a["results"]) == len(b["results"]) == 2
for ra, rb in zip(a["results"], b["results"]):
    for k in ("pass@1", "maj@n", "unparsed", "truncated", "mean_new_tokens"):
        assert ra["metrics"][k] == rb["metrics"][k], (k, ra["metrics"][k], rb["metrics"][k])
    assert ra["intervals"]["pass@1"] == rb["intervals"]["pass@1"]
PY

check math500 "$retain" eval math --model "$model" --no-chat --data "$work/math500.jsonl" --benchmark math500 \
  --policy full --max-new-tokens 8 --out "$work/math500"
grep -q '"subject":"Algebra"' "$work/math500/predictions.jsonl" || { echo "FAIL math500: no subject"; failures=$((failures + 1)); }
check aime-parquet "$retain" eval math --model "$model" --no-chat --data "$work/aime.parquet" --benchmark aime \
  --policy full --max-new-tokens 8 --out "$work/aime"
grep -q '"gold":"33"' "$work/aime/predictions.jsonl" || { echo "FAIL aime-parquet: gold"; failures=$((failures + 1)); }

# prep --format math: OpenR1-Math's parquet (messages as list<struct<content, role>>, a list column
# beside it) and JSONL rows of both layouts, rendered as conversations.
"$python" - "$work" <<'PY'
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
msgs = pa.array([[{"content": "What is 2+2?", "role": "user"},
                  {"content": "<think>2+2=4</think> \\boxed{4}", "role": "assistant"}], None],
                pa.list_(pa.struct([("content", pa.string()), ("role", pa.string())])))
pq.write_table(pa.table({"problem": ["What is 2+2?", "Compute 5-1."], "solution": ["4", "\\boxed{4}"],
                         "messages": msgs, "generations": pa.array([["a", "b"], []])}),
               sys.argv[1] + "/openr1.parquet")
with open(sys.argv[1] + "/train.jsonl", "w") as f:
    f.write(json.dumps({"problem": "Compute 3*3.", "solution": "3*3 = \\boxed{9}"}) + "\n")
    f.write(json.dumps({"messages": [{"role": "user", "content": "1+1?"},
                                     {"role": "assistant", "content": "\\boxed{2}"}]}) + "\n")
    f.write(json.dumps({"question": "no layout"}) + "\n")
PY
head -n 2 "$work/train.jsonl" > "$work/train2.jsonl"
check prep-math "$retain" prep --tokenizer "$model" --chat-template chatml --format math \
  --input "$work/openr1.parquet" "$work/train2.jsonl" --out "$work/math-shards"
grep -q '"docs": 4' "$work/math-shards/prep.json" || { echo "FAIL prep-math: $(cat "$work/math-shards/prep.json")"; failures=$((failures + 1)); }
check_error prep-math-layout "train.jsonl:3: no 'problem' string and no 'messages'" "$retain" prep \
  --tokenizer "$model" --chat-template chatml --format math --input "$work/train.jsonl" --out "$work/bad-shards"
[ ! -e "$work/bad-shards" ] && [ ! -e "$work/bad-shards.tmp" ] || { echo "FAIL prep-math-layout: output left"; failures=$((failures + 1)); }

# Bad input: named, non-zero, and no run directory left behind.
printf '{"question": "q", "answer": "#### 1"}\n{"problem": "q", "answer": "#### 2"}\n' > "$work/other.jsonl"
check_error missing-field "other.jsonl:2: no 'question'" "$retain" eval math --model "$model" \
  --data "$work/other.jsonl" --benchmark gsm8k --out "$work/bad"
[ ! -e "$work/bad/predictions.jsonl" ] || { echo "FAIL missing-field: predictions written"; failures=$((failures + 1)); }
check_error greedy-samples "with --temperature 0" "$retain" eval math --model "$model" \
  --data "$work/gsm8k.jsonl" --benchmark gsm8k --samples 4 --out "$work/bad2"
check_error unknown-benchmark "aime25" "$retain" eval math --model "$model" \
  --data "$work/gsm8k.jsonl" --benchmark aime25 --out "$work/bad3"
check_error not-aime "aime.parquet row 0: no 'question'" "$retain" eval math --model "$model" \
  --data "$work/aime.parquet" --benchmark gsm8k --out "$work/bad4"

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all math eval checks passed"
