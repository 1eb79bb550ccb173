#!/usr/bin/env bash
# End-to-end checks of the `retain` command line: the happy path writes what it promises, and bad
# input exits non-zero with a message naming the problem. Usage: cli_test.sh RETAIN WORKDIR
set -uo pipefail
retain="$1"
work="$2"
rm -rf "$work" && mkdir -p "$work"
source "$(cd "$(dirname "$0")" && pwd)/cli_checks.sh"

model="$work/tiny"
check init-model "$retain" init-model --arch qwen3 --preset tiny --seed 3 --out "$model"
for f in config.json model.safetensors tokenizer.model; do
  [ -f "$model/$f" ] || { echo "FAIL init-model did not write $f"; failures=$((failures + 1)); }
done

check generate-text "$retain" generate --model "$model" --prompt "The value of alpha is" --max-new-tokens 5
check generate-json "$retain" generate --model "$model" --prompt-ids 1,20,30 --max-new-tokens 6 --ignore-eos --json
python3 - "$work/out.txt" <<'PY' || failures=$((failures + 1))
import json, sys
out = json.load(open(sys.argv[1]))
assert len(out["ids"]) == 6, out
assert out["prompt_ids"] == [1, 20, 30], out
assert out["decode_tokens_per_s"] > 0, out
print("ok   generate-json content")
PY
check generate-sampling "$retain" generate --model "$model" --prompt-ids 1,20,30 --max-new-tokens 6 \
  --temperature 0.8 --top-p 0.9 --seed 5 --ignore-eos --json
cp "$work/out.txt" "$work/sample1.json"
check generate-sampling-again "$retain" generate --model "$model" --prompt-ids 1,20,30 --max-new-tokens 6 \
  --temperature 0.8 --top-p 0.9 --seed 5 --ignore-eos --json
cmp -s "$work/out.txt" "$work/sample1.json" || python3 - "$work/out.txt" "$work/sample1.json" <<'PY' || failures=$((failures + 1))
import json, sys
a, b = (json.load(open(p))["ids"] for p in sys.argv[1:])
assert a == b, f"same seed, different samples: {a} vs {b}"
PY

printf 'The value of alpha is 12.\nThe cat reads the door before noon.\n%.0s' {1..20} > "$work/text.txt"
check eval-ppl "$retain" eval ppl --model "$model" --text "$work/text.txt" --max-length 64 --stride 32 --out "$work/ppl"
python3 - "$work/ppl/scores.json" "$work/ppl/scores.csv" <<'PY' || failures=$((failures + 1))
import json, math, sys
s = json.load(open(sys.argv[1]))
assert s["benchmark"] == "ppl", s
r = s["results"][0]
assert r["policy"] == "full" and r["budget"] is None, r
m = r["metrics"]
assert m["tokens"] > 100 and math.isclose(m["ppl"], math.exp(m["nll"]), rel_tol=1e-9), m
assert open(sys.argv[2]).readline().strip() == "policy,budget,nll,ppl,tokens,windows"
print("ok   eval-ppl scores.json/csv schema")
PY

check eval-synthetic "$retain" eval synthetic --model "$model" --policy full,streaming,knorm --budget 0.2,0.5 \
  --count 1 --words 80 --max-new-tokens 2 --out "$work/syn"
python3 - "$work/syn" <<'PY' || failures=$((failures + 1))
import json, struct, sys, zlib
d = sys.argv[1]
rows = json.load(open(d + "/scores.json"))["results"]
assert [(r["policy"], r["budget"]) for r in rows] == [("full", None), ("streaming", 0.2), ("streaming", 0.5),
                                                       ("knorm", 0.2), ("knorm", 0.5)], rows
png = open(d + "/plot.png", "rb").read()
assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", png[16:24])
pos, idat = 8, b""
while pos < len(png):
    n, kind = struct.unpack(">I4s", png[pos:pos + 8])
    body = png[pos + 8:pos + 8 + n]
    assert zlib.crc32(kind + body) == struct.unpack(">I", png[pos + 8 + n:pos + 12 + n])[0], kind
    if kind == b"IDAT": idat += body
    pos += 12 + n
assert len(zlib.decompress(idat)) == h * (3 * w + 1)
print(f"ok   eval synthetic: scores.json rows and a valid {w}x{h} plot.png")
PY

# RULER at 1024 tokens, two samples of five tasks, three cells: scores per task and their mean,
# and kvpress's leaderboard layout.
check eval-ruler "$retain" eval ruler --model "$model" --lengths 1024 --samples 2 \
  --tasks niah_single_1,niah_multivalue,vt,cwe,fwe --policy full,snapkv,expected_attention:alloc=adakv \
  --budget 0.5 --write-prompts --out "$work/ruler"
python3 - "$work/ruler" <<'PY' || failures=$((failures + 1))
import csv, json, sys
d = sys.argv[1]
rows = json.load(open(d + "/scores.json"))["results"]
assert [r["policy"] for r in rows] == ["full", "snapkv", "expected_attention:alloc=adakv"], rows
tasks = ["niah_single_1", "niah_multivalue", "vt", "cwe", "fwe"]
for r in rows:
    m = r["metrics"]
    assert abs(m["ruler"] - sum(m[t] for t in tasks) / 5) < 0.01, m
preds = [json.loads(l) for l in open(d + "/predictions.jsonl")]
assert len(preds) == 30 and all(p["prompt_tokens"] + 128 <= 1024 + 1 for p in preds if p["task"].startswith("niah")), len(preds)
lb = list(csv.reader(open(d + "/leaderboard.csv")))
assert lb[0][:6] == ["dataset", "data_dir", "model", "method", "compression_ratio", "score"], lb[0]
assert [r[3] for r in lb[1:]] == ["full", "snapkv", "expected_attention:alloc=adakv"], lb
assert lb[1][4] == "0.00" and lb[2][4] == "0.50" and lb[1][1] == "1024", lb
# "niah": the needle tasks' mean; "ruler" and "niah" carry bootstrap intervals holding them, and
# every budgeted row its paired difference to the full cache, the same units' scores subtracted.
for r in rows:
    m, iv = r["metrics"], r["intervals"]
    assert abs(m["niah"] - (m["niah_single_1"] + m["niah_multivalue"]) / 2) < 0.01, m
    for k in ["ruler", "niah"]:
        assert iv[k][0] - 0.01 <= m[k] <= iv[k][1] + 0.01, (k, m, iv)
full = rows[0]["metrics"]
assert "niah_vs_full" not in full, full
for r in rows[1:]:
    m, iv = r["metrics"], r["intervals"]
    for k in ["ruler", "niah"]:
        assert abs(m[k + "_vs_full"] - (m[k] - full[k])) < 0.02, (k, m, full)
        assert iv[k + "_vs_full"][0] - 1e-9 <= m[k + "_vs_full"] <= iv[k + "_vs_full"][1] + 1e-9, (k, iv)
print("ok   eval ruler: per-task scores, their mean, intervals and leaderboard.csv")
PY
# Each record says where its needles start in the prompt: the prompt's tokens from there decode
# to the needle (the model's tokenizer and chat template, through `retain tokenize --decode`).
python3 - "$work/ruler" "$retain" "$model" <<'PY' || failures=$((failures + 1))
import json, subprocess, sys
d, retain, model = sys.argv[1:]
prompts = {p["unit"]: p["prompt_ids"] for p in map(json.loads, open(d + "/prompts.jsonl"))}
records = [json.loads(l) for l in open(d + "/predictions.jsonl")]
needles = {"niah_single_1": 1, "niah_multivalue": 4, "vt": 5, "cwe": 0, "fwe": 0}
starts = {"niah_single_1": "One of the special magic", "niah_multivalue": "One of the special magic", "vt": "VAR "}
for r in records:
    at = r["needle_tokens"]
    assert len(at) == needles[r["task"]] and at == sorted(at), r
    assert all(0 < p < r["prompt_tokens"] for p in at), r
def tokenize(*args):
    return subprocess.run([retain, "tokenize", "--model", model, *args], check=True,
                          capture_output=True, text=True).stdout.rstrip("\n")
# One decode per record: each needle's first 40 tokens, the pieces separated by a marker.
marker = [int(i) for i in tokenize("--ids", "--text", "\n#@#\n").split(",")]
for r in records:
    if r["policy"] != "full" or r["task"] not in starts:
        continue
    ids, pieces = prompts[r["id"]], []
    for p in r["needle_tokens"]:
        pieces += ids[p:p + 40] + marker
    texts = tokenize("--skip-special", "--decode", ",".join(map(str, pieces))).split("#@#")[:-1]
    assert len(texts) == len(r["needle_tokens"]), (r["id"], texts)
    for i, (p, text) in enumerate(zip(r["needle_tokens"], texts)):
        # The marker's newline opens every piece but the first; a newline of the prompt's own
        # before the needle would mean an index one token early.
        text = text[1:] if i > 0 and text.startswith("\n") else text
        assert text.lstrip(" ").startswith(starts[r["task"]]), (r["id"], p, text)
print("ok   eval ruler: needle_tokens point at each needle's first token")
PY
# eval score gives the sweep's metrics and intervals again from predictions.jsonl alone.
check eval-score-ruler "$retain" eval score --benchmark ruler --predictions "$work/ruler/predictions.jsonl" --out "$work/ruler-rescored"
python3 - "$work/ruler" "$work/ruler-rescored" <<'PY' || failures=$((failures + 1))
import json, sys
sweep, again = (json.load(open(d + "/scores.json"))["results"] for d in sys.argv[1:])
assert [(r["policy"], r["budget"]) for r in sweep] == [(r["policy"], r["budget"]) for r in again]
for a, b in zip(sweep, again):
    # Sums in the file's order may round apart from the sweep's in the last place.
    assert a["metrics"].keys() == b["metrics"].keys(), (a["metrics"], b["metrics"])
    assert all(abs(a["metrics"][k] - b["metrics"][k]) <= 1e-9 * max(1, abs(a["metrics"][k])) for k in a["metrics"]), (a, b)
    assert a["intervals"] == b["intervals"], (a["intervals"], b["intervals"])
print("ok   eval score --benchmark ruler: the sweep's metrics and intervals")
PY
check_error ruler-qa-without-data "--tasks qa_1 needs --squad" "$retain" eval ruler --model "$model" --tasks qa_1 --out "$work/rulerx"
check_error ruler-bad-length "--lengths: expected token counts like 4096,8192, found '4k'" "$retain" eval ruler --model "$model" --lengths 4k --out "$work/rulerx"
[ ! -e "$work/rulerx" ] || { echo "FAIL eval ruler left output after an error"; failures=$((failures + 1)); }

check_error missing-model "no config.json" "$retain" generate --model "$work/nope" --prompt-ids 1
check_error both-prompts "exactly one of --prompt, --prompt-ids or --prompts-file" "$retain" generate --model "$model"
printf 'The value of alpha is\nThe cat reads the door before noon and the key\nx\n' > "$work/prompts.txt"
check generate-batch "$retain" generate --model "$model" --prompts-file "$work/prompts.txt" --max-new-tokens 4 \
  --ignore-eos --json --policy h2o --budget 6
[ "$(wc -l < "$work/out.txt")" -eq 3 ] || { echo "FAIL generate-batch: expected 3 JSON lines"; failures=$((failures + 1)); }
check_error bad-ids "'x' is not a non-negative integer" "$retain" generate --model "$model" --prompt-ids 1,x
check_error id-out-of-vocab "outside the vocabulary" "$retain" generate --model "$model" --prompt-ids 99999
# bench decode: a tiny preset and a model directory, every field, and its option errors.
for p in full dbtrimkv snapkv; do
  check "bench-decode-$p" "$retain" bench decode --preset tiny --arch qwen3 --dtype fp32 --device cpu \
    --context 200 --budget 24 --batch 2 --new-tokens 6 --chunk 64 --policy $p --json
  python3 - "$work/out.txt" "$p" <<'PY' || failures=$((failures + 1))
import json, sys
r = json.loads(open(sys.argv[1]).read())
for k in ["prefill_tokens_per_s", "decode_tokens_per_s", "ms_per_decode_step", "kv_bytes_after_prefill",
          "kv_bytes_end", "kv_bytes_peak", "kv_bytes_full_cache", "weight_bytes", "bytes_per_decode_step",
          "copy_bandwidth_bytes_per_s", "roofline_ms_per_step", "roofline_fraction"]:
    assert k in r and r[k] > 0, (k, r.get(k))
assert r["policy"] == sys.argv[2] and r["batch"] == 2 and r["context"] == 200, r
# The step's outermost calls by name: they sum to the count, which nested calls exceed; every
# layer's projections are among them (2 layers: q, k, v, o and the MLP's three, or fused).
names, outermost = r["outermost_ops_by_name"], r["outermost_ops_per_decode_step"]
assert sum(names.values()) == outermost and 0 < outermost < r["aten_ops_per_decode_step"], r
assert names.get("aten::linear", 0) + names.get("aten::matmul", 0) >= 2 * 2, names
if sys.argv[2] == "full":
    assert r["kv_bytes_end"] == r["kv_bytes_full_cache"] - 2 * 2 * 2 * 16 * 2 * 4, r  # the last token is never fed
else:  # 24 entries per head (dbtrimkv: in all) plus the default buffer of 128 at most
    assert r["kv_bytes_peak"] < r["kv_bytes_full_cache"], r
print(f"ok   bench decode {sys.argv[2]} fields")
PY
done
check bench-decode-table "$retain" bench decode --model "$model" --context 64 --budget 0.5 --batch 1 --new-tokens 4 --policy h2o
grep -q "^roofline" "$work/out.txt" || { echo "FAIL bench decode table lacks the roofline line"; failures=$((failures + 1)); }
grep -q "outermost calls; the most frequent: aten::" "$work/out.txt" || { echo "FAIL bench decode table lacks the operators by name"; failures=$((failures + 1)); }
# --prompts-file: the given ids set batch and context; the JSON carries the greedy tokens.
echo '[[5, 6, 7, 8, 9, 10], [11, 12, 13, 14, 15, 16]]' > "$work/prompts.json"
check bench-decode-prompts "$retain" bench decode --model "$model" --prompts-file "$work/prompts.json" \
  --budget 4 --new-tokens 3 --policy h2o --json
python3 - "$work/out.txt" <<'PY' || failures=$((failures + 1))
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r["batch"] == 2 and r["context"] == 6 and len(r["tokens"]) == 2 and len(r["tokens"][0]) == 3, r
print("ok   bench decode --prompts-file fields")
PY
echo '[[5, 6, 7], [8, 9]]' > "$work/ragged.json"
check_error bench-decode-ragged "prompt 1 has 2 tokens, prompt 0 has 3" \
  "$retain" bench decode --model "$model" --prompts-file "$work/ragged.json"
echo '[[5, 99999]]' > "$work/oov.json"
check_error bench-decode-oov "expected token ids in [0, " \
  "$retain" bench decode --model "$model" --prompts-file "$work/oov.json"
echo '{"a": 1}' > "$work/notlist.json"
check_error bench-decode-notlist "expected a non-empty JSON array of prompts" \
  "$retain" bench decode --model "$model" --prompts-file "$work/notlist.json"
check_error bench-decode-context "--context: expected a number > 0, found '0'" "$retain" bench decode --preset tiny --arch qwen3 --context 0
check_error bench-decode-policy "is not known" "$retain" bench decode --preset tiny --arch qwen3 --policy bogus
check_error bench-decode-preset "needs --arch" "$retain" bench decode --preset tiny
check_error bench-decode-both "excludes" "$retain" bench decode --preset tiny --model "$model"

# bench train: a tiny preset, every field, both attention paths, and its option errors.
for a in wmma triton reference; do
  check "bench-train-$a" "$retain" bench train --preset tiny --arch qwen3 --dtype fp32 --device cpu \
    --seq 128 --batch 2 --gate-width 8 --iters 2 --warmup 1 --attention $a --json
  python3 - "$work/out.txt" "$a" <<'PY' || failures=$((failures + 1))
import json, sys
r = json.loads(open(sys.argv[1]).read())
for k in ["tokens_per_s", "step_ms", "model_tflops_per_step", "achieved_tflops", "matmul_tflops_measured",
          "mfu", "peak_memory_bytes"]:
    assert r[k] > 0, (k, r.get(k))
for k in ["teacher_forward", "student_forward", "losses", "backward", "optimizer"]:
    assert r["time_ms"][k] > 0, (k, r["time_ms"])
assert r["attention"] == sys.argv[2] and r["seq"] == 128 and r["batch"] == 2, r
assert r["loss"] == r["loss"], "NaN loss"
print(f"ok   bench train {sys.argv[2]} fields (mfu {r['mfu']:.3f})")
PY
done
check_error bench-train-attention "expected wmma, triton or reference" "$retain" bench train --preset tiny --arch qwen3 --attention flash
check_error bench-train-seq "--seq must be >= 2" "$retain" bench train --preset tiny --arch qwen3 --seq 1
check_error bench-train-gates "gates" "$retain" bench train --preset tiny --arch qwen3 --gates mlp9 --seq 16

# Only meaningful where no GPU is visible (a GPU machine runs the same suite through gpu-run.sh).
if ! "$retain" env 2>/dev/null | grep -q "CUDA available to LibTorch: yes"; then
  check_error no-cuda "no CUDA device" "$retain" generate --model "$model" --prompt-ids 1 --device cuda
fi
check_error ppl-stride "exceeds max_length" "$retain" eval ppl --model "$model" --text "$work/text.txt" --max-length 8 --stride 16 --out "$work/ppl2"
[ ! -e "$work/ppl2" ] || { echo "FAIL ppl wrote output despite the error"; failures=$((failures + 1)); }
check_error missing-text "cannot open" "$retain" eval ppl --model "$model" --text "$work/none.txt" --out "$work/ppl3"
check_error exists "already exists" "$retain" init-model --arch qwen3 --preset tiny --out "$model"
check_error unknown-arch "unknown --arch 'gpt2'" "$retain" init-model --arch gpt2 --preset tiny --out "$work/g"
check_error missing-flag "--model is required" "$retain" generate --prompt-ids 1
check_error chat-without-template "no chat template" "$retain" generate --model "$model" --prompt hi --chat
check_error chat-and-no-chat "exclude each other" "$retain" generate --model "$model" --prompt hi --chat --no-chat
# --chat-template takes a Jinja file (or chatml); Qwen2-Instruct's template, for the VLMs below too.
cat > "$work/qwen2.jinja" <<'JINJA'
{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}
JINJA
check tokenize-chat-template-file "$retain" tokenize --model "$model" --text hi --chat --chat-template "$work/qwen2.jinja" --ids
check tokenize-chat-template-chatml "$retain" tokenize --model "$model" --text hi --chat-template chatml --ids
check_error chat-template-name "expected the path of a Jinja chat template file, or 'chatml'" \
  "$retain" generate --model "$model" --prompt hi --chat-template qwen2
printf 'ok\n{%% include "other.jinja" %%}' > "$work/include.jinja"
check_error chat-template-outside-subset "include.jinja:2: the 'include' statement is outside the Jinja subset" \
  "$retain" tokenize --model "$model" --text hi --chat-template "$work/include.jinja"
check tokenize-ids "$retain" tokenize --model "$model" --text "The value of alpha is 12." --ids
grep -qE '^1,[0-9]+(,[0-9]+)+$' "$work/out.txt" || { echo "FAIL tokenize --ids output: $(cat "$work/out.txt")"; failures=$((failures + 1)); }
alpha_ids="$(cat "$work/out.txt")"
check tokenize-decode "$retain" tokenize --model "$model" --decode "$alpha_ids" --skip-special
[ "$(cat "$work/out.txt")" = "The value of alpha is 12." ] || { echo "FAIL tokenize --decode round trip: '$(cat "$work/out.txt")'"; failures=$((failures + 1)); }
check_error tokenize-decode-bad-id "id 99999999 (item 2) is outside this tokenizer's vocabulary" \
  "$retain" tokenize --model "$model" --decode "1,99999999"
check_error tokenize-decode-not-an-id "tokenize --decode: item 2, 'x' is not a non-negative integer" "$retain" tokenize --model "$model" --decode "1,x"
check_error tokenize-two-inputs "exactly one of --text, --file or --decode" \
  "$retain" tokenize --model "$model" --text a --decode 1
check tokenize-table "$retain" tokenize --model "$model" --text "alpha"
grep -qP '^1\t"<s>"$' "$work/out.txt" || { echo "FAIL tokenize table lacks BOS row: $(head -2 "$work/out.txt")"; failures=$((failures + 1)); }
mkdir -p "$work/notok" && cp "$model/config.json" "$model/model.safetensors" "$work/notok/"
# BOS/EOS as the files say: with only tokenizer.model, tokenizer_config.json's add_bos_token and
# add_eos_token apply (as in transformers 5); the full encoding ends in EOS, a prompt does not.
eosmodel="$work/eosmodel"
mkdir -p "$eosmodel" && cp "$model/tokenizer.model" "$model/config.json" "$eosmodel/"
echo '{"add_bos_token": true, "add_eos_token": true}' > "$eosmodel/tokenizer_config.json"
check tokenize-full-encoding "$retain" tokenize --model "$eosmodel" --text "alpha" --ids
grep -qE '^1,[0-9,]+,2$' "$work/out.txt" || { echo "FAIL tokenize full encoding lacks BOS..EOS: $(cat "$work/out.txt")"; failures=$((failures + 1)); }
check tokenize-as-prompt "$retain" tokenize --model "$eosmodel" --text "alpha" --ids --as-prompt
grep -qE '^1,' "$work/out.txt" && ! grep -qE ',2$' "$work/out.txt" ||
  { echo "FAIL tokenize --as-prompt ends in EOS: $(cat "$work/out.txt")"; failures=$((failures + 1)); }
check tokenize-explain "$retain" tokenize --model "$eosmodel" --explain
grep -q '^# special tokens: .*add_eos_token true' "$work/out.txt" || { echo "FAIL tokenize --explain: $(cat "$work/out.txt")"; failures=$((failures + 1)); }
check_error tokenize-as-prompt-decode "--as-prompt applies to --text/--file" \
  "$retain" tokenize --model "$eosmodel" --decode 1 --as-prompt

check_error missing-tokenizer "no tokenizer found" "$retain" generate --model "$work/notok" --prompt hello

# retain synth, --config files, init-model --tokenizer, prep --label-spans, eval synthetic --data.
syn="$work/synth"
cat > "$work/synth.yaml" <<'YAML'
key-chars: 2
key-alphabet: bcdfghjklmnpqrst
value-digits: 2
train-count: 20,4
train-words: 10:30,80:100
train-tasks: [needle, multi]
train-multi-facts: 1:4
heldout-count: 2
heldout-words: 40
vocab-size: 400
YAML
check synth "$retain" synth --config "$work/synth.yaml" --heldout-count 3 --out "$syn"
for f in train.jsonl heldout.jsonl tokenizer.model synth.json; do
  [ -s "$syn/$f" ] || { echo "FAIL synth did not write $f"; failures=$((failures + 1)); }
done
# Flags after --config override the file: 3 held-out examples per task, 4 tasks.
[ "$(wc -l < "$syn/heldout.jsonl")" -eq 12 ] || { echo "FAIL synth --heldout-count did not override the config"; failures=$((failures + 1)); }
[ "$(wc -l < "$syn/train.jsonl")" -eq 48 ] || { echo "FAIL synth train parts: $(wc -l < "$syn/train.jsonl") documents"; failures=$((failures + 1)); }
# --heldout-questions 7: 7 examples of kv, vars and needle, 3 of multi (3 questions each: 9 >= 7).
check synth-heldout-questions "$retain" synth --config "$work/synth.yaml" --heldout-questions 7 \
  --multi-questions 3 --vocab-size 0 --out "$work/synth-q"
python3 - "$work/synth-q/heldout.jsonl" <<'PY' || failures=$((failures + 1))
import collections, json, sys
tasks = collections.Counter(json.loads(l)["task"] for l in open(sys.argv[1]))
want = {"kv": 7, "vars": 7, "needle": 7, "multi": 3}
assert tasks == want, f"FAIL synth --heldout-questions 7 wrote {dict(tasks)}, expected {want}"
PY
check_error synth-exists "already exists" "$retain" synth --config "$work/synth.yaml" --out "$syn"
check_error synth-same-seed "would repeat the training corpus" "$retain" synth --seed 4 --heldout-seed 4 --out "$work/s2"
check_error synth-bad-range "the range '9:3' is empty" "$retain" synth --train-words 9:3 --out "$work/s2"
check_error synth-parts "--train-count has 2 parts but --train-words has 1" "$retain" synth --train-count 3,4 --out "$work/s2"
[ ! -e "$work/s2" ] && [ ! -e "$work/s2.tmp" ] || { echo "FAIL synth left output after an error"; failures=$((failures + 1)); }
# --tokenizer-pieces: each string one piece (a space written as a space), so a question's key is
# the token right before the answer.
check synth-pieces "$retain" synth --config "$work/synth.yaml" --heldout-count 0 \
  --tokenizer-pieces "$(printf '?\nAnswer:'),: value" --out "$work/synth-p"
check init-model-pieces "$retain" init-model --arch llama --preset tiny \
  --tokenizer "$work/synth-p/tokenizer.model" --out "$work/synmodel-p"
"$retain" tokenize --model "$work/synmodel-p" --text "$(printf 'Key hj: value 42.\nQuestion: What is the value of key hj?\nAnswer: 42')" \
  > "$work/pieces.txt" 2>/dev/null
python3 - "$work/pieces.txt" <<'PY' || failures=$((failures + 1))
import sys
pieces = [line.split("\t")[1].strip().strip('"') for line in open(sys.argv[1]) if "\t" in line]
# The key ("hj", in pieces of this small vocabulary) is followed by the template as one piece.
i = pieces.index("?\\nAnswer:")
assert ":\u2581value" in pieces and pieces[i - 1] == "j", pieces
assert "nswer" not in "".join(p for p in pieces if p != pieces[i]), pieces
print("ok   synth --tokenizer-pieces: the question's key is the token before the answer")
PY
check_error synth-pieces-no-tokenizer "--tokenizer-pieces needs a tokenizer" "$retain" synth \
  --tokenizer-pieces "Answer:" --vocab-size 0 --out "$work/s2"
printf 'key-chars: 2\nvocab-sise: 300\n' > "$work/typo.yaml"
check_error config-unknown-key "typo.yaml line 2: unknown key 'vocab-sise' for this command; did you mean 'vocab-size'?" \
  "$retain" synth --config "$work/typo.yaml" --out "$work/s3"
printf 'force: maybe\n' > "$work/badflag.yaml"
check_error config-bad-switch "'force' is an on/off flag" "$retain" synth --config "$work/badflag.yaml" --out "$work/s3"
check_error config-missing "--config $work/none.yaml: no such file" "$retain" synth --config "$work/none.yaml" --out "$work/s3"
synmodel="$work/synmodel"
check init-model-tokenizer "$retain" init-model --arch llama --preset tiny --tokenizer "$syn/tokenizer.model" --out "$synmodel"
python3 - "$synmodel" "$syn" <<'PY' || failures=$((failures + 1))
import json, sys
cfg = json.load(open(f"{sys.argv[1]}/config.json"))
assert cfg["vocab_size"] <= 400 and cfg["bos_token_id"] == 1 and cfg["eos_token_id"] == 2, cfg
print(f"ok   init-model --tokenizer: vocab_size {cfg['vocab_size']} from the tokenizer")
PY
check prep-label-spans "$retain" prep --tokenizer "$synmodel" --format jsonl --label-spans answer_spans --input "$syn/train.jsonl" --out "$work/synshards"
grep -q '"label_spans":"answer_spans"' "$work/synshards/prep.json" || grep -q '"label_spans": "answer_spans"' "$work/synshards/prep.json" || { echo "FAIL prep.json lacks label_spans"; failures=$((failures + 1)); }
printf '{"text": "abc", "answer_spans": [[2, 9]]}\n' > "$work/badspans.jsonl"
check_error prep-bad-span "badspans.jsonl:1: field 'answer_spans': range [2, 9] is empty, out of the text (3 bytes)" \
  "$retain" prep --tokenizer "$synmodel" --format jsonl --label-spans answer_spans --input "$work/badspans.jsonl" --out "$work/bs"
[ ! -e "$work/bs" ] || { echo "FAIL prep left output after an error"; failures=$((failures + 1)); }
# eval ppl on documents, scored on their answers only: each document its own cache.
check eval-ppl-spans "$retain" eval ppl --model "$synmodel" --jsonl "$syn/train.jsonl" --score-spans answer_spans \
  --policy full,random --budget 0.5 --chunk 16 --out "$work/synppl"
python3 - "$work/synppl/scores.json" "$syn/train.jsonl" <<'PY' || failures=$((failures + 1))
import json, sys
rows = {r["policy"]: r["metrics"] for r in json.load(open(sys.argv[1]))["results"]}
docs = sum(1 for _ in open(sys.argv[2]))
answers = sum(len(json.loads(l)["answer_spans"]) for l in open(sys.argv[2]))
full, rnd = rows["full"], rows["random"]
# Each span is ": 42\n" (the answer with its colon and line end): 2 to 6 tokens of this small
# tokenizer (digits may be split, and a token straddling a span's start belongs to it).
assert 2 * answers <= full["tokens"] <= 6 * answers and full["tokens"] == rnd["tokens"], (full, answers)
assert full["docs"] == docs == rnd["docs"] and abs(rnd["eviction_rate"] - 0.5) < 0.05, rnd
print(f"ok   eval ppl --jsonl --score-spans: {full['tokens']} answer tokens of {docs} documents")
PY
check_error ppl-two-inputs "excludes" "$retain" eval ppl --model "$synmodel" --text "$work/text.txt" --jsonl "$syn/train.jsonl" --out "$work/pplx"
check_error ppl-spans-text "--score-spans needs --jsonl" "$retain" eval ppl --model "$synmodel" --text "$work/text.txt" --score-spans answer_spans --out "$work/pplx"
check_error ppl-no-input "give exactly one of --text and --jsonl" "$retain" eval ppl --model "$synmodel" --out "$work/pplx"
check_error ppl-missing-spans "badspans.jsonl:1: field 'answers' (--score-spans) is missing" \
  "$retain" eval ppl --model "$synmodel" --jsonl "$work/badspans.jsonl" --score-spans answers --out "$work/pplx"
check eval-synthetic-data "$retain" eval synthetic --model "$synmodel" --data "$syn/heldout.jsonl" --tasks needle,kv --policy full,streaming:buffer=0 --budget 0.5 --max-new-tokens 2 --out "$work/synev"
[ "$(wc -l < "$work/synev/predictions.jsonl")" -eq 12 ] || { echo "FAIL eval synthetic --data: $(wc -l < "$work/synev/predictions.jsonl") predictions"; failures=$((failures + 1)); }
# --question-mode keep (kvpress's semantics): recorded in config.yaml and scores.json; every
# prediction read at most the context's budget plus the question and the generated tokens.
check eval-synthetic-keep "$retain" eval synthetic --model "$synmodel" --data "$syn/heldout.jsonl" --tasks needle --policy snapkv:buffer=0 --budget 0.2 --max-new-tokens 2 --question-mode keep --out "$work/synkeep"
grep -q '"question_mode": *"keep"' "$work/synkeep/config.yaml" && grep -q '"question_mode": *"keep"' "$work/synkeep/scores.json" ||
  { echo "FAIL --question-mode keep is not in config.yaml and scores.json"; failures=$((failures + 1)); }
# Numeric flags: refused while the command line is parsed, saying what was expected and found,
# before anything is written.
check_error budget-negative "expected entries per KV head (an integer >= 1) or a fraction of the prompt in (0, 1), found '-5'" \
  "$retain" eval synthetic --model "$synmodel" --data "$syn/heldout.jsonl" --policy streaming --budget -5 --out "$work/numeric"
check_error budget-non-integer "found '1.5'" "$retain" eval synthetic --model "$synmodel" --data "$syn/heldout.jsonl" --budget 1.5 --out "$work/numeric"
check_error chunk-negative "--chunk: expected a number >= 0, found '-3'" \
  "$retain" eval synthetic --model "$synmodel" --data "$syn/heldout.jsonl" --chunk -3 --out "$work/numeric"
check_error max-new-tokens-zero "--max-new-tokens: expected a number > 0, found '0'" \
  "$retain" eval synthetic --model "$synmodel" --data "$syn/heldout.jsonl" --max-new-tokens 0 --out "$work/numeric"
check_error temperature-nan "--temperature: expected a number >= 0, found 'nan'" \
  "$retain" generate --model "$synmodel" --prompt hi --temperature nan
check_error bench-batch-zero "--batch: expected a number > 0, found '0'" \
  "$retain" bench decode --preset tiny --batch 0
check_error words-negative "--words: expected a number > 0, found '-10'" \
  "$retain" eval synthetic --model "$synmodel" --words -10 --out "$work/numeric"
check_error shard-tokens-zero "--shard-tokens: expected a number > 0, found '0'" \
  "$retain" prep --tokenizer "$synmodel" --input "$syn/heldout.jsonl" --shard-tokens 0 --out "$work/numeric"
[ ! -e "$work/numeric" ] || { echo "FAIL a refused command line left $work/numeric behind"; failures=$((failures + 1)); }
check_error eval-synthetic-bad-question-mode "--question-mode" \
  "$retain" eval synthetic --model "$synmodel" --data "$syn/heldout.jsonl" --question-mode drop --out "$work/synkeep2"
head -2 "$syn/heldout.jsonl" > "$work/broken.jsonl" && echo '{"id": "x", "task": "kv"}' >> "$work/broken.jsonl"
check_error eval-synthetic-bad-line "broken.jsonl:3: expected a string field 'context'" \
  "$retain" eval synthetic --model "$synmodel" --data "$work/broken.jsonl" --out "$work/synev2"
grep '"task":"needle"' "$syn/heldout.jsonl" > "$work/needles.jsonl"
check_error eval-synthetic-missing-task "has no example of task 'vars'" \
  "$retain" eval synthetic --model "$synmodel" --data "$work/needles.jsonl" --tasks vars --out "$work/synev2"
check_error policy-gates-wrong-policy "gates applies to trimkv and dbtrimkv" \
  "$retain" eval synthetic --model "$synmodel" --data "$syn/heldout.jsonl" --policy h2o:gates=g.safetensors --budget 4 --out "$work/synev3"
check_error policy-gates-missing-file "nope.safetensors" \
  "$retain" eval synthetic --model "$synmodel" --data "$syn/heldout.jsonl" --policy dbtrimkv:gates=nope.safetensors --gates-dir "$work" --budget 4 --out "$work/synev3"

# Vision-language models: init-model's tiny presets, generate/tokenize --image, bench vision, and
# the errors (a text-only model given --image, marker counts, unreadable images).
python3 - "$work/img.png" "$work/bad.jpg" <<'PY'
import struct, sys, zlib
w, h = 61, 37
rows = b"".join(b"\x00" + bytes(v for x in range(w) for v in (x * 4 % 256, y * 7 % 256, x * y % 256))
                for y in range(h))
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
       chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
open(sys.argv[1], "wb").write(png)
open(sys.argv[2], "wb").write(b"\xff\xd8\xff\xe0 not really a jpeg")
PY
# A clip (FFmpeg's test pattern, H.264, 9 frames at 4 fps) and the same as a directory of frames.
# The GPU machines carry no FFmpeg (scripts/gpu-run.sh's bundle): there the video checks skip.
videos=0
if command -v ffmpeg > /dev/null; then
  videos=1
  ffmpeg -loglevel error -y -f lavfi -i testsrc=size=64x48:rate=4 -frames:v 9 -c:v libx264 \
    -pix_fmt yuv420p "$work/clip.mp4"
  mkdir -p "$work/frames"
  ffmpeg -loglevel error -y -i "$work/clip.mp4" "$work/frames/f%03d.png"
else
  echo "skipped: the video checks (no ffmpeg on PATH)"
fi
for arch in qwen2_5_vl qwen3_vl; do
  vl="$work/tiny-$arch"
  check "init-model-$arch" "$retain" init-model --arch "$arch" --preset tiny --out "$vl"
  [ -f "$vl/preprocessor_config.json" ] || { echo "FAIL init-model $arch wrote no preprocessor_config.json"; failures=$((failures + 1)); }
  check "generate-image-$arch" "$retain" generate --model "$vl" --image "$work/img.png" --prompt "Look: <image> What is it?" \
    --chat-template "$work/qwen2.jinja" --max-new-tokens 4 --ignore-eos --policy snapkv --budget 8 --json
  grep -q '"finish_reason":"length"' "$work/out.txt" || { echo "FAIL generate --image $arch: $(cat "$work/out.txt")"; failures=$((failures + 1)); }
  check "tokenize-image-$arch" "$retain" tokenize --model "$vl" --text "<image>x" --image "$work/img.png" --ids
  # One image placeholder (id 7) per merged patch: the 61x37 image becomes 2x2 merged patches at least.
  [ "$(tr ',' '\n' < "$work/out.txt" | grep -cx 7)" -ge 4 ] || { echo "FAIL tokenize --image $arch: $(cat "$work/out.txt")"; failures=$((failures + 1)); }
  check_error "image-markers-$arch" "2 <image> marker(s) but 1 image(s)" \
    "$retain" generate --model "$vl" --image "$work/img.png" --prompt "<image> and <image>" --max-new-tokens 1
  check_error "image-unreadable-$arch" "bad.jpg: not a readable JPEG image" \
    "$retain" generate --model "$vl" --image "$work/bad.jpg" --prompt "hi" --max-new-tokens 1
  check "bench-vision-$arch" "$retain" bench vision --model "$vl" --size 64x48 --repeat 1 --dtype fp32
  # Videos: 9 frames at 4 fps sampled at 2 fps (4 frames, 2 temporal groups), with an image too.
  [ "$videos" = 1 ] || continue
  check "generate-video-$arch" "$retain" generate --model "$vl" --video "$work/clip.mp4" --fps 2 \
    --image "$work/img.png" --prompt "<image> then <video>: what moves?" --chat-template "$work/qwen2.jinja" \
    --max-new-tokens 4 --ignore-eos --policy snapkv --budget 8 --json
  grep -q '"finish_reason":"length"' "$work/out.txt" || { echo "FAIL generate --video $arch: $(cat "$work/out.txt")"; failures=$((failures + 1)); }
  check "tokenize-video-$arch" "$retain" tokenize --model "$vl" --text "<video>x" --video "$work/clip.mp4" --fps 2 --ids
  # Video placeholders (id 8): 2 temporal groups of at least 2x2 merged patches each.
  [ "$(tr ',' '\n' < "$work/out.txt" | grep -cx 8)" -ge 8 ] || { echo "FAIL tokenize --video $arch: $(cat "$work/out.txt")"; failures=$((failures + 1)); }
  check "tokenize-frames-$arch" "$retain" tokenize --model "$vl" --text "<video>x" --video "$work/frames" --ids
  check "bench-vision-video-$arch" "$retain" bench vision --model "$vl" --video "$work/clip.mp4" --fps 2 \
    --repeat 1 --dtype fp32 --json
  grep -q '"vision_frames_per_s"' "$work/out.txt" || { echo "FAIL bench vision --video $arch: $(cat "$work/out.txt")"; failures=$((failures + 1)); }
  check_error "video-markers-$arch" "2 <video> marker(s) but 1 video(s)" \
    "$retain" generate --model "$vl" --video "$work/clip.mp4" --prompt "<video> and <video>" --max-new-tokens 1
  check_error "video-missing-$arch" "nothing.mp4: cannot open the video file" \
    "$retain" generate --model "$vl" --video "$work/nothing.mp4" --prompt "hi" --max-new-tokens 1
  check_error "video-not-a-video-$arch" "bad.jpg: not a video FFmpeg can read" \
    "$retain" generate --model "$vl" --video "$work/bad.jpg" --prompt "hi" --max-new-tokens 1
  if [ "$arch" = qwen2_5_vl ]; then  # Qwen3-VL samples by default, clamped to --max-frames
    check_error "video-too-many-frames-$arch" "9 frames, more than --max-frames 3" \
      "$retain" tokenize --model "$vl" --text "<video>" --video "$work/clip.mp4" --max-frames 3
  fi
  check_error "video-frames-fps-$arch" "--fps samples a video file only" \
    "$retain" tokenize --model "$vl" --text "<video>" --video "$work/frames" --fps 2
done
[ "$videos" = 1 ] && check_error video-text-only-model "needs a vision-language model" \
  "$retain" generate --model "$model" --video "$work/clip.mp4" --prompt hi
check_error image-text-only-model "needs a vision-language model" \
  "$retain" generate --model "$model" --image "$work/img.png" --prompt hi
check_error vl-small-preset "has the tiny preset (not small)" \
  "$retain" init-model --arch qwen3_vl --preset small --out "$work/vlsmall"

echo "$failures failed"
# OpenMP waits passively when another process is running as retain starts (core/openmp_wait.h):
# beside a busy loop it does; a user's choice and a team of one are left alone.
if [ "$(nproc)" -gt 1 ]; then
  timeout 20 sh -c 'while :; do :; done' &
  busy=$!
  env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u OMP_NUM_THREADS "$retain" env | grep -q "OpenMP wait policy: PASSIVE" ||
    { echo "FAIL openmp-passive-when-shared: $("$retain" env | grep OpenMP)"; failures=$((failures + 1)); }
  kill $busy
fi
OMP_WAIT_POLICY=ACTIVE "$retain" env | grep -q "OpenMP wait policy: ACTIVE" ||
  { echo "FAIL openmp-user-choice"; failures=$((failures + 1)); }
env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_NUM_THREADS=1 "$retain" env | grep -q "libgomp's default" ||
  { echo "FAIL openmp-one-thread"; failures=$((failures + 1)); }

[ "$failures" -eq 0 ]
