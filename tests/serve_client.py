"""`retain serve` through the official `openai` client on loopback.

Checks: /v1/models; completions and chat equal `retain generate` of the same prompt and settings
(greedy), with the server's policy and a request's own; streaming gives the same text; stop
sequences (plain and streamed); cancellation by closing a stream; OpenAI-style errors with 4xx
codes; a bounded load test (concurrent clients, mixed policies, every greedy answer equal to the
same request's answer alone, KV memory within --kv-memory at every scrape); figures printed.

Usage: serve_client.py BASE_URL EXPECTED.json KV_MEMORY LOAD_CLIENTS LOAD_SECONDS
EXPECTED.json: {"completion": {...generate --json...}, "policy": {...}, "chat": {...}}.
"""
import json
import random
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request

import openai

import serve_checks
from serve_checks import check, failures

base, expected_path, kv_memory, clients, seconds = sys.argv[1:6]
kv_memory, clients, seconds = int(kv_memory), int(clients), float(seconds)
expected = json.load(open(expected_path))
client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120)
MODEL = "base"
PROMPT = expected["prompt"]


def metrics():
    return serve_checks.metrics(base)


def raw_post(path, body, content_type="application/json"):
    data = body if isinstance(body, bytes) else body.encode()
    request = urllib.request.Request(base + path, data=data, method="POST",
                                     headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


# --- models
models = client.models.list()
check("models lists the served model", [m.id for m in models.data] == [MODEL], models)

# --- completions equal `retain generate`
r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, temperature=0)
check("completion equals generate", r.choices[0].text == expected["completion"]["text"],
      (r.choices[0].text, expected["completion"]["text"]))
check("completion finish reason", r.choices[0].finish_reason == expected["completion"]["finish_reason"])
check("completion usage", r.usage.completion_tokens == len(expected["completion"]["ids"]) and
      r.usage.prompt_tokens == len(expected["completion"]["prompt_ids"]), r.usage)
r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=12, temperature=0,
                              extra_body={"policy": "snapkv:buffer=0", "budget": 3})
check("a request's own policy equals generate with it",
      r.choices[0].text == expected["policy"]["text"], (r.choices[0].text, expected["policy"]["text"]))
r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": PROMPT}],
                                   max_tokens=10, temperature=0)
check("chat equals generate through the chat template",
      r.choices[0].message.content == expected["chat"]["text"],
      (r.choices[0].message.content, expected["chat"]["text"]))
check("chat message role", r.choices[0].message.role == "assistant")

# --- streaming gives the same text
whole = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=40, temperature=0)
text, reasons, usage = "", [], None
for chunk in client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=40, temperature=0,
                                       stream=True, stream_options={"include_usage": True}):
    if chunk.usage:
        usage = chunk.usage
    for c in chunk.choices:
        text += c.text
        if c.finish_reason:
            reasons.append(c.finish_reason)
check("streamed completion equals the whole one", text == whole.choices[0].text, (text, whole.choices[0].text))
check("streamed finish reason", reasons == [whole.choices[0].finish_reason], reasons)
check("streamed usage chunk", usage is not None and usage.completion_tokens == whole.usage.completion_tokens, usage)
chat_text = ""
for chunk in client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": PROMPT}],
                                            max_tokens=10, temperature=0, stream=True):
    for c in chunk.choices:
        chat_text += c.delta.content or ""
check("streamed chat equals the whole chat", chat_text == expected["chat"]["text"], chat_text)

# --- stop sequences: cut before the stop string, finish reason "stop"
full = whole.choices[0].text
words = [w for w in full.split(" ") if w]
stop = " " + words[len(words) // 2]
cut = full[: full.find(stop)]
r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=40, temperature=0, stop=[stop])
check("stop sequence cuts the text", r.choices[0].text == cut and r.choices[0].finish_reason == "stop",
      (r.choices[0].text, cut, r.choices[0].finish_reason))
streamed = "".join(c.text for chunk in client.completions.create(
    model=MODEL, prompt=PROMPT, max_tokens=40, temperature=0, stop=stop, stream=True) for c in chunk.choices)
check("streamed stop sequence", streamed == cut, (streamed, cut))

# --- cancellation: closing the stream ends the request
before = metrics()["retain_requests_cancelled_total"]
stream = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=3000, temperature=0.7,
                                   stream=True, extra_body={"ignore_eos": True, "policy": "streaming:buffer=0",
                                                            "budget": 8})
for i, _ in enumerate(stream):
    if i == 3:
        break
stream.close()
deadline = time.time() + 20
while time.time() < deadline:
    m = metrics()
    if m["retain_requests_cancelled_total"] > before and m["retain_requests_running"] == 0:
        break
    time.sleep(0.1)
check("a closed stream cancels its request",
      m["retain_requests_cancelled_total"] == before + 1 and m["retain_requests_running"] == 0, m)

# --- errors: OpenAI-style bodies and 4xx codes; the server lives on
try:
    client.completions.create(model="missing", prompt="x", max_tokens=2)
    check("unknown model is 404", False, "no error")
except openai.NotFoundError as e:
    check("unknown model is 404", e.body["code"] == "model_not_found", e.body)
status, body = raw_post("/v1/completions", "{not json")
check("malformed JSON is 400", status == 400 and body["error"]["type"] == "invalid_request_error", (status, body))
try:
    client.completions.create(model=MODEL, prompt="word " * 5000, max_tokens=2)
    check("too long a prompt is 400", False, "no error")
except openai.BadRequestError as e:
    check("too long a prompt is 400", e.body["code"] == "context_length_exceeded", e.body)
try:
    client.completions.create(model=MODEL, prompt="x", max_tokens=2, extra_body={"policy": "snapk", "budget": 2})
    check("a bad policy is 400", False, "no error")
except openai.BadRequestError as e:
    check("a bad policy is 400", e.body["param"] == "policy" and "snapkv" in e.body["message"], e.body)
# Invalid UTF-8 inside a JSON string: the client's error, named by its byte offset.
bad_utf8 = b'{"model": "base", "prompt": "caf\xc3 au lait", "max_tokens": 2}'
status, body = raw_post("/v1/completions", bad_utf8)
check("invalid UTF-8 is 400 naming the offset", status == 400 and "offset 32" in body["error"]["message"]
      and body["error"]["type"] == "invalid_request_error", (status, body))
status, body = raw_post("/v1/completions", "[" * 100000 + "]" * 100000)
check("deep nesting is refused before parsing", status == 400 and "deeper than 64" in body["error"]["message"],
      (status, body))
# A JSON syntax error whose "last read" ends inside a character: still a 400 with a UTF-8 body.
status, body = raw_post("/v1/completions", '{"model": tr\u00e9}'.encode().decode("unicode_escape").encode())
check("a parse error quoting half a character is 400", status == 400, (status, body))
# Every field with a wrong type or value, and bodies of every other shape: 4xx, never 5xx.
shapes = ["", "null", "[]", "42", '"text"', "{}", '{"model": null}', '{"model": 7}', '{"model": "base", "prompt": null}',
          '{"model": "base", "prompt": []}', '{"model": "base", "prompt": [[1]]}', '{"model": "base", "prompt": [-1]}',
          '{"model": "base", "prompt": [1e30]}', '{"model": "base", "prompt": ["a", "b"]}', '{"model": "base", "prompt": {}}',
          '{"model": "base", "prompt": "\\ud800"}', '{"model": "base", "prompt": "\u0000"}',
          '{"model": "base", "prompt": "x", "max_tokens": 18446744073709551615}',
          '{"model": "base", "prompt": "x", "max_tokens": -9223372036854775808}',
          '{"model": "base", "prompt": "x", "max_tokens": 1.5}', '{"model": "base", "prompt": "x", "seed": "s"}',
          '{"model": "base", "prompt": "x", "seed": 18446744073709551615}',
          '{"model": "base", "prompt": "x", "temperature": "hot"}', '{"model": "base", "prompt": "x", "top_p": 0}',
          '{"model": "base", "prompt": "x", "stop": [""]}', '{"model": "base", "prompt": "x", "stop": {"a": 1}}',
          '{"model": "base", "prompt": "x", "stream": "yes"}', '{"model": "base", "prompt": "x", "stream_options": 1}',
          '{"model": "base", "prompt": "x", "skip_special_tokens": 0}',
          '{"model": "base", "prompt": "x", "policy": 3}', '{"model": "base", "prompt": "x", "policy": "h2o:buffer=-1", "budget": 2}',
          '{"model": "base", "prompt": "x", "policy": "h2o", "budget": 1e300}', '{"model": "base", "prompt": "x", "budget": -1}',
          '{"model": "base", "prompt": "x", "policy": "streaming:sinks=100000", "budget": 0.5}',
          '{"model": "base", "prompt": "x", "n": 1e9}', '{"model": "base", "prompt": "x", "logit_bias": {"1": 5}}']
chat_shapes = ['{"model": "base", "messages": "hi"}', '{"model": "base", "messages": [{"role": 1}]}',
               '{"model": "base", "messages": [{"role": "user"}]}', '{"model": "base", "messages": [{"role": "user", "content": 5}]}',
               '{"model": "base", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}',
               '{"model": "base", "messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]}',
               '{"model": "base", "messages": [{"role": "user", "content": null}]}']
server_errors = []
for path, bodies in (("/v1/completions", shapes), ("/v1/chat/completions", shapes + chat_shapes)):
    for b in bodies:
        status, body = raw_post(path, b)
        if not (400 <= status < 500 or status == 200) or "error" not in body and status != 200:
            server_errors.append((path, b, status, body))
check("no malformed request is answered 5xx", not server_errors, server_errors[:3])
status, body = raw_post("/v1/nothing", "{}")
check("an unknown route is 404", status == 404 and "error" in body, (status, body))
check("the server still answers", client.completions.create(
    model=MODEL, prompt=PROMPT, max_tokens=12, temperature=0).choices[0].text == expected["completion"]["text"])

# --- load: concurrent clients, mixed policies; each greedy answer equals its answer alone
settings = [
    {"prompt": PROMPT, "max_tokens": 24},
    {"prompt": PROMPT + " and the key is", "max_tokens": 16, "extra_body": {"policy": "snapkv:buffer=0", "budget": 4}},
    {"prompt": "Remember: alpha beta gamma. " * 20 + "The first word was", "max_tokens": 20,
     "extra_body": {"policy": "streaming:buffer=2", "budget": 8}},
    {"prompt": "x = 7, y = 9. " * 10 + "So y is", "max_tokens": 12, "extra_body": {"policy": "h2o:buffer=1", "budget": 0.3}},
    {"prompt": "The value of x is", "max_tokens": 32, "extra_body": {"policy": "knorm:buffer=0,alloc=pyramid", "budget": 6}},
]
alone = [client.completions.create(model=MODEL, temperature=0, **s).choices[0].text for s in settings]
results, errors, latencies, scrapes = [], [], [], []
stop_at = time.time() + seconds


def worker(seed):
    rng = random.Random(seed)
    local = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=120)
    while time.time() < stop_at:
        i = rng.randrange(len(settings))
        t0 = time.time()
        try:
            if rng.random() < 0.5:
                r = local.completions.create(model=MODEL, temperature=0, **settings[i])
                text, tokens = r.choices[0].text, r.usage.completion_tokens
            else:
                text, tokens = "", 0
                for chunk in local.completions.create(model=MODEL, temperature=0, stream=True,
                                                      stream_options={"include_usage": True}, **settings[i]):
                    text += "".join(c.text for c in chunk.choices)
                    if chunk.usage:
                        tokens = chunk.usage.completion_tokens
            results.append((i, text, tokens))
            latencies.append(time.time() - t0)
        except Exception as e:  # any error fails the load test
            errors.append(repr(e))


def scraper():
    while time.time() < stop_at + 1:
        scrapes.append(metrics())
        time.sleep(0.2)


threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)] + [threading.Thread(target=scraper)]
for t in threads:
    t.start()
for t in threads:
    t.join()
mismatched = [(i, text) for i, text, _ in results if text != alone[i]]
check("load: no request failed", not errors, errors[:3])
check("load: every answer equals the same request alone", not mismatched, mismatched[:3])
most_reserved = max(s["retain_kv_reserved_bytes"] for s in scrapes)
most_live = max(s["retain_kv_live_bytes"] for s in scrapes)
most_running = max(s["retain_requests_running"] for s in scrapes)
check("load: reserved KV within --kv-memory", most_reserved <= kv_memory, (most_reserved, kv_memory))
check("load: live KV within --kv-memory", most_live <= kv_memory, (most_live, kv_memory))
check("load: requests ran together", most_running >= 2, most_running)
final = metrics()
ttft = final['retain_time_to_first_token_seconds{quantile="0.5"}']
itl = final['retain_inter_token_latency_seconds{quantile="0.5"}']
tokens = sum(n for _, _, n in results)
print(f"load: {clients} clients x {seconds:.0f} s: {len(results)} requests, {tokens} tokens, "
      f"{tokens / seconds:.0f} tok/s, latency p50 {statistics.median(latencies):.3f} s "
      f"p90 {sorted(latencies)[int(0.9 * (len(latencies) - 1))]:.3f} s; most running {most_running:.0f}, "
      f"most reserved {most_reserved / 1e6:.2f} MB of {kv_memory / 1e6:.2f} MB, most live {most_live / 1e6:.2f} MB; "
      f"TTFT p50 {ttft:.4f} s, inter-token p50 {itl:.4f} s", flush=True)
sys.exit(1 if failures else 0)
