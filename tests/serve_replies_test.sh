#!/usr/bin/env bash
# Chat replies on the real model (SmolLM2-135M-Instruct, ChatML): `retain generate --chat` prints
# the reply without the end-of-turn token, and `retain serve` answers the same text through the
# openai client, whole and streamed, with skip_special_tokens true (the default) and false (the
# token that stopped the reply is never shown), as OpenAI's and vLLM's replies are.
# Usage: serve_replies_test.sh RETAIN WORKDIR PYTHON SMOLLM2_DIR
set -uo pipefail
retain="$1"
work="$2"
python="$3"
model="$4"
rm -rf "$work" && mkdir -p "$work"
source "$(cd "$(dirname "$0")" && pwd)/cli_checks.sh"
question="What is the capital of France?"
common=(--model "$model" --threads 1)

check "generate --chat" "$retain" generate "${common[@]}" --chat --prompt "$question" --max-new-tokens 24
reply=$(cat "$work/out.txt")
if [ -n "$reply" ] && [[ "$reply" != *"<|"* ]]; then
  echo "ok   generate --chat prints the reply without the end-of-turn token: $reply"
else
  echo "FAIL generate --chat printed '$reply'"; failures=$((failures + 1))
fi
"$retain" generate "${common[@]}" --chat --prompt "$question" --max-new-tokens 24 --json \
  > "$work/generate.json" 2>/dev/null || { echo "FAIL generate --json"; exit 1; }
"$retain" generate "${common[@]}" --chat --prompt "$question" --max-new-tokens 24 --keep-special-tokens \
  > "$work/kept.txt" 2>/dev/null || { echo "FAIL generate --keep-special-tokens"; exit 1; }
if "$python" - "$work/generate.json" "$work/kept.txt" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert r["finish_reason"] == "stop" and r["ids"][-1] == 2, r  # 2: <|im_end|>, SmolLM2's EOS
assert r["text"] and "<|im_end|>" not in r["text"], r
assert open(sys.argv[2]).read().rstrip("\n") == r["text"], "--keep-special-tokens shows the stop token"
PY
then echo "ok   generate --json: finish stop, the ids end in <|im_end|>, the text does not"
else echo "FAIL generate --json"; failures=$((failures + 1)); fi

rm -f "$work/port"
"$retain" serve "${common[@]}" --port 0 --port-file "$work/port" > "$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 600); do [ -s "$work/port" ] && break; sleep 0.1; done
port=$(cat "$work/port" 2>/dev/null)
[ -n "$port" ] || { echo "FAIL the server did not start:"; cat "$work/server.log"; kill "$server_pid"; exit 1; }
if "$python" - "http://127.0.0.1:$port" "$work/generate.json" "$question" <<'PY'
import json, sys, openai
url, expected, question = sys.argv[1], json.loads(open(sys.argv[2]).read().strip().splitlines()[-1]), sys.argv[3]
client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)
model = client.models.list().data[0].id
messages = [{"role": "user", "content": question}]
for extra in ({}, {"skip_special_tokens": False}):
    r = client.chat.completions.create(model=model, messages=messages, max_tokens=24, temperature=0, extra_body=extra)
    c = r.choices[0]
    assert c.message.content == expected["text"] and c.finish_reason == "stop", (extra, c, expected["text"])
    assert r.usage.completion_tokens == len(expected["ids"]), r.usage
    streamed, reasons = "", []
    for chunk in client.chat.completions.create(model=model, messages=messages, max_tokens=24, temperature=0,
                                                stream=True, extra_body=extra):
        for ch in chunk.choices:
            streamed += ch.delta.content or ""
            if ch.finish_reason: reasons.append(ch.finish_reason)
    assert streamed == expected["text"] and reasons == ["stop"], (extra, streamed, reasons)
# Completions with the chat prompt's ids: the same reply, the same rule.
r = client.completions.create(model=model, prompt=expected["prompt_ids"], max_tokens=24, temperature=0)
assert r.choices[0].text == expected["text"], r.choices[0].text
print("replies:", json.dumps(expected["text"]))
PY
then echo "ok   serve: chat and completions, whole and streamed, skip_special_tokens both ways, equal generate"
else echo "FAIL serve replies"; tail -5 "$work/server.log"; failures=$((failures + 1)); fi
kill -TERM "$server_pid"; wait "$server_pid"

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all reply checks passed"
