#!/usr/bin/env bash
# Writes that fail: a checkpoint, an export, a predictions append and a shard write, each under a
# file-size limit (RLIMIT_FSIZE through `ulimit -f`: the write fails with EFBIG as on a full disk;
# retain ignores SIGXFSZ so it is an error, not a kill) and, where this machine lets the test
# mount one, on a full tmpfs (ENOSPC). Each must fail with an error naming the file, leave the
# last complete step / gate file / whole predictions lines / previous shards intact with no temp
# file, and resume once there is room. An output directory that cannot be written (a file in the
# way, a read-only mount) is refused before any work.
# Usage: full_disk_test.sh RETAIN WORKDIR SOURCE_DIR
set -uo pipefail
retain="$1"; work="$2"; src="$3"
source "$(cd "$(dirname "$0")" && pwd)/tiny_fixture.sh"
enter_work_dir "$work"
failures=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; failures=$((failures + 1)); }
# limited KIB COMMAND...: the command under a file-size limit of KIB KiB, its stderr in err.txt
# through a pipe (the limit would cut a log file written by the command itself).
limited() {
  local kib=$1; shift
  ( ulimit -f "$kib"; "$@" ) 2>&1 > /dev/null | cat > err.txt
  return "${PIPESTATUS[0]}"
}
no_temp_files() { ! find "$@" -name '*.tmp*' | grep -q .; }

make_tiny_fixture "$retain" python3 1 200
write_tiny_recipe 'model: {path: model}' 'data: {shards: shards, seq_len: 128}' \
  'train: {steps: 8}' 'checkpoint: {every: 4, keep_last_k: 0}'
"$retain" train recipe.yaml run.dir=run 2> train.log || fail "the first run: $(tail -3 train.log)"
largest=$(find run/step-8 -type f -printf '%s\n' | sort -n | tail -1)  # bytes of its largest file

# --- a checkpoint that does not fit: the run fails naming the file, step-8 stays whole
if limited $((largest / 2048 + 1)) "$retain" train recipe.yaml run.dir=run train.steps=12; then
  bad "checkpoint: the run succeeded under a limit of half its largest file ($largest bytes)"
elif ! grep -q "step-12" err.txt || ! grep -qi "file too large" err.txt; then
  bad "checkpoint: the error does not name the file and the cause: $(tail -2 err.txt)"
elif [ -e run/step-12 ] || ! no_temp_files run; then
  bad "checkpoint: a half-written step or temp file is left: $(ls -a run)"
else
  ok "checkpoint: $(grep -o 'error: .*' err.txt | cut -c1-150)"
fi
"$retain" export run --out gates8.safetensors 2> export.log && grep -q "step-8" export.log &&
  ok "checkpoint: step-8 is still the run's last complete step" ||
  bad "checkpoint: step-8 does not export: $(tail -2 export.log)"
"$retain" train recipe.yaml run.dir=run train.steps=12 2> resume.log &&
  grep -q "resumed from run/step-8" resume.log && [ -f run/step-12/manifest.json ] &&
  ok "checkpoint: resumed from step-8 once there is room" || bad "checkpoint resume: $(tail -3 resume.log)"

# --- an export that does not fit: the previous gate file is untouched
cp gates8.safetensors before.safetensors
if limited 1 "$retain" export run --out gates8.safetensors; then
  bad "export: succeeded under a 1 KiB limit"
elif ! grep -q "gates8.safetensors" err.txt; then
  bad "export: the error does not name the file: $(tail -2 err.txt)"
elif ! cmp -s gates8.safetensors before.safetensors || ! no_temp_files .; then
  bad "export: the previous gate file changed or a temp file is left"
else
  ok "export: $(grep -o 'error: .*' err.txt | cut -c1-150)"
fi

# --- a predictions append that does not fit: whole lines kept, the sweep resumes to the same end
"$retain" synth --config "$src/recipes/demo/data.yaml" --train-count 1 --heldout-questions 6 \
  --out data > /dev/null 2>&1 || fail "synth"
sweep() { "$retain" eval synthetic --model "$src/recipes/demo/base" --data data/heldout.jsonl \
  --policy full,streaming:buffer=0 --budget 0.2 --limit 6 --threads 1 --out "$@"; }
sweep straight > /dev/null 2>&1 || fail "the uninterrupted sweep"
lines=$(wc -l < straight/predictions.jsonl)
bytes=$(stat -c %s straight/predictions.jsonl)
if limited $((bytes / 2048)) sweep cut; then
  bad "predictions: the sweep succeeded under a limit of half its predictions"
elif ! grep -q "predictions.jsonl" err.txt; then
  bad "predictions: the error does not name the file: $(tail -2 err.txt)"
elif [ -n "$(tail -c1 cut/predictions.jsonl)" ] || ! python3 -c "
import json, sys
[json.loads(l) for l in open(sys.argv[1])]" cut/predictions.jsonl; then
  bad "predictions: the file does not end with a whole line"
else
  ok "predictions: $(wc -l < cut/predictions.jsonl) whole lines of $lines kept; $(grep -o 'error: .*' err.txt | cut -c1-120)"
fi
sweep cut > resume.txt 2>&1 && grep -q "resuming: " resume.txt &&
  [ "$(python3 -c "
import json, sys
key = lambda p: sorted((r['id'], r['policy'], str(r.get('budget')), r['pred']) for r in map(json.loads, open(p)))
print(key(sys.argv[1]) == key(sys.argv[2]))" straight/predictions.jsonl cut/predictions.jsonl)" = True ] &&
  ok "predictions: resumed to the uninterrupted sweep's predictions" ||
  bad "predictions resume: $(tail -3 resume.txt)"

# --- a shard write that does not fit: nothing is left (prep writes OUT.tmp, then renames it)
if limited 8 "$retain" prep --tokenizer model --input docs.jsonl --format jsonl --out shards2; then
  bad "prep: succeeded under an 8 KiB limit"
elif ! grep -q "shards2" err.txt || ! grep -qi "file too large" err.txt; then
  bad "prep: the error does not name the shard and the cause: $(tail -2 err.txt)"
elif [ -e shards2 ] || [ -e shards2.tmp ]; then
  bad "prep: shards2 or shards2.tmp is left"
else
  ok "prep: $(grep -o 'error: .*' err.txt | cut -c1-150)"
fi
"$retain" prep --tokenizer model --input docs.jsonl --format jsonl --out shards2 > /dev/null 2>&1 &&
  [ "$(cd shards && find . -type f -printf '%p %s\n' | sort)" = \
    "$(cd shards2 && find . -type f -printf '%p %s\n' | sort)" ] &&
  ok "prep: the same shard files once there is room" ||
  bad "prep: the rerun's shard files differ from the first prep's"

# --- an output directory that cannot be written, refused before any work
touch a-file
check_refused() {  # NAME COMMAND...: fails at once naming a-file, before loading a model
  local name=$1; shift
  if "$@" > out.txt 2> err.txt; then bad "$name: succeeded writing under a file"
  elif ! grep -q "a-file" err.txt; then bad "$name: the error does not name the place: $(tail -2 err.txt)"
  elif grep -q "loading " err.txt; then bad "$name: refused only after loading the model"
  else ok "$name: $(grep -o 'error: .*' err.txt | cut -c1-150)"; fi
}
check_refused "train into a file's place" "$retain" train recipe.yaml run.dir=a-file/run
check_refused "eval into a file's place" sweep a-file/out
check_refused "prep into a file's place" "$retain" prep --tokenizer model --input docs.jsonl --out a-file/shards
check_refused "export into a file's place" "$retain" export run --out a-file/gates.safetensors

# A real full disk and a read-only mount, where this machine lets the test mount (root, mount
# namespaces): a 16 KiB tmpfs for the sweep (its predictions need 21 KB), a read-only one for train.
mkdir -p small
if [ "$(id -u)" -eq 0 ] && unshare -m mount -t tmpfs -o size=16k tmpfs small 2> /dev/null; then
  if unshare -m bash -c "mount -t tmpfs -o size=16k tmpfs small && \
      $(declare -f sweep); retain='$retain'; src='$src'; sweep small/out" > /dev/null 2> err.txt; then
    bad "a full tmpfs: the sweep succeeded in 16 KiB"
  elif ! grep -q "predictions.jsonl: write failed (No space left on device)" err.txt; then
    bad "a full tmpfs: the error does not say the disk is full: $(tail -2 err.txt)"
  else
    ok "a full tmpfs: $(grep -o 'error: .*' err.txt | cut -c1-150)"
  fi
  if unshare -m bash -c "mount -t tmpfs -o size=1m,ro tmpfs small && \
      '$retain' train recipe.yaml run.dir=small/run" > /dev/null 2> err.txt; then
    bad "a read-only mount: train succeeded"
  elif ! grep -q "small/run" err.txt || grep -q "loading " err.txt; then
    bad "a read-only mount: not refused at once naming the place: $(tail -2 err.txt)"
  else
    ok "a read-only mount: $(grep -o 'error: .*' err.txt | cut -c1-150)"
  fi
else
  echo "skip a full tmpfs and a read-only mount (no mount namespace here)"
fi
[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "full disks and unwritable places are handled"
