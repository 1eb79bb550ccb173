#!/usr/bin/env bash
# `retain serve` under abuse (tests/serve_limits.py: stalled and trickling uploads beside normal
# requests, 1,000 dropped connections, one address's connection bound, an oversized body, streams
# and whole replies whose clients left, a full queue), then a clean
# SIGTERM; and the limits' flags refused when out of range.
# Usage: serve_limits_test.sh RETAIN WORKDIR PYTHON SOURCE_DIR
set -uo pipefail
retain="$1"; work="$2"; python="$3"; src="$4"
rm -rf "$work" && mkdir -p "$work"
source "$(cd "$(dirname "$0")" && pwd)/cli_checks.sh"
common=(--model "$src/recipes/demo/base" --threads 1 --chunk 16)
timeout=2 max_client=40 max_body=100000

"$retain" serve "${common[@]}" --port 0 --port-file "$work/port" --http-timeout "$timeout" \
  --max-client-connections "$max_client" --max-body "$max_body" --max-batch 1 --max-queue 1 \
  > "$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 600); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port" 2>/dev/null)
[ -n "$port" ] || { echo "FAIL the server did not start:"; cat "$work/server.log"; exit 1; }
if "$python" "$src/tests/serve_limits.py" "http://127.0.0.1:$port" "$pid" "$timeout" "$max_client" \
  "$max_body"; then
  echo "ok   serve_limits.py"
else
  echo "FAIL serve_limits.py"; tail -20 "$work/server.log"; failures=$((failures + 1))
fi
kill -TERM "$pid"; wait "$pid"; rc=$?
[ "$rc" -eq 0 ] && echo "ok   SIGTERM after the abuse: exit 0" ||
  { echo "FAIL the server exited $rc"; tail -5 "$work/server.log"; failures=$((failures + 1)); }

# A flag that is not refused would start a server: `timeout` ends it and the check fails.
check_error "--http-timeout 0" "--http-timeout" timeout 60 "$retain" serve "${common[@]}" --port 0 --http-timeout 0
check_error "--max-body 0" "--max-body" timeout 60 "$retain" serve "${common[@]}" --port 0 --max-body 0
check_error "--max-body 12 parsecs" "--max-body" timeout 60 "$retain" serve "${common[@]}" --port 0 --max-body 12parsecs
check_error "--max-connections 0" "--max-connections" timeout 60 "$retain" serve "${common[@]}" --port 0 --max-connections 0
check_error "--max-queue -1" "--max-queue" timeout 60 "$retain" serve "${common[@]}" --port 0 --max-queue -1
[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "serve limits hold"
