#!/usr/bin/env python3
"""The client side of scenario hold (issue 22): load, slow clients and large bodies against
`topoalign extender` and the driver's and agent's probe ports, on loopback only. Every loop
is bounded in count and time and stops by itself; standard library only.

  hold.py rename --in nodes.json --prefix P > out.json
      `topoalign extender nodes` output renamed P<name>, labelled topoalign.dev/e2e-hold=1
      and tainted (no other scenario's pod lands on them).
  hold.py create --nodes out.json --server URL --ca CA --cert CERT --key KEY
      creates the Node objects (4 connections in parallel).
  hold.py load --ext URL --names nodes.json --new-nodes new.json --server … --out r.json
      heavy pods (HEAVY senders in parallel, each call a pod of CONTAINERS+k containers, a
      distinct shape) filtered over the nodes for DURATION s while /healthz (a fresh
      connection per call, as a probe) and ordinary filter/prioritize calls (kept alive, as
      the scheduler) are timed; meanwhile the new Nodes are created one by one and a probe
      filter call (a pod no known node of that profile can hold) names the ones not yet
      seen: a node is known once the extender rejects it instead of passing it neutral
      (unknown node).
  hold.py slow --target NAME=HOST:PORT[:post] … --per-kind N --limit S --out r.json
      per target N connections of each kind: idle (nothing sent), head (half a request
      head), trickle (a head byte a second), body (a POST, or a GET, declaring more body
      than it sends), and the time until the server closes each; /healthz of every target
      timed meanwhile. With --ready FILE: FILE is written once all are open.
  hold.py burst --ext URL --pid PID --names nodes.json --calls N --body-mb MB --out r.json
      N calls at once, each a `Nodes` form body of about MB MB, while the extender's
      VmRSS is sampled from /proc/PID/status (its peak VmHWM reset first).
"""
import argparse
import copy
import http.client
import json
import os
import selectors
import socket
import sys
import threading
import time
import urllib.parse

sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from placement import Api  # noqa: E402  (one API client for the scenarios)

HOLD_LABEL = "topoalign.dev/e2e-hold"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] hold: {msg}", file=sys.stderr, flush=True)


def stats(v):
    """p50/p99/max in ms of a list of seconds (nearest rank)."""
    if not v:
        return {"n": 0}
    s = sorted(v)

    def at(p):
        k = max(0, min(len(s) - 1, int(-(-p * len(s) // 1)) - 1))
        return round(s[k] * 1000, 2)

    return {"n": len(s), "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": round(s[-1] * 1000, 2)}


def hostport(url):
    u = urllib.parse.urlparse(url)
    return u.hostname, u.port


# ---------------------------------------------------------------- nodes


def cmd_rename(a):
    doc = json.load(open(a.input))
    for n in doc["items"]:
        md = n["metadata"]
        md["name"] = a.prefix + md["name"]
        md["labels"]["kubernetes.io/hostname"] = md["name"]
        md["labels"][HOLD_LABEL] = "1"
        n.setdefault("spec", {})["taints"] = [{"key": HOLD_LABEL, "value": "1", "effect": "NoSchedule"}]
    json.dump(doc, sys.stdout)


def api_of(a):
    return Api(a.server, a.ca, a.cert, a.key)


def create_nodes(a, items, threads=4):
    errs = []

    def work(k):
        api = api_of(a)
        for n in items[k::threads]:
            try:
                api.call("POST", "/api/v1/nodes", n, ok=(201, 409))
            except RuntimeError as e:
                errs.append(str(e))

    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    return errs


def cmd_create(a):
    items = json.load(open(a.nodes))["items"]
    errs = create_nodes(a, items)
    if errs:
        sys.exit(f"creating {len(errs)} of {len(items)} Nodes failed: {errs[0]}")
    log(f"{len(items)} Nodes created")


# ---------------------------------------------------------------- pods and calls


def small_pod(name, gpus=2):
    return {"metadata": {"name": name, "namespace": "hold", "uid": f"uid-{name}"},
            "spec": {"containers": [{"name": "m", "resources": {"limits": {
                "amd.com/gpu": gpus, "nvidia.com/sriov-rdma-vf": gpus}}}]}}


def heavy_pod(containers, tag):
    """A pod of `containers` containers: one asks 2 GPUs + 2 VFs, the rest CPU and memory.
    Each container count is a distinct pod shape (nothing cached)."""
    cs = [{"name": "m", "resources": {"limits": {"amd.com/gpu": 2, "nvidia.com/sriov-rdma-vf": 2}}}]
    cs += [{"name": f"c{c}", "resources": {"limits": {"cpu": "1", "memory": "1Mi"}}} for c in range(1, containers)]
    return {"metadata": {"name": f"heavy-{tag}", "namespace": "hold", "uid": f"uid-heavy-{tag}"},
            "spec": {"containers": cs}}


class HeavyBodies:
    """`args_body(heavy_pod(n, tag), names)` as bytes, made by joining container texts
    serialised once, before the clock starts: one json.dumps of a 10,000-container pod
    holds the GIL for milliseconds, and the timed threads of this same process (ordinary
    calls, /healthz) would wait for it after their answer came, which the load must not
    count against the extender."""

    def __init__(self, names, most):
        self.parts = [json.dumps(c, separators=(",", ":")) for c in heavy_pod(most, "x")["spec"]["containers"]]
        self.names = json.dumps(names)

    def body(self, containers, tag):
        meta = json.dumps(heavy_pod(1, tag)["metadata"])
        pod = '{"metadata":' + meta + ',"spec":{"containers":[' + ",".join(self.parts[:containers]) + "]}}"
        return ('{"Pod":' + pod + ',"Nodes":null,"NodeNames":' + self.names + "}").encode()


def args_body(pod, names=None, nodes=None):
    if nodes is not None:
        return json.dumps({"Pod": pod, "Nodes": {"items": nodes}, "NodeNames": None}).encode()
    return json.dumps({"Pod": pod, "Nodes": None, "NodeNames": names}).encode()


class Client:
    """One kept-alive HTTP/1.1 connection (as the scheduler keeps one); reconnects after
    an error. `call` returns (status, seconds, body or None)."""

    def __init__(self, url, timeout=10):
        self.host, self.port = hostport(url)
        self.timeout = timeout
        self.conn = None

    def call(self, method, path, body=None):
        t0 = time.monotonic()
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            hdr = {"Content-Type": "application/json"} if body is not None else {}
            self.conn.request(method, path, body=body, headers=hdr)
            r = self.conn.getresponse()
            data = r.read()
            if r.getheader("connection", "").lower() == "close":
                self.conn.close()
                self.conn = None
            return r.status, time.monotonic() - t0, data
        except (OSError, http.client.HTTPException):
            if self.conn is not None:
                self.conn.close()
            self.conn = None
            return 0, time.monotonic() - t0, None

    def close(self):
        if self.conn is not None:
            self.conn.close()


def fresh_call(url, method, path, body=None, timeout=10):
    c = Client(url, timeout)
    try:
        return c.call(method, path, body)
    finally:
        c.close()


# ---------------------------------------------------------------- load


def cmd_load(a):
    names = [n["metadata"]["name"] for n in json.load(open(a.names))["items"]]
    new_nodes = json.load(open(a.new_nodes))["items"]
    stop = threading.Event()
    lock = threading.Lock()
    heavy_in_flight = [0]
    res = {"health": [], "ordinary": [], "heavy": [], "probe": [], "errors": []}
    created, known = {}, {}
    bodies = HeavyBodies(names, a.containers + 100 * a.heavy + 1000)
    # The joined body is the dumped one (checked once, before the clock).
    tag = "check"
    if json.loads(bodies.body(a.containers, tag)) != json.loads(args_body(heavy_pod(a.containers, tag), names)):
        raise SystemExit("hold.py: HeavyBodies differs from args_body(heavy_pod(...))")
    t_end = time.monotonic() + a.duration

    def note(kind, status, secs):
        with lock:
            busy = heavy_in_flight[0] > 0
            res[kind].append((status, secs, busy))

    def heavy(k):
        c = Client(a.ext, timeout=30)
        shape = 0
        while not stop.is_set() and time.monotonic() < t_end and shape < 1000:
            body = bodies.body(a.containers + 100 * k + shape, f"{k}-{shape}")
            shape += 1
            with lock:
                heavy_in_flight[0] += 1
            status, secs, _ = c.call("POST", "/filter", body)
            with lock:
                heavy_in_flight[0] -= 1
            note("heavy", status, secs)

    def health():
        while not stop.is_set() and time.monotonic() < t_end + 1:
            status, secs, _ = fresh_call(a.ext, "GET", "/healthz", timeout=10)
            note("health", status, secs)
            time.sleep(0.02)

    def ordinary():
        c = Client(a.ext)
        k = 0
        while not stop.is_set() and time.monotonic() < t_end + 1:
            gpus = (1, 2, 4, 8)[k % 4]
            verb = "/filter" if k % 2 == 0 else "/prioritize"
            status, secs, _ = c.call("POST", verb, args_body(small_pod(f"p{k}", gpus), names))
            note("ordinary", status, secs)
            k += 1
            time.sleep(0.01)

    def creator():
        api = api_of(a)
        time.sleep(min(2.0, a.duration / 4))  # heavy pods are being judged by now
        gap = max(0.05, (a.duration - 4) / max(1, len(new_nodes)))
        for n in new_nodes:
            if stop.is_set() or time.monotonic() > t_end:
                break
            try:
                api.call("POST", "/api/v1/nodes", n, ok=(201,))
                with lock:
                    created[n["metadata"]["name"]] = time.monotonic()
            except RuntimeError as e:
                res["errors"].append(f"creating a Node: {e}")
            time.sleep(gap)

    def prober():
        c = Client(a.ext)
        pod = small_pod("probe", 9)  # 9 GPUs: no mi300x-8 can hold it; an unknown node passes
        deadline = t_end + a.known_wait
        while time.monotonic() < deadline:
            with lock:
                pending = [n for n in created if n not in known]
                done = len(created) == len(new_nodes) or time.monotonic() > t_end
            if not pending and done:
                break
            if pending:
                status, secs, data = c.call("POST", "/filter", args_body(pod, pending))
                note("probe", status, secs)
                now = time.monotonic()
                if status == 200 and data:
                    out = json.loads(data)
                    for m in (out.get("FailedNodes") or {}, out.get("FailedAndUnresolvableNodes") or {}):
                        for n in m:
                            with lock:
                                known.setdefault(n, now)
            time.sleep(0.05)

    threads = [threading.Thread(target=heavy, args=(k,)) for k in range(a.heavy)]
    threads += [threading.Thread(target=f) for f in (health, ordinary, creator, prober)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(a.duration + a.known_wait + 40)
    stop.set()

    def summary(kind, busy_only):
        rows = [r for r in res[kind] if r[2] or not busy_only]
        return {**stats([r[1] for r in rows]),
                "non_200": sum(1 for r in rows if r[0] != 200),
                "over_5s": sum(1 for r in rows if r[1] > 5.0 or r[0] == 0)}

    lat = [known[n] - created[n] for n in created if n in known]
    out = {
        "health_busy": summary("health", True),
        "ordinary_busy": summary("ordinary", True),
        "health_all": summary("health", False),
        "ordinary_all": summary("ordinary", False),
        "heavy": summary("heavy", False),
        "probe": summary("probe", False),
        "nodes": {"to_create": len(new_nodes), "created": len(created), "known": len(lat),
                  "not_known": sorted(n for n in created if n not in known)[:5], **stats(lat)},
        "errors": res["errors"][:5],
    }
    json.dump(out, open(a.out, "w"), indent=1)
    print(json.dumps(out))


# ---------------------------------------------------------------- slow clients

KINDS = ("idle", "head", "trickle", "body")


def opening(kind, post):
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
    if kind == "idle":
        return b""
    if kind in ("head", "trickle"):
        return head[:20] if kind == "head" else head[:1]
    if post:
        return b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"Pod\": {"
    return b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789"


def cmd_slow(a):
    targets = []
    for t in a.target:
        name, rest = t.split("=", 1)
        parts = rest.split(":")
        targets.append((name, parts[0], int(parts[1]), len(parts) > 2 and parts[2] == "post"))
    sel = selectors.DefaultSelector()
    conns = []  # [target, kind, sock, opened, closed or None, head bytes left]
    refused_at_connect = {}
    for name, host, port, post in targets:
        for kind in KINDS:
            for _ in range(a.per_kind):
                s = socket.socket()
                s.settimeout(5)
                try:
                    s.connect((host, port))
                    first = opening(kind, post)
                    if first:
                        s.sendall(first)
                except OSError:
                    refused_at_connect[name] = refused_at_connect.get(name, 0) + 1
                    s.close()
                    continue
                s.setblocking(False)
                rec = [name, kind, s, time.monotonic(), None, b"GET /healthz HTTP/1.1\r\nHost: x\r\n"[1:]]
                conns.append(rec)
                sel.register(s, selectors.EVENT_READ, rec)
    log(f"{len(conns)} slow connections open")
    if a.ready:
        open(a.ready, "w").write(f"{len(conns)}\n")
    health = {name: [] for name, *_ in targets}
    t_end = time.monotonic() + a.limit
    next_tick = time.monotonic()
    while time.monotonic() < t_end and any(r[4] is None for r in conns):
        for key, _ in sel.select(timeout=0.05):
            rec = key.data
            try:
                data = rec[2].recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                rec[4] = time.monotonic()
                sel.unregister(rec[2])
                rec[2].close()
        if time.monotonic() >= next_tick:
            next_tick += 1.0
            for r in conns:  # one head byte a second, never the end of the head
                if r[1] == "trickle" and r[4] is None and r[5]:
                    try:
                        r[2].send(r[5][:1])
                        r[5] = r[5][1:]
                    except OSError:
                        pass
            if not a.no_health:
                for name, host, port, _ in targets:
                    status, secs, _ = fresh_call(f"http://{host}:{port}", "GET", "/healthz", timeout=5)
                    health[name].append((status, secs))
    out = {}
    for name, *_ in targets:
        t = {"refused_at_connect": refused_at_connect.get(name, 0)}
        for kind in KINDS:
            rs = [r for r in conns if r[0] == name and r[1] == kind]
            closed = [r[4] - r[3] for r in rs if r[4] is not None]
            t[kind] = {"opened": len(rs), "closed": len(closed),
                       "max_close_s": round(max(closed), 2) if closed else None,
                       "min_close_s": round(min(closed), 2) if closed else None}
        h = health[name]
        t["health"] = {**stats([x[1] for x in h]), "non_200": sum(1 for x in h if x[0] != 200)}
        out[name] = t
    for r in conns:
        if r[4] is None:
            r[2].close()
    json.dump(out, open(a.out, "w"), indent=1)
    print(json.dumps(out))


# ---------------------------------------------------------------- large bodies


def proc_status(pid):
    v = {}
    try:
        for line in open(f"/proc/{pid}/status"):
            k, _, rest = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                v[k] = int(rest.split()[0]) / 1024.0  # MiB
    except OSError:
        pass
    return v


def cmd_burst(a):
    base = json.load(open(a.names))["items"]
    # Node objects as a real cluster's: a long status.images list (what makes them big).
    nodes = []
    for n in base:
        n = copy.deepcopy(n)
        n.setdefault("status", {})["images"] = [
            {"names": [f"registry.example/team/image-{k}@sha256:{k:064x}", f"registry.example/team/image-{k}:v1"],
             "sizeBytes": 123456789 + k} for k in range(20)]
        nodes.append(n)
    want = int(a.body_mb * 1e6)
    body = args_body(small_pod("big-body"), nodes=nodes)
    while len(body) < want:  # grow the image lists until the body is as large as asked
        for n in nodes:
            n["status"]["images"].append(copy.deepcopy(n["status"]["images"][0]))
        body = args_body(small_pod("big-body"), nodes=nodes)
    before = proc_status(a.pid)
    try:
        open(f"/proc/{a.pid}/clear_refs", "w").write("5")  # resets VmHWM to VmRSS
        reset = True
    except OSError:
        reset = False
    samples = []
    stop = threading.Event()

    def sampler():
        while not stop.is_set() and len(samples) < 20000:
            s = proc_status(a.pid)
            if "VmRSS" in s:
                samples.append(s["VmRSS"])
            time.sleep(0.01)

    results = []
    gate = threading.Barrier(a.calls, timeout=60)

    def one():
        try:
            gate.wait()
        except threading.BrokenBarrierError:
            pass
        status, secs, data = fresh_call(a.ext, "POST", "/filter", body, timeout=30)
        results.append((status, secs, (data or b"")[:200]))

    st = threading.Thread(target=sampler)
    st.start()
    ts = [threading.Thread(target=one) for _ in range(a.calls)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    during = proc_status(a.pid)
    time.sleep(2)
    after = proc_status(a.pid)
    stop.set()
    st.join(5)
    codes = {}
    for r in results:
        codes[str(r[0])] = codes.get(str(r[0]), 0) + 1
    refusal = next((r[2].decode(errors="replace").strip() for r in results if r[0] not in (200, 0)), "")
    out = {
        "body_bytes": len(body), "calls": a.calls, "codes": codes, "refusal": refusal[:200],
        "latency": stats([r[1] for r in results]),
        "rss_before_mib": round(before.get("VmRSS", 0), 1),
        "rss_max_sampled_mib": round(max(samples), 1) if samples else None,
        "hwm_mib": round(during.get("VmHWM", 0), 1), "hwm_reset": reset,
        "rss_after_2s_mib": round(after.get("VmRSS", 0), 1),
    }
    json.dump(out, open(a.out, "w"), indent=1)
    print(json.dumps(out))


def cmd_heavy_body(a):
    names = [n["metadata"]["name"] for n in json.load(open(a.names))["items"]]
    sys.stdout.buffer.write(args_body(heavy_pod(a.containers, "sigterm"), names))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)

    def api_args(s):
        s.add_argument("--server", required=True, help="API server URL")
        s.add_argument("--ca", required=True)
        s.add_argument("--cert", required=True, help="admin client certificate")
        s.add_argument("--key", required=True)

    s = sub.add_parser("rename")
    s.add_argument("--in", dest="input", required=True)
    s.add_argument("--prefix", required=True)
    s = sub.add_parser("create")
    s.add_argument("--nodes", required=True)
    api_args(s)
    s = sub.add_parser("load")
    s.add_argument("--ext", required=True)
    s.add_argument("--names", required=True)
    s.add_argument("--new-nodes", required=True)
    s.add_argument("--heavy", type=int, default=3)
    s.add_argument("--containers", type=int, default=10000)
    s.add_argument("--duration", type=float, default=20)
    s.add_argument("--known-wait", type=float, default=10, help="s after the load to wait for nodes to be known")
    s.add_argument("--out", required=True)
    api_args(s)
    s = sub.add_parser("slow")
    s.add_argument("--target", action="append", required=True)
    s.add_argument("--per-kind", type=int, default=10)
    s.add_argument("--limit", type=float, default=40)
    s.add_argument("--ready")
    s.add_argument("--no-health", action="store_true")
    s.add_argument("--out", required=True)
    s = sub.add_parser("burst")
    s.add_argument("--ext", required=True)
    s.add_argument("--pid", type=int, required=True)
    s.add_argument("--names", required=True)
    s.add_argument("--calls", type=int, default=200)
    s.add_argument("--body-mb", type=float, default=1.9)
    s.add_argument("--out", required=True)
    s = sub.add_parser("heavy-body")
    s.add_argument("--names", required=True)
    s.add_argument("--containers", type=int, default=10000)
    a = p.parse_args()
    {"rename": cmd_rename, "create": cmd_create, "load": cmd_load, "slow": cmd_slow,
     "burst": cmd_burst, "heavy-body": cmd_heavy_body}[a.cmd](a)


if __name__ == "__main__":
    main()
