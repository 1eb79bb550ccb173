"""`retain serve` under abuse on loopback (serve/http_server.h), with raw sockets beside the
official `openai` client. The server runs with --http-timeout T, --max-client-connections C,
--max-body B, --max-batch 1 and --max-queue 1.

Checks: 64 stalled uploads and 8 that trickle a byte every 0.3 s do not slow normal requests
(each within 3x its alone time + 1 s) and are closed by the server within T (+ slack); 1,000
connections opened and dropped (half of them reset) leave the server answering and its threads
bounded; C idle connections from one address make the next one 429 with Retry-After, freed when
they close; a body over B is 413; streams closed mid-way and a non-streaming request whose client
goes away are cancelled (running returns to 0 long before their length); with one request
running and one waiting, the next is 429. (A client that never reads its stream is cut off by the
write timeout: tests/http_server_test.cpp, where megabytes of reply can fill the socket buffers.)

Usage: serve_limits.py BASE_URL SERVER_PID TIMEOUT_S MAX_CLIENT_CONNECTIONS MAX_BODY_BYTES
"""
import json
import socket
import statistics
import sys
import threading
import time
import urllib.error
import urllib.request

import openai

import serve_checks
from serve_checks import check, failures

base, pid, timeout_s, max_client, max_body = sys.argv[1:6]
pid, timeout_s, max_client, max_body = int(pid), float(timeout_s), int(max_client), int(max_body)
host, port = base.split("//")[1].split(":")
port = int(port)
client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=60)


def metrics():
    return serve_checks.metrics(base)


def wait_metric(name, value, seconds):
    """Polls /metrics until NAME equals VALUE; the seconds it took, or None."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if metrics().get(name) == value:
            return time.monotonic() - start
        time.sleep(0.05)
    return None


def threads():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("Threads:"):
            return int(line.split()[1])


def normal_request():
    start = time.monotonic()
    r = client.completions.create(model="base", prompt="The value of x is", max_tokens=8,
                                  temperature=0)
    return time.monotonic() - start, r.choices[0].text


def request_bytes(body, path="/v1/completions"):
    data = json.dumps(body).encode()
    return (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode() + data


def closed_by_server(sock, seconds):
    """Reads until the server closes (b'' or a reset) within SECONDS."""
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def read_status(sock, seconds=5):
    sock.settimeout(seconds)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    head = data.split(b"\r\n\r\n")[0].decode(errors="replace")
    status = int(head.split()[1]) if head.startswith("HTTP/") else 0
    return status, head


# --- a normal request's time alone
times = [normal_request() for _ in range(3)]
alone = statistics.median(t for t, _ in times)
expected_text = times[0][1]

# --- 64 stalled uploads and 8 trickling ones beside normal requests. They come from other
# loopback addresses (127.0.0.2-4), as many clients' would: from this one, the per-address bound
# (tested below) would refuse the normal requests' new connections.


def elsewhere(i):
    return socket.create_connection((host, port), source_address=(f"127.0.0.{2 + i % 3}", 0))


stalled = []
for i in range(64):
    s = elsewhere(i)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 1000\r\n\r\n{\"prompt\": \"x")
    stalled.append(s)
stop_trickle = threading.Event()
tricklers = [elsewhere(i) for i in range(8)]


def trickle():
    line = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Padding: " + b"a" * 1000
    i = 0
    while not stop_trickle.is_set() and i < len(line):
        for s in tricklers:
            try:
                s.send(line[i:i + 1])
            except OSError:
                pass
        i += 1
        time.sleep(0.3)


trickler = threading.Thread(target=trickle, daemon=True)
trickler.start()
opened = time.monotonic()
time.sleep(0.3)
beside = [normal_request() for _ in range(5)]
slowest = max(t for t, _ in beside)
check("normal requests beside 64 stalled and 8 trickling uploads keep their time",
      slowest <= 3 * alone + 1.0 and all(text == expected_text for _, text in beside),
      f"slowest {slowest:.2f} s against {alone:.2f} s alone")
left = max(0.5, timeout_s + 2.0 - (time.monotonic() - opened))
closed = sum(closed_by_server(s, left) for s in stalled)
closed_trickle = sum(closed_by_server(s, 1.0) for s in tricklers)
elapsed = time.monotonic() - opened
stop_trickle.set()
check(f"the server closed the stalled and trickling uploads after --http-timeout {timeout_s:g} s",
      closed == 64 and closed_trickle == 8,
      f"{closed}/64 stalled and {closed_trickle}/8 trickling closed in {elapsed:.1f} s")
for s in stalled + tricklers:
    s.close()
print(f"     alone {alone * 1000:.0f} ms, beside the uploads at most {slowest * 1000:.0f} ms; "
      f"uploads closed within {elapsed:.1f} s", flush=True)

# --- 1,000 connections opened and dropped (every other one reset)
threads_before = threads()
for wave in range(10):
    socks = [socket.create_connection((host, port)) for _ in range(100)]
    for i, s in enumerate(socks):
        if i % 2:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()
ok_after = normal_request()[1] == expected_text
drained = wait_metric("retain_http_connections", 1.0, 10)  # the scrape's own connection
check("1,000 connections opened and dropped: the server answers and lets them go",
      ok_after and drained is not None and threads() <= threads_before + 600,
      f"answered {ok_after}, connections drained {drained}, threads {threads_before} -> {threads()}")

# --- one address's connection bound
idle = [socket.create_connection((host, port)) for _ in range(max_client)]
time.sleep(0.2)
extra = socket.create_connection((host, port))
status, head = read_status(extra)
extra.close()
for s in idle:
    s.close()
refused_ok = status == 429 and "Retry-After: 1" in head
freed = wait_metric("retain_http_connections", 1.0, 10)
check(f"the connection after {max_client} idle ones from one address is 429 with Retry-After",
      refused_ok and freed is not None and normal_request()[1] == expected_text,
      f"status {status}: {head!r}; freed {freed}")

# --- a body over --max-body
oversize = json.dumps({"model": "base", "prompt": "x" * max_body}).encode()
request = urllib.request.Request(base + "/v1/completions", data=oversize, method="POST",
                                 headers={"Content-Type": "application/json"})
try:
    urllib.request.urlopen(request, timeout=30)
    check("a body over --max-body is 413", False, "it was accepted")
except urllib.error.HTTPError as e:
    body = json.loads(e.read())
    check("a body over --max-body is 413", e.code == 413 and
          body["error"]["code"] == "request_too_large" and str(len(oversize)) in
          body["error"]["message"], f"{e.code} {body}")

# --- streams closed mid-way
cancelled_before = metrics()["retain_requests_cancelled_total"]
for _ in range(3):
    stream = client.completions.create(model="base", prompt="Once", max_tokens=3000, stream=True,
                                       extra_body={"ignore_eos": True})
    for i, _chunk in enumerate(stream):
        if i == 3:
            break
    stream.close()
freed = wait_metric("retain_requests_running", 0.0, 10)
m = metrics()
check("streams closed mid-way are cancelled and their rows freed",
      freed is not None and m["retain_requests_cancelled_total"] == cancelled_before + 3,
      f"running {m['retain_requests_running']}, cancelled +"
      f"{m['retain_requests_cancelled_total'] - cancelled_before}")

# --- a non-streaming request whose client goes away
cancelled_before = metrics()["retain_requests_cancelled_total"]
s = socket.create_connection((host, port))
s.sendall(request_bytes({"model": "base", "prompt": "Once", "max_tokens": 3000,
                         "ignore_eos": True}))
started = wait_metric("retain_requests_running", 1.0, 10)
s.close()
freed = wait_metric("retain_requests_running", 0.0, 10)
m = metrics()
check("a whole reply whose client went away is cancelled (not run to its 3,000 tokens)",
      started is not None and freed is not None and freed < 3 and
      m["retain_requests_cancelled_total"] == cancelled_before + 1,
      f"started {started}, freed after {freed} s, cancelled +"
      f"{m['retain_requests_cancelled_total'] - cancelled_before}")

# --- the queue bound: one running, one waiting, the next is 429 with Retry-After
long_body = {"model": "base", "prompt": "Once", "max_tokens": 3000, "ignore_eos": True}
running = socket.create_connection((host, port))
running.sendall(request_bytes(long_body))
wait_metric("retain_requests_running", 1.0, 10)
waiting = socket.create_connection((host, port))
waiting.sendall(request_bytes(long_body))
queued = wait_metric("retain_requests_waiting", 1.0, 10)
third = socket.create_connection((host, port))
third.sendall(request_bytes(long_body))
status, head = read_status(third)
third.close()
running.close()
waiting.close()
freed = wait_metric("retain_requests_running", 0.0, 10) is not None and \
    wait_metric("retain_requests_waiting", 0.0, 10) is not None
check("with one request running and one waiting (--max-queue 1) the next is 429 with Retry-After",
      queued is not None and status == 429 and "Retry-After: 1" in head and freed,
      f"queued {queued}, status {status}: {head!r}, freed {freed}")

check("the server is alive and answers as before", normal_request()[1] == expected_text)
print(f"{len(failures)} failure(s)" if failures else "all limits hold", flush=True)
sys.exit(1 if failures else 0)
