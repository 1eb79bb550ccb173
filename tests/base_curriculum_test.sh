#!/usr/bin/env bash
# scripts/base_curriculum.py, the trainer of `make demo-base`, on a two-stage recipe of a few
# steps: its outputs, a re-run that skips finished stages and retrains a changed one, retain loading
# the result, and clear errors on a bad recipe before anything trains.
# Usage: base_curriculum_test.sh SOURCE_DIR RETAIN PYTHON WORKDIR
set -euo pipefail
src="$1"; retain="$2"; python="$3"; work="$4"
rm -rf "$work" && mkdir -p "$work" && cd "$work"
script="$src/scripts/base_curriculum.py"

# The base's tokenizer recipe on a smaller corpus (every key and value still one piece).
"$retain" synth --config "$src/recipes/demo/base-data.yaml" --train-count 3000 \
  --heldout-questions 2 --heldout-words 60 --out run/data > synth.log 2>&1 ||
  { cat synth.log; exit 1; }
# Every task's documents for the second stage's mix and per-task scores (base-mix.yaml, smaller).
for part in "mix 2" "mix-eval 3"; do
  set -- $part
  "$retain" synth --config "$src/recipes/demo/base-mix.yaml" --seed "$2" --train-count 8 \
    --train-words 20:40 --out "run/$1" > synth.log 2>&1 || { cat synth.log; exit 1; }
done
cat > recipe.yaml <<'EOF'
seed: 0
model: {layers: 2, hidden: 32, heads: 2, kv-heads: 1, head-dim: 16}
stages:
  - {name: pairs, format: pairs, periodic: 0.5, seq: 48, batch: 4, steps: 6, eval-every: 3}
  - {name: filler, format: template, no-bos: true, facts: "2:3", questions: 2, filler: 2, filler-from: data/train.jsonl, mix: 0.5, data: mix/train.jsonl, eval-data: mix-eval/train.jsonl, lm-weight: 0.5, seq: 160, batch: 4, steps: 4, eval-every: 2}
  - {name: vars, format: vars, no-bos: true, add-pieces: ["▁VAR", "▁=▁VAR", "▁="], insert-layers: 1, copy-layers: true, facts: "2:3", var-hops: "0:2", questions: 3, eval-data: mix-eval/train.jsonl, seq: 160, batch: 4, steps: 2, eval-every: 2}
EOF
run=("$python" "$script" --recipe recipe.yaml --tokenizer run/data/tokenizer.model --out run
  --threads 1)
"${run[@]}" > first.log 2>&1 || { cat first.log; exit 1; }
for f in model/config.json model/model.safetensors model/tokenizer.model model/base.json \
  model/tokenizer_config.json \
  stages/01-pairs/stage.json stages/02-filler/stage.json stages/03-vars/stage.json \
  stages/03-vars/tokenizer.model; do
  [ -s "run/$f" ] || { echo "FAIL missing run/$f"; cat first.log; exit 1; }
done
"$python" - run <<'PY'
import hashlib, json, sys
run = sys.argv[1]
base = json.load(open(f"{run}/model/base.json"))
digest = hashlib.sha256(open(f"{run}/model/model.safetensors", "rb").read()).hexdigest()
assert base["sha256"] == digest, (base["sha256"], digest)
tokenizer = hashlib.sha256(open(f"{run}/model/tokenizer.model", "rb").read()).hexdigest()
assert base["tokenizer-sha256"] == tokenizer, (base["tokenizer-sha256"], tokenizer)
assert [s["name"] for s in base["stages"]] == ["pairs", "filler", "vars"], base["stages"]
steps = [[h["step"] for h in s["history"]] for s in base["stages"]]
assert steps == [[0, 3, 6], [0, 2, 4], [0, 2]], steps
for s in base["stages"]:
    for h in s["history"]:
        assert 0.0 <= h["all"] <= 1.0, h
# The mixed stage is scored per task on --eval-data besides its own layout.
assert set(base["stages"][1]["history"][-1]) == {"step", "all", "kv", "vars", "needle", "multi"}, \
    base["stages"][1]["history"][-1]
# The last stage ran without BOS, so the base is prompted without one.
assert json.load(open(f"{run}/model/tokenizer_config.json"))["add_bos_token"] is False
config_sum = hashlib.sha256(open(f"{run}/model/tokenizer_config.json", "rb").read()).hexdigest()
assert base["tokenizer-config-sha256"] == config_sum, (base["tokenizer-config-sha256"], config_sum)
config = json.load(open(f"{run}/model/config.json"))
assert config["num_hidden_layers"] == 3 and config["hidden_size"] == 32, config
# The vars stage grew the tokenizer by its three pieces (the final model carries that one) and the
# model by a layer; the stages before it read the corpus's tokenizer.
import sentencepiece as spm
grown = spm.SentencePieceProcessor(model_file=f"{run}/model/tokenizer.model")
plain = spm.SentencePieceProcessor(model_file=f"{run}/data/tokenizer.model")
assert grown.get_piece_size() == plain.get_piece_size() + 3 == config["vocab_size"], config
assert [grown.id_to_piece(plain.get_piece_size() + i) for i in range(3)] == ["▁VAR", "▁=▁VAR", "▁="]
assert open(f"{run}/model/tokenizer.model", "rb").read() == \
    open(f"{run}/stages/03-vars/tokenizer.model", "rb").read()
print("ok   three stages trained (the second mixed and without BOS, the third grew the tokenizer "
      "and a layer); base.json holds their scores and the weights' and tokenizer's sha256")
PY
sha_first=$(sha256sum run/model/model.safetensors | cut -d' ' -f1)
"${run[@]}" > again.log 2>&1 || { cat again.log; exit 1; }
[ "$(grep -c 'done, skipped' again.log)" = 3 ] || { echo "FAIL re-run trained again"; cat again.log; exit 1; }
[ "$(sha256sum run/model/model.safetensors | cut -d' ' -f1)" = "$sha_first" ] ||
  { echo "FAIL the re-run's model differs"; exit 1; }
echo "ok   a re-run skips every finished stage and writes the same model"

# retain reads the result as any HF Llama checkpoint.
"$retain" eval synthetic --model run/model --data run/data/heldout.jsonl --policy full \
  --max-new-tokens 4 --out eval > eval.log 2>&1 || { cat eval.log; exit 1; }
[ -s eval/scores.json ] || { echo "FAIL retain wrote no scores"; exit 1; }
echo "ok   retain evaluates the trained base"
# The grown tokenizer's pieces (user-defined, one holding "▁" inside) as retain reads them.
printf 'VAR tg = 15. VAR kp = VAR tg. A=VAR b  =  VAR\n\nQuestion: What is the value of VAR kp?\nAnswer: 15' \
  > vars.txt
"$python" - run/model/tokenizer.model vars.txt > vars_ids.txt <<'PY'
import sentencepiece as spm, sys
sp = spm.SentencePieceProcessor(model_file=sys.argv[1])
ids = sp.encode(open(sys.argv[2]).read())
assert {sp.piece_to_id(p) for p in ("▁VAR", "▁=▁VAR", "▁=")} <= set(ids), ids  # all three used
print(",".join(map(str, ids)))
PY
"$retain" tokenize --model run/model --file vars.txt --no-chat | grep -o '^[0-9]*' | paste -sd, \
  > retain_vars_ids.txt
[ "$(cat retain_vars_ids.txt)" = "$(cat vars_ids.txt)" ] ||
  { echo "FAIL retain's ids for the grown pieces differ:"; cat vars_ids.txt retain_vars_ids.txt; exit 1; }
echo "ok   retain tokenizes the grown tokenizer's pieces as sentencepiece does"

# A changed stage is trained again, with every stage after it; the ones before are kept.
sed 's/steps: 4, eval-every: 2}/steps: 2, eval-every: 2}/' recipe.yaml > changed.yaml
"$python" "$script" --recipe changed.yaml --tokenizer run/data/tokenizer.model --out run \
  --threads 1 > changed.log 2>&1 || { cat changed.log; exit 1; }
grep -q "stage 1 (pairs): done, skipped" changed.log && grep -q "stage 2 (filler): its settings" \
  changed.log || { echo "FAIL a changed stage was not retrained alone"; cat changed.log; exit 1; }
"$python" - run <<'PY'
import json, sys
steps = [h["step"] for h in json.load(open(f"{sys.argv[1]}/model/base.json"))["stages"][1]["history"]]
assert steps == [0, 2], steps
PY
echo "ok   a changed stage is trained again; the stage before it is kept"

# Bad input names its stage and key, before anything trains; nothing of the run is written.
expect_error() {  # expect_error PATTERN RECIPE_FILE
  if "$python" "$script" --recipe "$2" --tokenizer run/data/tokenizer.model --out bad \
    > bad.log 2>&1; then echo "FAIL $2 ran"; exit 1; fi
  grep -q "$1" bad.log || { echo "FAIL unclear error for $2:"; cat bad.log; exit 1; }
  [ ! -e bad ] || { echo "FAIL $2 left bad/ behind"; exit 1; }
  echo "ok   $(tail -1 bad.log | sed 's/^base_curriculum.py: error: //')"
}
sed 's/eval-every: 2}/eval-every: 2, lr-schedule: cosine}/' recipe.yaml > bad1.yaml
expect_error "stage 2 (filler): unknown key 'lr-schedule'" bad1.yaml
sed 's/facts: "2:3"/facts: 2:3/' recipe.yaml > bad2.yaml  # YAML reads 2:3 as 123
expect_error "stage 2 (filler): facts must be a quoted" bad2.yaml
sed 's/steps: 4,/steps: 4, hidden: 64,/' recipe.yaml > bad3.yaml
expect_error "'hidden' belongs in the recipe's \`model\` map" bad3.yaml
sed 's/no-bos: true/no-bos: 1/' recipe.yaml > bad4.yaml
expect_error "'no-bos' is true or false, found 1" bad4.yaml
sed 's/mix: 0.5, data: mix\/train.jsonl, //' recipe.yaml > bad5.yaml
sed -i 's/eval-every: 2}/eval-every: 2, mix: 0.5}/' bad5.yaml
expect_error "stage 2 (filler): --mix F (0 to 1) and --data go together" bad5.yaml
# A tokenizer without the template's pieces (no --tokenizer-pieces) cannot run the offsets layout.
"$retain" synth --train-tasks multi,needle --train-count 3000 --train-words 10:60 \
  --key-chars 2 --key-alphabet bcdfghjklmnpqrst --value-digits 2 --vocab-size 1024 \
  --heldout-count 0 --out plain > plain.log 2>&1 || { cat plain.log; exit 1; }
if "$python" "$script" --tokenizer plain/tokenizer.model --format offsets --steps 1 \
  > piece.log 2>&1; then echo "FAIL offsets ran without its pieces"; exit 1; fi
grep -qF "has no piece '?\\nAnswer:'" piece.log || { echo "FAIL unclear error:"; cat piece.log; exit 1; }
echo "ok   a tokenizer without the template's pieces: $(tail -1 piece.log | cut -c1-90)..."
# More vars than keys is refused before anything trains.
if "$python" "$script" --tokenizer run/data/tokenizer.model --format vars --facts 200 --chains 50 \
  --var-hops 2 --steps 1 > many.log 2>&1; then echo "FAIL 300 variables ran"; exit 1; fi
grep -q "make up to 300 variables, more than the 256 keys" many.log ||
  { echo "FAIL unclear error:"; cat many.log; exit 1; }
echo "ok   $(tail -1 many.log | sed 's/^base_curriculum.py: error: //')"

# The pieces the curriculum relies on: its template documents are the token ids retain reads for
# the same text (BOS first, encoded whole), --no-bos drops only the BOS, a grown model computes
# what it did before growing, and the learning rate warms up, holds and cools down to a tenth.
"$python" - "$src/scripts" run/data/tokenizer.model data/train.jsonl > pieces.py.log 2>&1 <<'PY' ||
import random, re, sys
sys.path.insert(0, sys.argv[1])
import base_curriculum as bc
import sentencepiece as spm
import torch
p = bc.stage_parser()
args = p.parse_args(["--tokenizer", sys.argv[2], "--format", "template", "--facts", "3",
                     "--questions", "2", "--filler", "2", "--filler-from", "run/" + sys.argv[3],
                     "--seq", "256"])
sp = spm.SentencePieceProcessor(model_file=args.tokenizer)
ids, mask, _ = bc.Documents(args, sp).make(random.Random(5), 0.0, 0.0)
open("template_ids.txt", "w").write(",".join(map(str, ids)))
text = sp.decode(ids[1:])
open("template.txt", "w").write(text)
# The harness's layout (data/synthetic.cpp): context, a blank line, then "Question: ...\nAnswer: v"
# turns with no space before a newline (encoding questions apart once put a "▁" there).
assert ids[0] == sp.bos_id() and "\n\nQuestion: What is the value of key " in text, text
assert " \n" not in text and text.count("\nQuestion: ") == 2, text
# Each answer is labelled, scored at its first token (ANSWER), and trained to end: the first
# answer's next token ("\nQuestion:") holds a newline (ANSWER_END); the last ends the document.
answers = [i for i, m in enumerate(mask) if m == bc.ANSWER]
ends = [i for i, m in enumerate(mask) if m == bc.ANSWER_END]
assert len(answers) == 2 and all(ids[i - 1] == sp.piece_to_id("?\nAnswer:") for i in answers), mask
assert ends == [answers[0] + 1] and sp.id_to_piece(ids[ends[0]]) == "\nQuestion:", (ends, answers)
assert set(mask) == {0, bc.ANSWER, bc.ANSWER_END}
# Rows: every token after the first is labelled (TEXT where it is not an answer, for --lm-weight),
# padding is not.
_, row_labels = bc.Documents(args, sp).rows([(ids, mask)])
row = row_labels[0].tolist()
assert row[0] == 0 and row[len(ids):] == [0] * (256 - len(ids)), row
assert all(r == (m or bc.TEXT) for r, m in zip(row[1:len(ids)], mask[1:])), (row, mask)
args.no_bos = True
plain, plain_mask, _ = bc.Documents(args, sp).make(random.Random(5), 0.0, 0.0)
assert plain == ids[1:] and plain_mask == mask[1:], "--no-bos changed more than the BOS"
open("plain_ids.txt", "w").write(",".join(map(str, plain)))
# --end-answers: the same document and labels, then a newline piece after the last answer, which
# is trained (ANSWER_END): a one-question document otherwise never shows an answer's end.
args.end_answers = True
ended, ended_mask, _ = bc.Documents(args, sp).make(random.Random(5), 0.0, 0.0)
assert ended[:-1] == plain and ended_mask[:-1] == plain_mask, "--end-answers changed the document"
assert sp.id_to_piece(ended[-1]) == "\n" and ended_mask[-1] == bc.ANSWER_END, ended_mask[-3:]
args.end_answers = False
# --distinct-questions: each question another fact, as many as there are facts at most.
args.distinct_questions, args.questions, args.facts = True, 5, "3"
for seed in range(20):
    doc, labels, _ = bc.Documents(args, sp).make(random.Random(seed), 0.0, 0.0)
    asked = [doc[i - 2] for i, m in enumerate(labels) if m == bc.ANSWER]  # "hj ?\nAnswer: 79"
    assert len(asked) == 3 and len(set(asked)) == 3, [sp.id_to_piece(k) for k in asked]
# --shared-values: facts repeat earlier facts' values under their own keys, and every answer is
# still its key's value. At 1 every fact has the first one's value.
args.questions, args.facts = 3, "4"
repeated = 0
for share, seed in [(1.0, s) for s in range(5)] + [(0.5, s) for s in range(40)]:
    args.shared_values = share
    doc, labels, chance = bc.Documents(args, sp).make(random.Random(seed), 0.0, 0.0)
    text = sp.decode(doc)
    facts = dict(re.findall(r"Key (\w+): value (\d+)\.", text))
    assert len(facts) == 4, text  # four facts, each its own key
    if share == 1.0:
        assert len(set(facts.values())) == 1 and chance == 1.0, text
    repeated += len(set(facts.values())) < 4
    for key, value in re.findall(r"key (\w+)\?\nAnswer: (\d+)", text):
        assert facts[key] == value, (key, value, text)
assert 10 < repeated - 5 < 40, repeated  # at 0.5 most documents, not all, repeat a value
args.shared_values = 0.0
# --format vars: the harness's wording; every asked variable is answered by the value its chain
# resolves to, each chain statement after the one it refers to; --chains 1 --facts 4 is the
# harness's layout (a root, its chain, three other direct assignments).
vargs = p.parse_args(["--tokenizer", sys.argv[2], "--format", "vars", "--facts", "4",
                      "--var-hops", "0:2", "--chains", "1", "--questions", "9", "--seq", "512"])
for chains, seed in [(1, s) for s in range(20)] + [(3, s) for s in range(20)]:
    vargs.chains = chains
    doc, labels, _ = bc.Documents(vargs, sp).make(random.Random(seed), 0.0, 0.0)
    text = sp.decode(doc)
    context = text.split("\n\nQuestion: ")[0]
    value, seen = {}, []
    for name, rhs in re.findall(r"VAR (\w+) = (VAR \w+|\d+)\.", context):
        value[name] = value[rhs[4:]] if rhs.startswith("VAR ") else rhs  # KeyError: out of order
        seen.append(name)
    assert len(seen) == len(set(seen)) and context.count("VAR") == len(seen) + context.count("= VAR")
    assert sum(v.isdigit() for v in re.findall(r"= (\w+)\.", context)) == 4, context
    if chains == 1:
        # One chain: every reference resolves to the same root, at most two hops from it.
        refs = re.findall(r"VAR (\w+) = VAR \w+\.", context)
        assert len(refs) <= 2 and len({value[n] for n in refs}) <= 1, context
    asked = re.findall(r"VAR (\w+)\?\nAnswer: (\d+)", text)
    assert len(asked) == min(9, len(seen)) and all(value[n] == v for n, v in asked), text
    assert labels.count(bc.ANSWER) == len(asked), labels
small = p.parse_args(["--tokenizer", sys.argv[2], "--hidden", "32", "--heads", "2", "--kv-heads",
                      "1", "--head-dim", "16"])
model = bc.new_model(small, sp.get_piece_size()).eval()
x = torch.tensor([ids[:40]])
before = model(x).logits
bc.grow(model, 2, 0)
assert model.config.num_hidden_layers == 4 and len(model.model.layers) == 4
assert torch.equal(model(x).logits, before), "growing changed the model's output"
# Widening: 2 query heads sharing 1 key/value head become 4, each with its own; same output.
wide = bc.widen(model, 4, 0).eval()
assert wide.config.num_attention_heads == 4 and wide.config.num_key_value_heads == 4
assert wide.model.layers[0].self_attn.k_proj.weight.shape == (64, 32)
assert torch.allclose(wide(x).logits, before, atol=1e-6), "widening changed the model's output"
# --copy-layers: the inserted layer starts as the second layer's copy. --add-pieces: old text
# keeps its ids, old pieces their embeddings (the logits over the old vocabulary are unchanged),
# a new piece's embedding is the mean of those that spelled it.
copied = bc.new_model(small, sp.get_piece_size()).eval()
bc.grow(copied, 1, 0, copies=True)
assert all(torch.equal(a, b) for a, b in zip(copied.model.layers[1].parameters(),
                                             copied.model.layers[2].parameters()))
bc.add_pieces(sys.argv[2], ["▁VAR"], "grown.model")
grown = spm.SentencePieceProcessor(model_file="grown.model")
template = open("template.txt").read()  # no "VAR" in it
assert grown.encode(template) == sp.encode(template)
assert grown.encode("VAR a")[0] == sp.get_piece_size() and grown.decode(grown.encode("VAR a")) == "VAR a"
before = copied(x).logits
bc.grow_vocabulary(copied, sp, grown)
after = copied(x).logits
assert after.shape[-1] == before.shape[-1] + 1 and torch.allclose(after[..., :-1], before)
table = copied.get_input_embeddings().weight
assert torch.allclose(table[-1], table[sp.encode(" VAR")].mean(0))
try:
    bc.add_pieces("grown.model", ["▁VAR"], "twice.model")
    raise AssertionError("a piece added twice")
except SystemExit as e:
    assert "already has the piece '▁VAR'" in str(e), e
small.steps, small.lr, small.cooldown = 1000, 1.0, 0.2
lrs = [bc.learning_rate(small, s) for s in range(1000)]
assert lrs[0] == 1 / 50 and lrs[49] == 1.0 and lrs[799] == 1.0 and abs(lrs[999] - (1 - 0.9 * 199 / 200)) < 1e-9, lrs[::100]
print("ok")
PY
  { echo "FAIL"; cat pieces.py.log; exit 1; }
# retain's own ids for the document's text, as eval and prep read it: BOS + text for a tokenizer
# alone, the text alone beside the tokenizer_config.json the no-BOS base carries.
mkdir -p withbos && cp run/model/tokenizer.model run/model/config.json withbos/
for case in "withbos template_ids.txt" "run/model plain_ids.txt"; do
  set -- $case
  "$retain" tokenize --model "$1" --file template.txt --no-chat | grep -o '^[0-9]*' |
    paste -sd, > retain_ids.txt
  [ "$(cat retain_ids.txt)" = "$(cat "$2")" ] ||
    { echo "FAIL $2 differ from retain's ids ($1):"; cat "$2" retain_ids.txt; exit 1; }
done
echo "ok   template documents are retain's token ids (with BOS, and without beside add_bos_token" \
  "false); answer labels, --end-answers, distinct questions, shared values, vars chains, --no-bos," \
  "grow (no-op or copied layers), added pieces, widen and the lr schedule hold"
