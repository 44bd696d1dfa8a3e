#!/usr/bin/env python3
"""The node side of scenario placement: a stream of GPU+NIC pods through a real
kube-scheduler, each bound pod admitted (or not) as its node's kubelet would, and the
node's occupancy reported the way `topoalign agent` reports it.

  placement.py stream --nodes nodes.json --count N --seed S > stream.json
      the pod stream: per pod its kind (amd: amd.com/gpu + nvidia.com/sriov-rdma-vf,
      nvidia: nvidia.com/gpu + rdma/ib, by the nodes' shares of GPUs) and size (1, 2, 4, 8
      GPUs, each with one NIC function).
  placement.py kubelets --nodes nodes.json --kubelets DIR --discover-dir DIR
      DIR/<node>.json with each node's first allocations (for `podresources --dir DIR`).
  placement.py run --nodes nodes.json --stream stream.json --scheduler NAME --tag TAG
                   --ns NS --kubelets DIR --discover-dir DIR --work DIR --out result.json
                   --server URL --ca CA --cert CERT --key KEY [--batch B --lifetime L]
      one pass: creates the Node objects (fresh), publishes each node's first report,
      then per batch of B pods: creates them with schedulerName NAME, waits until each is
      bound or Unschedulable; for each bound pod in stream order runs
      `topoalign tm` (the node's policy and scope from its labels, its pod manifest, the
      devices in use, a seed per pod for the GPU plugins' random choice) — admitted: its devices are taken and its pair classes counted;
      rejected: counted with the reason (TopologyAffinityError …) and the pod deleted, as
      it fails on a real node. Pods of batch i-L leave (deleted, devices freed),
      Unschedulable ones are deleted. Touched nodes' allocations are written to
      DIR/<node>.json (served by the kubelet's pod-resources server code, the Go stand-in
      `podresources --dir DIR`), `topoalign agent --once` reads them and its
      NodeResourceTopology objects are applied (server-side, as the agent applies them).
      At the end everything is deleted again.
  placement.py compare --stock A.json --extender B.json
      FIGURE lines side by side and a VERDICT line (ok: fewer kubelet rejections and a mean
      pair-class rank no worse than stock).
Environment: TOPOALIGN (path of the binary).
"""
import argparse
import collections
import http.client
import json
import os
import random
import ssl
import subprocess
import sys
import tempfile
import zlib
import time
import urllib.parse

sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from podresources import inventory  # noqa: E402  (one inventory reader for both scenarios)

TOPOALIGN = os.environ.get("TOPOALIGN", "topoalign")
NRT_PATH = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
CLASSES = ["PIX", "PXB", "PHB", "NODE", "SYS"]
SIZES = [1, 2, 4, 8]
SIZE_WEIGHTS = [4, 3, 2, 1]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] placement: {msg}", file=sys.stderr, flush=True)


class Api:
    """The API server over one kept-alive HTTPS connection with the admin client certificate
    (kubectl runs one process and a few throttled requests per call: far too slow for 2,000
    pods). Errors name the call and carry the server's message."""

    def __init__(self, server, ca, cert, key):
        u = urllib.parse.urlparse(server)
        self.host, self.port = u.hostname, u.port
        self.ctx = ssl.create_default_context(cafile=ca)
        self.ctx.load_cert_chain(cert, key)
        self.conn = None

    def call(self, method, path, body=None, ctype="application/json", ok=(200, 201, 202)):
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(3):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=60)
                hdr = {"Accept": "application/json"}
                if data is not None:
                    hdr["Content-Type"] = ctype
                self.conn.request(method, path, body=data, headers=hdr)
                r = self.conn.getresponse()
                text = r.read()
                break
            except (OSError, http.client.HTTPException) as e:
                self.conn = None
                if attempt == 2:
                    raise RuntimeError(f"{method} {path}: {e}") from e
        if r.status not in ok:
            raise RuntimeError(f"{method} {path}: HTTP {r.status}: {text[:600].decode(errors='replace')}")
        return json.loads(text) if text else None

    def q(self, **params):
        return "?" + urllib.parse.urlencode(params)


def write_atomic(path, text):
    d = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def load_nodes(path):
    items = json.load(open(path))["items"]
    out = []
    for n in items:
        lab = n["metadata"]["labels"]
        used = json.loads(n["metadata"].get("annotations", {}).get("topoalign.dev/used", "{}"))
        out.append({
            "name": n["metadata"]["name"],
            "profile": lab["topoalign.dev/profile"],
            "policy": lab.get("topoalign.dev/topology-manager-policy", "none"),
            "scope": lab.get("topoalign.dev/topology-manager-scope", "container"),
            "used_gpus": used.get("gpus", []),
            "used_nics": used.get("nics", []),
            "manifest": n,
        })
    return out


def cmd_stream(a):
    nodes = load_nodes(a.nodes)
    gpus = collections.Counter()
    for n in nodes:
        kind = "amd" if n["profile"].startswith("mi300x") else "nvidia"
        gpus[kind] += int(n["manifest"]["status"]["capacity"].get("amd.com/gpu" if kind == "amd" else "nvidia.com/gpu", 0))
    rng = random.Random(a.seed)
    kinds = sorted(gpus)
    weights = [gpus[k] for k in kinds]
    stream = [{"index": i, "kind": rng.choices(kinds, weights)[0], "gpus": rng.choices(SIZES, SIZE_WEIGHTS)[0]}
              for i in range(a.count)]
    json.dump(stream, sys.stdout)



def poll(done, deadline, every=0.3):
    """Calls `done()` every `every` seconds until it returns true or the clock passes
    `deadline` (a time.time() value): whether it did."""
    while not done():
        if time.time() >= deadline:
            return False
        time.sleep(every)
    return True


def wait_decided(api, pods_path, selector, names, timeout, unschedulable=lambda cond: True):
    """Polls the pods matching `selector` until each of `names` is bound or marked
    Unschedulable (PodScheduled False, reason Unschedulable, and `unschedulable(cond)`),
    for at most `timeout` seconds: {name: ("bound" | "unschedulable", pod) or
    ("undecided", None)}. Used by both placement scenarios."""
    t0 = time.time()
    pending = set(names)
    decided = {}
    while pending and time.time() - t0 < timeout:
        time.sleep(0.3)
        for p in api.call("GET", pods_path + api.q(labelSelector=selector))["items"]:
            n = p["metadata"]["name"]
            if n not in pending:
                continue
            if p["spec"].get("nodeName"):
                decided[n] = ("bound", p)
                pending.discard(n)
                continue
            for c in p.get("status", {}).get("conditions", []):
                if (c.get("type") == "PodScheduled" and c.get("status") == "False"
                        and c.get("reason") == "Unschedulable" and unschedulable(c)):
                    decided[n] = ("unschedulable", p)
                    pending.discard(n)
    for n in pending:
        decided[n] = ("undecided", None)
    return decided

class Node:
    """A simulated node: its inventory and who holds what."""

    def __init__(self, spec, disc):
        self.spec = spec
        self.name = spec["name"]
        gpus, nics, self.gres, self.nres = inventory(disc)
        self.gpu_items = gpus
        self.nic_items = nics
        self.id_of = {x[1]: x[0] for x in gpus + nics}
        self.numa_of = {x[1]: x[2] for x in gpus + nics}
        self.gpu_bdfs = {x[1] for x in gpus}
        # pod key -> (gpu bdfs, nic bdfs); the synthetic occupancy is one pre-existing pod
        self.holders = {"occupied/initial": (list(spec["used_gpus"]), list(spec["used_nics"]))}

    def used(self):
        g, n = [], []
        for gs, ns in self.holders.values():
            g.extend(gs)
            n.extend(ns)
        return {"gpus": sorted(g), "nics": sorted(n)}

    def dev(self, res, bdf):
        numa = self.numa_of[bdf]
        return {"resource": res, "id": self.id_of[bdf], "numa": [numa] if numa >= 0 else []}

    def allocations(self):
        pods = []
        for k, (gs, ns) in sorted(self.holders.items()):
            nsp, name = k.split("/", 1)
            pods.append({"namespace": nsp, "name": name, "uid": "uid-" + k.replace("/", "-"),
                         "containers": [{"name": "main",
                                         "devices": [self.dev(self.gres, b) for b in gs] + [self.dev(self.nres, b) for b in ns],
                                         "cpus": [], "memory": []}]})
        return {"allocatable": {"devices": [self.dev(self.gres, x[1]) for x in self.gpu_items]
                                + [self.dev(self.nres, x[1]) for x in self.nic_items],
                                "cpus": [], "memory": []},
                "pods": pods}


def pod_manifest(p, ns, sched, tag, batch):
    g = "amd.com/gpu" if p["kind"] == "amd" else "nvidia.com/gpu"
    n = "nvidia.com/sriov-rdma-vf" if p["kind"] == "amd" else "rdma/ib"
    lim = {g: str(p["gpus"]), n: str(p["gpus"])}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{tag}-{p['index']:05d}", "namespace": ns,
                         "labels": {"placement-run": tag, "placement-batch": str(batch)},
                         "annotations": {"placement/index": str(p["index"])}},
            "spec": {"schedulerName": sched, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"limits": lim, "requests": lim}}]}}


class Run:
    def __init__(self, a):
        self.a = a
        self.specs = load_nodes(a.nodes)
        self.stream = json.load(open(a.stream))
        disc = {}
        for s in self.specs:
            if s["profile"] not in disc:
                disc[s["profile"]] = json.load(open(os.path.join(a.discover_dir, s["profile"] + ".json")))
        self.nodes = {s["name"]: Node(s, disc[s["profile"]]) for s in self.specs}
        self.tmp = os.path.join(a.work, a.tag)
        os.makedirs(self.tmp, exist_ok=True)
        self.stats = collections.Counter()
        self.classes = collections.Counter()
        self.by_size = collections.defaultdict(collections.Counter)
        self.reasons = collections.Counter()
        self.live = {}  # pod name -> (node, batch)
        self.per_pod = {}  # stream index -> pair classes of the admitted pod
        self.rejections = []
        self.timing = collections.Counter()
        self.api = Api(a.server, a.ca, a.cert, a.key)
        self.pods_path = f"/api/v1/namespaces/{a.ns}/pods"

    # -- the agent's side --------------------------------------------------------------
    def publish(self, names):
        t = time.time()
        objs = []
        for name in sorted(names):
            node = self.nodes[name]
            write_atomic(os.path.join(self.a.kubelets, name + ".json"), json.dumps(node.allocations()))
            r = subprocess.run([TOPOALIGN, "agent", "--once", "--profile", node.spec["profile"], "--node", name,
                                "--socket", os.path.join(self.a.kubelets, name + ".sock"),
                                "--policy", node.spec["policy"], "--scope", node.spec["scope"], "-o", "json"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"topoalign agent --once for {name}: {r.stderr.strip()[:600]}")
            out = json.loads(r.stdout)
            want = node.used()
            got = out["report"]["used"]
            if sorted(got["gpus"]) != want["gpus"] or sorted(got["nics"]) != want["nics"]:
                raise RuntimeError(f"agent report of {name} differs from the node's allocations: {got} vs {want}")
            objs.append(out["nodeResourceTopology"])
        for o in objs:  # server-side apply, field manager and force as the agent's publish does
            self.api.call("PATCH", f"{NRT_PATH}/{o['metadata']['name']}" + self.api.q(fieldManager="topoalign-agent", force="true"),
                          o, ctype="application/apply-patch+yaml")
        self.timing["agent_publish_s"] += time.time() - t
        self.stats["nrt_publishes"] += len(objs)

    # -- the kubelet's side ------------------------------------------------------------
    def admit(self, pod, node):
        pf = os.path.join(self.tmp, "pod.json")
        uf = os.path.join(self.tmp, "used.json")
        with open(pf, "w") as f:
            json.dump(pod, f)
        with open(uf, "w") as f:
            json.dump(node.used(), f)
        # The GPU plugins hand out devices in Go's random set order: each admission is its
        # own draw (seeded by the pod's stream index, so both passes draw alike for a pod).
        seed = zlib.crc32(pod["metadata"]["name"].rsplit("-", 1)[-1].encode())
        r = subprocess.run([TOPOALIGN, "tm", "--profile", node.spec["profile"], "--policy", node.spec["policy"],
                            "--scope", node.spec["scope"], "--pod", pf, "--used", uf, "--seed", str(seed), "-o", "json"],
                           capture_output=True, text=True)
        if r.returncode not in (0, 1) or not r.stdout.strip():
            raise RuntimeError(f"topoalign tm for {pod['metadata']['name']} on {node.name}: rc {r.returncode}: {r.stderr.strip()[:600]}")
        return json.loads(r.stdout)

    def node_side(self, bound):
        """bound: [(stream index, pod object, node name)] in stream order."""
        t = time.time()
        touched, gone = set(), []
        for idx, pod, nname in bound:
            node = self.nodes[nname]
            size = self.stream[idx]["gpus"]
            res = self.admit(pod, node)
            name = pod["metadata"]["name"]
            if not res.get("admitted"):
                self.stats["tm_rejected"] += 1
                self.by_size[size]["tm_rejected"] += 1
                self.reasons[res.get("reason") or "unknown"] += 1
                self.rejections.append({"index": idx, "pod": name, "node": nname, "policy": node.spec["policy"],
                                        "gpus": size, "batch": self.batch, "message": res.get("message")})
                gone.append(name)
                continue
            gs, ns = [], []
            for alloc in res.get("allocations", []):
                for resname, devs in alloc.get("devices", []):
                    for d in devs:
                        (gs if d["bdf"] in node.gpu_bdfs else ns).append(d["bdf"])
            node.holders[f"{self.a.ns}/{name}"] = (gs, ns)
            touched.add(nname)
            self.stats["admitted"] += 1
            self.by_size[size]["admitted"] += 1
            cls = [p["class"] for p in res.get("pairs", [])]
            for c in cls:
                self.classes[c] += 1
            self.per_pod[str(idx)] = cls
            self.live[name] = (nname, self.batch)
        self.timing["kubelet_tm_s"] += time.time() - t
        return touched, gone

    def retire(self, before_batch):
        touched, gone = set(), []
        for name, (nname, b) in list(self.live.items()):
            if b < before_batch:
                self.nodes[nname].holders.pop(f"{self.a.ns}/{name}", None)
                del self.live[name]
                touched.add(nname)
                gone.append(name)
        return touched, gone

    # -- the loop ----------------------------------------------------------------------
    def wait_decided(self, names):
        t0 = time.time()
        decided = wait_decided(self.api, self.pods_path, f"placement-run={self.a.tag},placement-batch={self.batch}",
                               names, self.a.decide_timeout)
        self.timing["scheduling_wait_s"] += time.time() - t0
        return decided

    def delete_pods(self, names):
        t = time.time()
        for n in names:  # as `kubectl delete --force --grace-period=0`: no kubelet confirms
            self.api.call("DELETE", f"{self.pods_path}/{n}", {"gracePeriodSeconds": 0}, ok=(200, 202, 404))
        self.timing["delete_s"] += time.time() - t

    def setup_nodes(self):
        t = time.time()
        ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        items = []
        for s in self.specs:
            m = json.loads(json.dumps(s["manifest"]))
            m["status"]["conditions"] = [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                          "message": "e2e node (no kubelet)", "lastHeartbeatTime": ts,
                                          "lastTransitionTime": ts}]
            self.api.call("POST", "/api/v1/nodes", m)
            # The TaintNodesByCondition admission adds node.kubernetes.io/not-ready on create; a
            # kubelet would clear it.
            self.api.call("PATCH", f"/api/v1/nodes/{s['name']}", {"spec": {"taints": None}},
                          ctype="application/merge-patch+json")
        self.publish(self.nodes.keys())
        self.timing["setup_s"] += time.time() - t

    def teardown(self):
        t = time.time()
        self.api.call("DELETE", self.pods_path + self.api.q(gracePeriodSeconds=0))
        self.api.call("DELETE", NRT_PATH)
        self.api.call("DELETE", "/api/v1/nodes" + self.api.q(labelSelector="topoalign.dev/profile"))
        nodes = "/api/v1/nodes" + self.api.q(labelSelector="topoalign.dev/profile")
        if not poll(lambda: not self.api.call("GET", self.pods_path)["items"]
                    and not self.api.call("GET", nodes)["items"], t + 60):
            raise RuntimeError("pods or nodes of the pass still exist 60 s after deleting them")
        self.timing["teardown_s"] += time.time() - t

    def run(self):
        t_all = time.time()
        self.setup_nodes()
        B = self.a.batch
        nb = (len(self.stream) + B - 1) // B
        for self.batch in range(nb):
            chunk = self.stream[self.batch * B:(self.batch + 1) * B]
            pods = [pod_manifest(p, self.a.ns, self.a.scheduler, self.a.tag, self.batch) for p in chunk]
            t = time.time()
            for pod in pods:
                self.api.call("POST", self.pods_path, pod)
            self.timing["create_s"] += time.time() - t
            self.stats["created"] += len(pods)
            decided = self.decide_batch(pods)
            bound = []
            drop = []
            for p, spec in zip(pods, chunk):
                n = p["metadata"]["name"]
                state, obj = decided[n]
                if state == "bound":
                    self.stats["bound"] += 1
                    bound.append((spec["index"], obj, obj["spec"]["nodeName"]))
                else:
                    self.stats[state] += 1
                    self.by_size[spec["gpus"]][state] += 1
                    drop.append(n)
            touched, rejected = self.node_side(bound)
            t2, retired = self.retire(self.batch - self.a.lifetime + 1)
            self.delete_pods(drop + rejected + retired)
            self.publish(touched | t2)
            log(f"{self.a.tag} batch {self.batch + 1}/{nb}: {dict(self.stats)}")
        self.timing["total_s"] = time.time() - t_all
        self.teardown()
        return {
            "tag": self.a.tag,
            "scheduler": self.a.scheduler,
            "stats": dict(self.stats),
            "classes": {c: self.classes.get(c, 0) for c in CLASSES},
            "bySize": {str(k): dict(v) for k, v in sorted(self.by_size.items())},
            "rejectReasons": dict(self.reasons),
            "perPod": self.per_pod,
            "rejections": self.rejections,
            "timing": {k: round(v, 2) for k, v in self.timing.items()},
        }

    def decide_batch(self, pods):
        return self.wait_decided([p["metadata"]["name"] for p in pods])


def cmd_kubelets(a):
    """The first allocations of every node (the synthetic occupancy), before the stand-in starts."""
    disc = {}
    os.makedirs(a.kubelets, exist_ok=True)
    for s in load_nodes(a.nodes):
        if s["profile"] not in disc:
            disc[s["profile"]] = json.load(open(os.path.join(a.discover_dir, s["profile"] + ".json")))
        write_atomic(os.path.join(a.kubelets, s["name"] + ".json"), json.dumps(Node(s, disc[s["profile"]]).allocations()))


def mean_rank(classes):
    n = sum(classes.values())
    return sum(CLASSES.index(c) * k for c, k in classes.items()) / n if n else float("nan")


def cmd_compare(a):
    """FIGURE lines for both runs side by side and one VERDICT line."""
    s, e = json.load(open(a.stock)), json.load(open(a.extender))

    def row(label, f):
        print(f"FIGURE placement {label}: stock {f(s)} | extender {f(e)}")

    st = lambda r, k: r["stats"].get(k, 0)  # noqa: E731
    row("pods", lambda r: f'{st(r, "created")} created, {st(r, "bound")} bound, {st(r, "unschedulable")} unschedulable, {st(r, "undecided")} undecided')
    row("kubelet Topology Manager", lambda r: f'{st(r, "admitted")} admitted, {st(r, "tm_rejected")} rejected {r["rejectReasons"] or ""}')
    row("pods that did not run (rejected + unschedulable)", lambda r: st(r, "tm_rejected") + st(r, "unschedulable") + st(r, "undecided"))

    def dist(r):
        c = r["classes"]
        n = sum(c.values()) or 1
        return " ".join(f"{k}×{c[k]} ({100 * c[k] / n:.1f}%)" for k in CLASSES) + f", mean rank {mean_rank(c):.3f}"
    row("pair classes of admitted pods", dist)
    for size in sorted({*s["bySize"], *e["bySize"]}, key=int):
        row(f"{size}-GPU pods", lambda r: " ".join(f"{k} {v}" for k, v in sorted(r["bySize"].get(size, {}).items())))
    row("wall time (s)", lambda r: f'{r["timing"].get("total_s")} ({", ".join(f"{k} {v}" for k, v in r["timing"].items() if k != "total_s")})')
    both = sorted(set(s["perPod"]) & set(e["perPod"]), key=int)
    paired = {t: collections.Counter(c for i in both for c in r["perPod"][i]) for t, r in (("s", s), ("e", e))}
    better = sum(1 for i in both if sum(map(CLASSES.index, e["perPod"][i])) < sum(map(CLASSES.index, s["perPod"][i])))
    worse = sum(1 for i in both if sum(map(CLASSES.index, e["perPod"][i])) > sum(map(CLASSES.index, s["perPod"][i])))
    print(f"FIGURE placement pods admitted in both passes ({len(both)}): mean pair-class rank stock {mean_rank(paired['s']):.3f} | "
          f"extender {mean_rank(paired['e']):.3f}; the extender's pairs better for {better} pods, worse for {worse}")
    for t, r in (("stock", s), ("extender", e)):
        by = collections.Counter(f'{x["policy"]} {x["gpus"]}-GPU' for x in r.get("rejections", []))
        if by:
            print(f"INFO placement {t} pass: kubelet rejections by node policy and pod size: "
                  + ", ".join(f"{k}: {v}" for k, v in sorted(by.items())))
    rs, re_ = st(s, "tm_rejected"), st(e, "tm_rejected")
    ms, me = mean_rank(s["classes"]), mean_rank(e["classes"])
    ps, pe = mean_rank(paired["s"]), mean_rank(paired["e"])
    tm_ok = re_ < rs
    cls_ok = me <= ms and (not both or pe <= ps)
    text = (f"TopologyAffinityError and other kubelet rejections {re_} with the extender vs {rs} stock; "
            f"mean pair-class rank (PIX=0 … SYS=4) {me:.3f} vs {ms:.3f} over all admitted pods, "
            f"{pe:.3f} vs {ps:.3f} over the {len(both)} pods admitted in both passes")
    print(f"VERDICT {'ok' if tm_ok and cls_ok else 'worse'} {text}")


def cmd_run(a):
    res = Run(a).run()
    json.dump(res, open(a.out, "w"), indent=1)
    print(json.dumps(res))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stream")
    s.add_argument("--nodes", required=True)
    s.add_argument("--count", type=int, default=2000)
    s.add_argument("--seed", type=int, default=1)
    s = sub.add_parser("compare")
    s.add_argument("--stock", required=True)
    s.add_argument("--extender", required=True)
    s = sub.add_parser("kubelets")
    s.add_argument("--nodes", required=True)
    s.add_argument("--kubelets", required=True)
    s.add_argument("--discover-dir", required=True)
    s = sub.add_parser("run")
    s.add_argument("--nodes", required=True)
    s.add_argument("--stream", required=True)
    s.add_argument("--scheduler", required=True)
    s.add_argument("--tag", required=True)
    s.add_argument("--ns", required=True)
    s.add_argument("--kubelets", required=True)
    s.add_argument("--discover-dir", required=True)
    s.add_argument("--work", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--batch", type=int, default=100)
    s.add_argument("--lifetime", type=int, default=2)
    s.add_argument("--decide-timeout", type=float, default=120)
    s.add_argument("--server", required=True, help="API server URL")
    s.add_argument("--ca", required=True)
    s.add_argument("--cert", required=True, help="admin client certificate")
    s.add_argument("--key", required=True)
    a = p.parse_args()
    {"stream": cmd_stream, "kubelets": cmd_kubelets, "run": cmd_run, "compare": cmd_compare}[a.cmd](a)


if __name__ == "__main__":
    main()
