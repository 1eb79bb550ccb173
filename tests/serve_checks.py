"""What the serving tests' clients share (tests/serve_client.py, tests/serve_limits.py): named
checks that print ok / FAIL and are counted, and /metrics read into a dict."""

import urllib.request

failures = []


def check(name, ok, detail=""):
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else f": {detail}"), flush=True)
    if not ok:
        failures.append(name)


def metrics(base):
    """The server's /metrics as {series: value} (comments skipped)."""
    text = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and not line.startswith("#")}
