#!/usr/bin/env python3
"""The client side of scenario webhook: concurrent pod creates through the real API server,
histogram quantiles from Prometheus text, and a half-sent request held open against the
webhook. Every loop is bounded in count and time; standard library only.

  webhook.py burst --server URL --ca CA --cert CERT --key KEY --ns NS --pod FILE --count N --out r.json
      N creates of the pod in FILE (named <name>-<i>) at once: N threads, each its own
      connection, released together; each create's status and latency. With --sequential:
      one after the other on one connection.
  webhook.py quantile --before F --after F --metric NAME [--match k=v ...] [--q 0.99]
      the calls between two scrapes of a histogram (label subset --match): their count,
      the share at or under each bucket bound, the bucket bound the q-quantile lies under
      and Prometheus's linear interpolation (histogram_quantile) inside that bucket.
  webhook.py half --addr HOST:PORT --ca CA --ready FILE --out r.json [--limit S]
      one TLS connection sending half a review (a head that declares 4096 body bytes and 16
      of them), FILE written once sent, then the time until the server closes it.
"""
import argparse
import json
import os
import re
import socket
import ssl
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from placement import Api  # noqa: E402  (one API client for the scenarios)
from hold import stats  # noqa: E402  (p50/p99/max in ms, nearest rank)


def sequential(a):
    pod = json.load(open(a.pod))
    api = Api(a.server, a.ca, a.cert, a.key)
    took, failed = [], []
    t0 = time.monotonic()
    for i in range(a.count):
        p = json.loads(json.dumps(pod))
        p["metadata"]["name"] = f"{pod['metadata']['name']}-{i}"
        t = time.monotonic()
        try:
            api.call("POST", f"/api/v1/namespaces/{a.ns}/pods", p)
        except RuntimeError as e:
            failed.append(str(e)[:300])
        took.append(time.monotonic() - t)
    json.dump({"created": a.count - len(failed), "failed": failed[:5], "create_ms": stats(took),
               "wall_s": round(time.monotonic() - t0, 2)}, open(a.out, "w"))


def burst(a):
    if a.sequential:
        return sequential(a)
    pod = json.load(open(a.pod))
    n = a.count
    barrier = threading.Barrier(n)
    results = [None] * n

    def one(i):
        api = Api(a.server, a.ca, a.cert, a.key)
        p = json.loads(json.dumps(pod))
        p["metadata"]["name"] = f"{pod['metadata']['name']}-{i}"
        try:
            barrier.wait(timeout=60)
        except threading.BrokenBarrierError:
            pass
        t0 = time.monotonic()
        try:
            api.call("POST", f"/api/v1/namespaces/{a.ns}/pods", p)
            results[i] = {"ok": True, "s": time.monotonic() - t0}
        except RuntimeError as e:
            results[i] = {"ok": False, "s": time.monotonic() - t0, "error": str(e)[:300]}

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    out = {
        "created": sum(1 for r in results if r and r["ok"]),
        "failed": [r for r in results if r and not r["ok"]][:5],
        "create_ms": stats([r["s"] for r in results if r]),
        "wall_s": round(time.monotonic() - t0, 2),
    }
    json.dump(out, open(a.out, "w"))


LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')


def buckets(path, metric, match):
    """{le: cumulative count} of metric_bucket series whose labels include match."""
    out = {}
    for line in open(path):
        m = LINE.match(line)
        if not m or m.group(1) != metric + "_bucket":
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if any(labels.get(k) != v for k, v in match.items()):
            continue
        le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
        out[le] = out.get(le, 0) + float(m.group(3))
    return out


def quantile(a):
    match = dict(kv.split("=", 1) for kv in a.match)
    b0 = buckets(a.before, a.metric, match)
    b1 = buckets(a.after, a.metric, match)
    les = sorted(b1)
    cum = [b1[le] - b0.get(le, 0) for le in les]
    total = cum[-1] if cum else 0
    res = {"count": int(total), "share_at_or_under": {}, "bound_s": None, "interpolated_s": None}
    if total <= 0:
        print(json.dumps(res))
        return
    for le, c in zip(les, cum):
        res["share_at_or_under"][str(le)] = round(c / total, 4)
    rank = a.q * total
    lower, prev = 0.0, 0.0
    for le, c in zip(les, cum):
        if c >= rank:
            res["bound_s"] = le
            if le != float("inf") and c > prev:
                res["interpolated_s"] = lower + (le - lower) * (rank - prev) / (c - prev)
            break
        lower, prev = le, c
    print(json.dumps(res))


def half(a):
    host, port = a.addr.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=a.ca)
    s = ctx.wrap_socket(socket.create_connection((host, int(port)), timeout=5), server_hostname=host)
    s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 4096\r\n\r\n{\"apiVersion\": ")
    open(a.ready, "w").write("sent\n")
    t0 = time.monotonic()
    s.settimeout(a.limit)
    got = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    except (OSError, ssl.SSLError):
        pass
    json.dump({"closed_after_s": round(time.monotonic() - t0, 2), "response": got[:120].decode(errors="replace")},
              open(a.out, "w"))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("burst")
    for f in ("server", "ca", "cert", "key", "ns", "pod", "out"):
        b.add_argument("--" + f, required=True)
    b.add_argument("--count", type=int, default=100)
    b.add_argument("--sequential", action="store_true")
    q = sub.add_parser("quantile")
    q.add_argument("--before", required=True)
    q.add_argument("--after", required=True)
    q.add_argument("--metric", required=True)
    q.add_argument("--match", nargs="*", default=[])
    q.add_argument("--q", type=float, default=0.99)
    h = sub.add_parser("half")
    for f in ("addr", "ca", "ready", "out"):
        h.add_argument("--" + f, required=True)
    h.add_argument("--limit", type=float, default=30)
    a = p.parse_args()
    {"burst": burst, "quantile": quantile, "half": half}[a.cmd](a)


if __name__ == "__main__":
    main()
