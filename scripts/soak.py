"""A bounded soak of a running `retain serve` (scripts/soak.sh starts one and calls this).

CLIENTS threads send requests for SECONDS on loopback, each picking from a fixed mix: good
completions (whole and streamed, greedy: their text must equal EXPECTED's for the prompt, which
`retain generate` gave), malformed bodies (400), unknown routes (404), streams cancelled after
two chunks, and good requests sent slowly in three pieces. No request is retried, so every good
request is answered exactly once or counted as lost. Every BUCKET seconds it prints the requests
served, p50 / p99 latency of the good ones (but the slow, whose pauses are their time) and the
server's RSS; at the end, errors by kind.

It fails (exit 1) when any request got an answer other than its kind's, a good request was lost,
the server's RSS grew by more than RSS_GROWTH_MIB from the end of the first bucket to the last,
or the server is not alive and idle at the end (health 200, nothing running or waiting, one
connection: the scrape's own).

Usage: soak.py BASE_URL SERVER_PID EXPECTED.json CLIENTS SECONDS BUCKET RSS_GROWTH_MIB
EXPECTED.json: {"prompts": {PROMPT: TEXT, ...}, "max_tokens": N}
"""
import collections
import json
import random
import socket
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request

import openai

base, pid, expected_path, clients, seconds, bucket, rss_growth = sys.argv[1:8]
pid, clients, seconds, bucket, rss_growth = (int(pid), int(clients), float(seconds),
                                             float(bucket), float(rss_growth))
expected = json.load(open(expected_path))
prompts, max_tokens = expected["prompts"], expected["max_tokens"]
host, port = base.split("//")[1].split(":")
port = int(port)

lock = threading.Lock()
outcomes = collections.Counter()      # kind -> requests answered as their kind expects
errors = collections.Counter()        # "kind: what went wrong" -> count
latencies = collections.defaultdict(list)  # bucket index -> good requests' seconds
served = collections.Counter()        # bucket index -> requests answered
good_sent = good_answered = 0
start = time.monotonic()


def now_bucket():
    return int((time.monotonic() - start) // bucket)


def record(kind, ok, what="", latency=None):
    global good_answered
    with lock:
        served[now_bucket()] += 1
        if ok:
            outcomes[kind] += 1
            if kind == "good":
                good_answered += 1
            if latency is not None:
                latencies[now_bucket()].append(latency)
        else:
            errors[f"{kind}: {what}"] += 1


def rss_mib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024


def metrics():
    text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}


def post(path, data):
    request = urllib.request.Request(base + path, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def good_whole(client, rng):
    prompt = rng.choice(list(prompts))
    t = time.monotonic()
    r = client.completions.create(model="base", prompt=prompt, max_tokens=max_tokens,
                                  temperature=0)
    text = r.choices[0].text
    record("good", text == prompts[prompt], f"text {text!r} for {prompt!r}", time.monotonic() - t)


def good_stream(client, rng):
    prompt = rng.choice(list(prompts))
    t = time.monotonic()
    text = "".join(c.choices[0].text for c in client.completions.create(
        model="base", prompt=prompt, max_tokens=max_tokens, temperature=0, stream=True)
        if c.choices)
    record("good", text == prompts[prompt], f"streamed {text!r} for {prompt!r}",
           time.monotonic() - t)


def malformed(client, rng):
    body = rng.choice([b"{", b"[1, 2]", b'{"model": "base", "prompt": 7}',
                       b'{"model": "base", "prompt": "x", "max_tokens": -1}',
                       b'{"model": "base", "prompt": "x", "temperature": "hot"}', b"\xff\xfe"])
    status, _ = post("/v1/completions", body)
    record("malformed", status == 400, f"status {status} for {body!r}")


def unknown_route(client, rng):
    status, _ = post("/v1/nothing", b"{}")
    record("unknown route", status == 404, f"status {status}")


def cancelled(client, rng):
    stream = client.completions.create(model="base", prompt=rng.choice(list(prompts)),
                                       max_tokens=2000, stream=True,
                                       extra_body={"ignore_eos": True})
    chunks = 0
    for _ in stream:
        chunks += 1
        if chunks == 2:
            break
    stream.close()
    record("cancelled", chunks == 2, f"{chunks} chunks before closing")


def slow(client, rng):
    prompt = rng.choice(list(prompts))
    body = json.dumps({"model": "base", "prompt": prompt, "max_tokens": max_tokens,
                       "temperature": 0}).encode()
    message = (f"POST /v1/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json"
               f"\r\nConnection: close\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    t = time.monotonic()
    with socket.create_connection((host, port), timeout=60) as s:
        third = len(message) // 3
        for piece in (message[:third], message[third:2 * third], message[2 * third:]):
            s.sendall(piece)
            time.sleep(0.2)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    head, _, payload = reply.partition(b"\r\n\r\n")
    ok = head.startswith(b"HTTP/1.1 200")
    text = json.loads(payload)["choices"][0]["text"] if ok else head[:40]
    # Not in the latency figures: its own pauses are most of its time.
    record("good", ok and text == prompts[prompt], f"slow: {text!r}")


MIX = [(good_whole, 4), (good_stream, 2), (slow, 1), (malformed, 1), (unknown_route, 1),
       (cancelled, 1)]


def worker(seed):
    global good_sent
    rng = random.Random(seed)
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=60)
    actions = [a for a, weight in MIX for _ in range(weight)]
    while time.monotonic() - start < seconds:
        action = rng.choice(actions)
        if action in (good_whole, good_stream, slow):
            with lock:
                good_sent += 1
        try:
            action(client, rng)
        except Exception as e:  # a connection error or an unexpected status: counted, never retried
            record(action.__name__, False, type(e).__name__ + ": " + str(e)[:80])


rss = {}


def sampler():
    while time.monotonic() - start < seconds:
        b = now_bucket()
        rss[b] = rss_mib()
        time.sleep(0.5)


threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
threads.append(threading.Thread(target=sampler))
for t in threads:
    t.start()
for t in threads:
    t.join()

print(f"{'from s':>7} {'served':>7} {'good p50 ms':>12} {'good p99 ms':>12} {'RSS MiB':>8}")
for b in sorted(served):
    lat = sorted(latencies.get(b, []))
    p50 = statistics.median(lat) * 1000 if lat else float("nan")
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1000 if lat else float("nan")
    print(f"{b * bucket:>7.0f} {served[b]:>7} {p50:>12.1f} {p99:>12.1f} {rss.get(b, float('nan')):>8.1f}")
print("answered as expected: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
print("errors: " + (", ".join(f"{k} x{v}" for k, v in sorted(errors.items())) or "none"))

failures = []
if errors:
    failures.append(f"{sum(errors.values())} request(s) answered otherwise than their kind")
if good_answered != good_sent:
    failures.append(f"{good_sent - good_answered} of {good_sent} good requests lost or wrong")
buckets = sorted(rss)
if len(buckets) >= 2:
    growth = rss[buckets[-1]] - rss[buckets[0]]
    print(f"RSS {rss[buckets[0]]:.1f} MiB after the first {bucket:g} s, {rss[buckets[-1]]:.1f} at "
          f"the end ({growth:+.1f}; bound +{rss_growth:g})")
    if growth > rss_growth:
        failures.append(f"RSS grew {growth:.1f} MiB (bound {rss_growth:g})")
health = urllib.request.urlopen(base + "/health", timeout=10).status
idle = None
for _ in range(100):  # the last cancelled streams leave at the engine's next step
    m = metrics()
    idle = (m["retain_requests_running"], m["retain_requests_waiting"], m["retain_http_connections"])
    if idle == (0.0, 0.0, 1.0):
        break
    time.sleep(0.1)
if health != 200 or idle != (0.0, 0.0, 1.0):
    failures.append(f"not alive and idle at the end: health {health}, (running, waiting, "
                    f"connections) {idle}")
print(f"{good_answered} good requests answered exactly once of {good_sent} sent; "
      f"{sum(served.values())} requests in {seconds:g} s")
print("FAIL " + "; ".join(failures) if failures else "soak passed")
sys.exit(1 if failures else 0)
