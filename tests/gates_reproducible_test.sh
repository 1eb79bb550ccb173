#!/usr/bin/env bash
# The demo's gate training gives the same gate file bit for bit whatever runs beside it and
# however many threads it has: the dbtrimkv and trimkv recipes (recipes/demo/, shortened and with
# a low bias so the gates move within the run), each trained on 2 threads as it comes and beside
# a busy core (which also makes retain's OpenMP team wait passively: core/openmp_wait.h);
# dbtrimkv also on 1 thread, and with the portable numerics' variables set before retain starts
# (so their setting inside retain is shown to reach MKL and ATen: on an AVX-512 machine the
# libraries' own choice trains another file). The exported files are compared with cmp. `retain
# train` runs portable CPU numerics (core/cpu_isa.h: MKL, ATen and oneDNN at AVX2, MKL strict),
# so a user's `make demo` on any AVX2 machine trains the same weights and prints the README's
# table.
# Usage: gates_reproducible_test.sh SOURCE_DIR RETAIN WORKDIR
set -euo pipefail
src="$1"; retain="$2"; work="$3"
rm -rf "$work" && mkdir -p "$work"
cd "$src"
"$retain" synth --config recipes/demo/data.yaml --train-count 24 --train-words 40:200 \
  --heldout-questions 4 --out "$work/data" > "$work/synth.log" 2>&1
"$retain" prep --config recipes/demo/prep.yaml --tokenizer recipes/demo/base \
  --input "$work/data/train.jsonl" --out "$work/shards" > "$work/prep.log" 2>&1
failures=0
for gates in dbtrimkv trimkv; do
  train() {  # train NAME [VAR=VALUE...]: a run and its export
    local name="$1"
    shift
    env OMP_NUM_THREADS=2 "$@" "$retain" train "recipes/demo/$gates.yaml" \
      run.dir="$work/$gates-$name" \
      model.path=recipes/demo/base data.shards="$work/shards" data.seq_len=512 train.steps=24 \
      checkpoint.every=24 gates.bias_init=3 optim.warmup_steps=2 > "$work/$gates-$name.log" 2>&1
    "$retain" export "$work/$gates-$name" --out "$work/$gates-$name.safetensors" > /dev/null 2>&1
  }
  same() {  # same NAME WHAT: the run NAME's file is the plain run's
    if cmp -s "$work/$gates-plain.safetensors" "$work/$gates-$1.safetensors"; then
      echo "ok   $gates: the same gate file $2" \
        "($(sha256sum < "$work/$gates-plain.safetensors" | cut -c1-16))"
    else
      echo "FAIL $gates: the gate file $2 differs"; failures=$((failures + 1))
    fi
  }
  train plain
  ( while :; do :; done ) &
  busy=$!
  train beside-a-busy-core
  kill "$busy"; wait "$busy" 2>/dev/null || true
  # The gates moved (a run that leaves them at their start would match trivially).
  grep -aq "beta=0\." "$work/$gates-plain.log" ||
    { echo "FAIL $gates: the gates did not move: $(grep -a '24/24' "$work/$gates-plain.log")"; exit 1; }
  grep -aq "CPU numerics portable (MKL_CBWR=AVX2,STRICT ATEN_CPU_CAPABILITY=avx2" \
    "$work/$gates-plain.log" ||
    { echo "FAIL $gates: the run did not say it used portable numerics"; exit 1; }
  same beside-a-busy-core "beside a busy core"
  if [ "$gates" = dbtrimkv ]; then
    train one-thread OMP_NUM_THREADS=1
    same one-thread "on 1 thread"
    # On a non-Intel CPU portable numerics also run MKL on one thread (core/cpu_isa.h).
    mkl_threads=()
    grep -q GenuineIntel /proc/cpuinfo || mkl_threads=(MKL_NUM_THREADS=1)
    train variables-set-before-start RETAIN_CPU_NUMERICS=native MKL_CBWR=AVX2,STRICT \
      ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 "${mkl_threads[@]}"
    same variables-set-before-start "with the variables set before retain starts"
  fi
done
[ "$failures" -eq 0 ] || exit 1
echo "gate training is reproducible"
