#!/usr/bin/env bash
# Runs every fuzzer (or those named) for SECONDS each (default 600) or FUZZ_RUNS executions
# (default: no limit), whichever comes first, on its seeds plus the build tree's growing corpus,
# and prints a table: target, executions, executions/s, corpus size, crashes. A crash leaves its
# input in build/fuzz_artifacts/ (copy it to fuzz/regressions/NAME/ once fixed, so every
# `make test` replays it). Usage: scripts/fuzz.sh [SECONDS] [BUILD_DIR] [TARGET,TARGET...]
# (make fuzz FUZZ_SECONDS=N).
set -uo pipefail
seconds=${1:-600} build=${2:-build} only=${3:-}
src=$(cd "$(dirname "$0")/.." && pwd)
[[ -f $build/fuzz_targets.txt ]] || { echo "fuzz: $build/fuzz_targets.txt is missing (make build)" >&2; exit 1; }
IFS=';' read -r -a targets <"$build/fuzz_targets.txt"
[[ -n $only ]] && IFS=',' read -r -a targets <<<"$only"
status=0
printf '%-20s %12s %10s %8s %8s\n' target executions exec/s corpus crashes
for name in "${targets[@]}"; do
  bin=$build/fuzz_bin/${name}_fuzz
  corpus=$build/fuzz_corpus/$name
  mkdir -p "$corpus" "$build/fuzz_artifacts"
  before=$(ls "$build/fuzz_artifacts" | grep -c "^$name-" || true)
  args=(-max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$build/fuzz_artifacts/$name-")
  [[ -n ${FUZZ_RUNS:-} ]] && args+=(-runs="$FUZZ_RUNS")
  [[ -f $src/fuzz/dicts/$name.dict ]] && args+=(-dict="$src/fuzz/dicts/$name.dict")
  log=$build/fuzz_artifacts/$name.log
  "$bin" "${args[@]}" "$corpus" "$src/fuzz/corpus/$name" >"$log" 2>&1
  rc=$?
  execs=$(awk '/stat::number_of_executed_units:/ {print $2}' "$log" | tail -1)
  rate=$(awk '/stat::average_exec_per_sec:/ {print $2}' "$log" | tail -1)
  after=$(ls "$build/fuzz_artifacts" | grep -c "^$name-" || true)
  printf '%-20s %12s %10s %8s %8s\n' "$name" "${execs:-?}" "${rate:-?}" "$(ls "$corpus" | wc -l)" \
    "$((after - before))"
  if [[ $rc -ne 0 ]]; then
    status=1
    grep -m3 -E 'ERROR|SUMMARY|terminate|what\(\)' "$log" | sed 's/^/    /'
  fi
done
exit $status
