#!/usr/bin/env bash
# A bounded soak of `retain serve` on loopback (docs/serving.md, "Soak"): CLIENTS concurrent
# clients for SECONDS with a mix of good (whole, streamed, sent slowly), malformed, unknown-route
# and cancelled requests (scripts/soak.py). Prints requests served, p50 / p99 latency of the good (fast-sent)
# ones and the server's RSS per BUCKET seconds, errors by kind; fails when a request got another
# answer than its kind's, a good one was lost or differs from `retain generate`, RSS grew by more
# than RSS_GROWTH MiB after the first bucket, or the server is not alive and idle at the end.
#
#   scripts/soak.sh [--retain build/retain] [--model recipes/demo/base] [--clients 8]
#                   [--seconds 600] [--bucket 60] [--rss-growth 64] [--out runs/soak]
# `make test` runs a short one (tests/CMakeLists.txt: serve_soak).
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)"
retain="$src/build/retain" model="$src/recipes/demo/base" clients=8 seconds=600 bucket=60
rss_growth=64 out="$src/runs/soak" python="${RETAIN_PYTHON:-$HOME/.cache/retain/venv/bin/python}"
while [ $# -gt 0 ]; do
  case "$1" in
    --retain) retain="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --clients) clients="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --bucket) bucket="$2"; shift 2 ;;
    --rss-growth) rss_growth="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "soak: unknown argument '$1' (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ -x "$retain" ] || { echo "soak: $retain is not an executable retain (make build)" >&2; exit 2; }
[ -f "$model/config.json" ] || { echo "soak: $model has no config.json" >&2; exit 2; }
rm -rf "$out" && mkdir -p "$out"
# One thread for the server: the clients share the cores.
common=(--model "$model" --threads 1)
max_tokens=8
prompts=("The value of x is" "Key: secret" "Once upon a time" "The answer:")
for i in "${!prompts[@]}"; do
  "$retain" generate "${common[@]}" --prompt "${prompts[$i]}" --max-new-tokens "$max_tokens" \
    --json 2> "$out/generate.log" | tail -1 > "$out/generate-$i.json" ||
    { echo "soak: generate failed: $(tail -3 "$out/generate.log")" >&2; exit 1; }
done
"$python" - "$out" "$max_tokens" "${prompts[@]}" <<'PY'
import json, sys
out, max_tokens, prompts = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
texts = {p: json.load(open(f"{out}/generate-{i}.json"))["text"] for i, p in enumerate(prompts)}
json.dump({"prompts": texts, "max_tokens": max_tokens}, open(f"{out}/expected.json", "w"))
PY
"$retain" serve "${common[@]}" --port 0 --port-file "$out/port" --max-batch 8 \
  > "$out/server.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 600); do [ -s "$out/port" ] && break; sleep 0.1; done
port=$(cat "$out/port" 2>/dev/null) ||
  { echo "soak: the server did not start: $(tail -5 "$out/server.log")" >&2; exit 1; }
rc=0
"$python" "$src/scripts/soak.py" "http://127.0.0.1:$port" "$pid" "$out/expected.json" "$clients" \
  "$seconds" "$bucket" "$rss_growth" || rc=1
kill -TERM "$pid"
wait "$pid" || { echo "FAIL the server exited $? after SIGTERM: $(tail -5 "$out/server.log")"; rc=1; }
trap - EXIT
exit "$rc"
