#!/usr/bin/env bash
# `retain serve` end to end: the official `openai` client against the server on loopback
# (tests/serve_client.py: answers equal `retain generate`, streaming, stop sequences, cancellation,
# errors, a bounded load test), then a graceful shutdown that lets an in-flight stream finish, API
# keys over HTTPS, and bad flags refused at start.
# Usage: serve_test.sh RETAIN WORKDIR PYTHON SOURCE_DIR
set -uo pipefail
retain="$1"
work="$2"
python="$3"
src="$4"
rm -rf "$work" && mkdir -p "$work"
source "$(cd "$(dirname "$0")" && pwd)/cli_checks.sh"
model="$src/recipes/demo/base"
prompt="The value of x is"
# One thread each: the server and the client share the machine's cores with other tests.
common=(--model "$model" --threads 1 --chunk 16)

# What `retain generate` gives, to compare the server's answers with.
"$retain" generate "${common[@]}" --prompt "$prompt" --max-new-tokens 12 --json > "$work/completion.json" 2>/dev/null &&
  "$retain" generate "${common[@]}" --prompt "$prompt" --max-new-tokens 12 --policy snapkv:buffer=0 --budget 3 \
    --json > "$work/policy.json" 2>/dev/null &&
  "$retain" generate "${common[@]}" --prompt "$prompt" --chat-template chatml --max-new-tokens 10 --json \
    > "$work/chat.json" 2>/dev/null || { echo "FAIL generate for the expected answers"; exit 1; }
"$python" - "$work" "$prompt" <<'PY'
import json, sys
work, prompt = sys.argv[1], sys.argv[2]
out = {"prompt": prompt}
for name in ("completion", "policy", "chat"):
    out[name] = json.loads(open(f"{work}/{name}.json").read().strip().splitlines()[-1])
json.dump(out, open(f"{work}/expected.json", "w"))
PY

kv_memory=409600  # two of the load test's largest requests at once, not three
start_server() {  # start_server LOG: sets server_pid and port
  rm -f "$work/port"
  "$retain" serve "${common[@]}" --port 0 --port-file "$work/port" --chat-template chatml \
    --kv-memory "$kv_memory" --max-batch 4 --shutdown-grace 20 > "$1" 2>&1 &
  server_pid=$!
  for _ in $(seq 600); do [ -s "$work/port" ] && break; sleep 0.1; done
  port=$(cat "$work/port" 2>/dev/null)
  [ -n "$port" ] || { echo "FAIL the server did not start:"; cat "$1"; kill "$server_pid" 2>/dev/null; exit 1; }
}

start_server "$work/server.log"
if "$python" "$src/tests/serve_client.py" "http://127.0.0.1:$port" "$work/expected.json" "$kv_memory" 4 8; then
  echo "ok   serve_client.py"
else
  echo "FAIL serve_client.py"; failures=$((failures + 1))
fi

# Graceful shutdown: SIGTERM while a stream is running; the stream still ends normally (length),
# the server exits 0 and the port closes.
"$python" - "http://127.0.0.1:$port" "$work/stream.json" <<'PY' &
import json, sys, openai
client = openai.OpenAI(base_url=sys.argv[1] + "/v1", api_key="unused", max_retries=0)
text, reasons, n = "", [], 0
for chunk in client.completions.create(model="base", prompt="Once", max_tokens=300, temperature=0.8, seed=1,
                                       stream=True, stream_options={"include_usage": True},
                                       extra_body={"ignore_eos": True, "policy": "streaming:buffer=0", "budget": 8}):
    if chunk.usage: n = chunk.usage.completion_tokens
    for c in chunk.choices:
        if c.finish_reason: reasons.append(c.finish_reason)
json.dump({"reasons": reasons, "tokens": n}, open(sys.argv[2], "w"))
PY
stream_pid=$!
for _ in $(seq 100); do
  grep -q "retain_requests_running 1" <(curl -s "http://127.0.0.1:$port/metrics") && break; sleep 0.05
done
kill -TERM "$server_pid"
wait "$stream_pid"; stream_rc=$?
wait "$server_pid"; server_rc=$?
if [ "$stream_rc" -eq 0 ] && [ "$server_rc" -eq 0 ] &&
   "$python" -c "import json,sys; r=json.load(open(sys.argv[1])); assert r == {'reasons': ['length'], 'tokens': 300}, r" "$work/stream.json" &&
   grep -q "finishing in-flight requests" "$work/server.log" && ! curl -s "http://127.0.0.1:$port/health" > /dev/null; then
  echo "ok   SIGTERM lets the stream finish, exits 0 and closes the port"
else
  echo "FAIL graceful shutdown (stream rc $stream_rc, server rc $server_rc)"; cat "$work/stream.json" 2>/dev/null
  tail -5 "$work/server.log"; failures=$((failures + 1))
fi

# bench serve: the engine beside sequential generate gives the same greedy answers.
check "bench serve" "$retain" bench serve --preset tiny --arch llama --dtype fp32 --device cpu --threads 1 \
  --requests 6 --concurrency 3 --prompt-tokens 40 --new-tokens 8 --policy h2o:buffer=2 --budget 8 --chunk 16 --json
"$python" -c "import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); assert r['identical_answers'] == 6 and r['served']['tokens'] == r['sequential']['tokens'] > 0, r" "$work/out.txt" &&
  echo "ok   bench serve: identical answers" || { echo "FAIL bench serve answers"; failures=$((failures + 1)); }

# Static decode rows (--decode static: on the CPU too): the server's own policy decodes in fixed
# rows and answers as `retain generate` does; /metrics counts the request that used a row.
rm -f "$work/port"
"$retain" serve "${common[@]}" --port 0 --port-file "$work/port" --policy snapkv:buffer=0 --budget 3 \
  --decode static --max-batch 2 > "$work/static.log" 2>&1 &
static_pid=$!
for _ in $(seq 600); do [ -s "$work/port" ] && break; sleep 0.1; done
if "$python" - "http://127.0.0.1:$(cat "$work/port" 2>/dev/null)" "$work/expected.json" "$prompt" <<'PY'
import json, sys, urllib.request, openai
url, expected, prompt = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
r = client.completions.create(model="base", prompt=prompt, max_tokens=12, temperature=0)
assert r.choices[0].text == expected["policy"]["text"], (r.choices[0].text, expected["policy"]["text"])
metrics = urllib.request.urlopen(url + "/metrics").read().decode()
assert "retain_static_rows 2" in metrics and "retain_static_rows_joined_total 1" in metrics, metrics
PY
then echo "ok   static decode rows answer as generate"; else
  echo "FAIL static decode rows"; tail -5 "$work/static.log"; failures=$((failures + 1)); fi
kill -TERM "$static_pid"; wait "$static_pid"

check "bench serve --decode static" "$retain" bench serve --preset tiny --arch llama --dtype fp32 --device cpu \
  --threads 1 --requests 6 --concurrency 3 --prompt-tokens 40 --new-tokens 8 --policy dbtrimkv:buffer=2 \
  --budget 8 --chunk 16 --max-batch 3 --decode static --json
"$python" -c "import json,sys; r=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); assert r['identical_answers'] == 6 and r['served_decode'] == '3 static rows', r" "$work/out.txt" &&
  echo "ok   bench serve --decode static: identical answers in rows" || { echo "FAIL bench serve static answers"; failures=$((failures + 1)); }

# Access: API keys (a flag's and RETAIN_API_KEY's) over HTTPS with a certificate made here.
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/key.pem" -out "$work/cert.pem" -days 1 \
  -subj "/CN=127.0.0.1" -addext "subjectAltName=IP:127.0.0.1" > /dev/null 2>&1 ||
  { echo "FAIL openssl could not make a test certificate"; exit 1; }
rm -f "$work/port"
RETAIN_API_KEY=env-key,second-env-key "$retain" serve "${common[@]}" --port 0 --port-file "$work/port" \
  --api-key flag-key --ssl-certfile "$work/cert.pem" --ssl-keyfile "$work/key.pem" > "$work/tls.log" 2>&1 &
tls_pid=$!
for _ in $(seq 600); do [ -s "$work/port" ] && break; sleep 0.1; done
if "$python" - "https://127.0.0.1:$(cat "$work/port" 2>/dev/null)" "$work/expected.json" "$work/cert.pem" <<'PY'
import json, sys, openai
import httpx2 as httpx  # the HTTP client openai 3 is built on
url, expected, cert = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
def client(key):
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, http_client=httpx.Client(verify=cert))
for key in ("flag-key", "env-key", "second-env-key"):
    r = client(key).completions.create(model="base", prompt=expected["prompt"], max_tokens=12, temperature=0)
    assert r.choices[0].text == expected["completion"]["text"], (key, r.choices[0].text)
for key in ("wrong-key", "flag-ke", "flag-key2"):
    try:
        client(key).completions.create(model="base", prompt="x", max_tokens=2)
        raise AssertionError(f"{key} was let in")
    except openai.AuthenticationError as e:
        assert e.status_code == 401 and e.body["code"] == "invalid_api_key", e.body
try:
    client("wrong-key").models.list()
    raise AssertionError("/v1/models without the key")
except openai.AuthenticationError:
    pass
with httpx.Client(verify=cert) as h:
    assert h.post(url + "/v1/completions", json={"model": "base", "prompt": "x"}).status_code == 401
    assert h.get(url + "/health").status_code == 200
    assert h.get(url + "/metrics").status_code == 401
    assert h.get(url + "/metrics", headers={"Authorization": "Bearer env-key"}).status_code == 200
try:
    httpx.get(url.replace("https", "http") + "/health", timeout=5)
    raise AssertionError("plain HTTP answered on the HTTPS port")
except httpx.HTTPError:
    pass
PY
then echo "ok   API keys over HTTPS: the right keys answer, wrong or none 401, /health open, /metrics guarded"
else echo "FAIL API keys over HTTPS"; tail -5 "$work/tls.log"; failures=$((failures + 1)); fi
kill -TERM "$tls_pid"; wait "$tls_pid"
grep -q "on https://127.0.0.1:.* (API key required)" "$work/tls.log" && echo "ok   the start line says HTTPS and keys" ||
  { echo "FAIL the start line: $(grep serving "$work/tls.log")"; failures=$((failures + 1)); }
# A non-loopback host without a key is warned about before binding (this address cannot be bound
# here, so nothing listens beyond loopback).
check_error "no key on a non-loopback host" "without an API key" \
  "$retain" serve --model "$model" --host 203.0.113.7 --port 0
check_error "certificate without its key" "go together" \
  "$retain" serve --model "$model" --ssl-certfile "$work/cert.pem" --port 0
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$work/other-key.pem" -out "$work/other.pem" -days 1 \
  -subj "/CN=x" > /dev/null 2>&1
check_error "a key that is not the certificate's" "OpenSSL refused the key" \
  "$retain" serve --model "$model" --ssl-certfile "$work/cert.pem" --ssl-keyfile "$work/other-key.pem" --port 0
check_error "an empty RETAIN_API_KEY entry" "empty key" env RETAIN_API_KEY=a,,b \
  "$retain" serve --model "$model" --port 0

# Bad flags: refused at start, naming what is wrong.
check_error "policy without a budget" "needs --budget" "$retain" serve --model "$model" --policy snapkv --port 0
check_error "kv-memory units" "expected bytes such as" "$retain" serve --model "$model" --kv-memory 12parsecs --port 0
check_error "missing model" "config.json" "$retain" serve --model "$work/nothing" --port 0
check_error "decode mode" "--decode" "$retain" serve --model "$model" --decode graphs --port 0

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all serve checks passed"
