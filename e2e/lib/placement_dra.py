#!/usr/bin/env python3
"""The DRA half of the placement proof: DRA nodes whose ResourceSlices come from
`topoalign driver --dry-run`, random pre-occupancy held by real allocated claims, and a
seeded stream of pods with `gpu-nic-pair.topoalign.dev` claim templates through a real
kube-scheduler, with and without `topoalign extender`.

  placement_dra.py setup --count N --seed S --profiles P,Q --ns NS --out nodes.json [api]
      creates the Nodes (labels kubernetes.io/hostname, topoalign.dev/profile), the
      driver's DeviceClasses and each node's ResourceSlices, and the claim templates
      (`topoalign claims --pairs K [--max-class PXB]`); writes per node its profile, GPUs,
      physical NICs and the rank of every pair device.
  placement_dra.py stream --count N --seed S > stream.json
      per pod: its size (1, 2, 4, 8 pairs; weights 4:3:2:1) and whether it requires a
      PXB-or-better class (rank <= 1; 1 and 2 pairs, one pod in six).
  placement_dra.py run --nodes nodes.json --stream stream.json --scheduler NAME --tag TAG
                       --ns NS --seed S --out result.json [--batch B --lifetime L] [api]
      one pass: pre-occupancy first (per node, seeded: up to half its GPUs and up to two
      NICs held by one claim of plain gpu/nic devices chosen by PCI address, its pod
      scheduled by default-scheduler onto that node), then per batch of B pods: created
      with schedulerName NAME, waited until bound or Unschedulable; the ranks of the pair
      devices the scheduler allocated are read from the claim
      (status.allocation.devices.results) and the node's slices. Pods of batch i-L leave
      (deleted; their generated claims are deleted by the resourceclaim controller and
      waited for), Unschedulable ones are deleted. At the end everything of the pass is
      deleted again, so the next pass starts from the same state.
  placement_dra.py cleanup [api]
      deletes the scenario's Nodes and their ResourceSlices.
  placement_dra.py compare --stock A.json --extender B.json
      FIGURE lines side by side and a VERDICT line (ok: mean rank no worse and no more
      unschedulable pods than stock).
  [api]: --server URL --ca CA --cert CERT --key KEY (the admin client certificate)
Environment: TOPOALIGN (path of the binary).
"""
import argparse
import collections
import json
import os
import random
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the checkout
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from placement import Api, poll, wait_decided  # noqa: E402  (one API client and wait loop for both scenarios)

TOPOALIGN = os.environ.get("TOPOALIGN", "topoalign")
CLASSES = ["PIX", "PXB", "PHB", "NODE", "SYS"]
SIZES = [1, 2, 4, 8]
SIZE_WEIGHTS = [4, 3, 2, 1]
PXB_SIZES = (1, 2)
DRIVER = "topoalign.dev"
PCI = "resource.kubernetes.io/pciBusID"
NODE_LABEL = "e2e.topoalign.dev/placement-dra"  # the scenario's nodes (others may exist)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] placement-dra: {msg}", file=sys.stderr, flush=True)


def api_of(a):
    return Api(a.server, a.ca, a.cert, a.key)


def template_name(size, pxb):
    return f"dra-pairs-{size}" + ("-pxb" if pxb else "")


def attr(dev, name):
    v = dev.get("attributes", {}).get(name, {})
    return v.get("int", v.get("string", v.get("bool")))


def cmd_setup(a):
    api = api_of(a)
    profiles = a.profiles.split(",")
    ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    nodes = []
    classes_done = False
    for i in range(a.count):
        profile = profiles[i % len(profiles)]
        name = f"dra-{i:03d}-{profile}"
        api.call("POST", "/api/v1/nodes", {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  "topoalign.dev/profile": profile, NODE_LABEL: "true"}},
            "status": {"capacity": {"pods": "110", "cpu": "64", "memory": "512Gi"},
                       "allocatable": {"pods": "110", "cpu": "64", "memory": "512Gi"},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "e2e node (no kubelet)", "lastHeartbeatTime": ts,
                                       "lastTransitionTime": ts}]}})
        # TaintNodesByCondition adds node.kubernetes.io/not-ready on create; a kubelet clears it.
        api.call("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}}, ctype="application/merge-patch+json")
        r = subprocess.run([TOPOALIGN, "driver", "--dry-run", "-o", "json", "--profile", profile, "--node-name", name],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"topoalign driver --dry-run --profile {profile} --node-name {name}: {r.stderr.strip()[:600]}")
        ranks, gpus, nics = {}, [], []
        for o in json.loads(r.stdout)["items"]:
            if o["kind"] == "DeviceClass":
                if not classes_done:
                    api.call("POST", "/apis/resource.k8s.io/v1/deviceclasses", o, ok=(201, 409))
                continue
            api.call("POST", "/apis/resource.k8s.io/v1/resourceslices", o)
            for d in o["spec"].get("devices", []):
                kind = attr(d, "type")
                if kind == "pair":
                    ranks[d["name"]] = [attr(d, "rank"), attr(d, "class")]
                elif kind == "gpu":
                    gpus.append(attr(d, PCI))
                elif kind == "nic":
                    nics.append(attr(d, PCI))
        classes_done = True
        nodes.append({"name": name, "profile": profile, "ranks": ranks, "gpus": sorted(gpus), "nics": sorted(nics)})
    for size in SIZES:
        for pxb in (False, True):
            if pxb and size not in PXB_SIZES:
                continue
            args = [TOPOALIGN, "claims", "--pairs", str(size), "--name", template_name(size, pxb), "-o", "json"]
            if pxb:
                args += ["--max-class", "PXB"]
            r = subprocess.run(args, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"{' '.join(args[1:])}: {r.stderr.strip()[:600]}")
            api.call("POST", f"/apis/resource.k8s.io/v1/namespaces/{a.ns}/resourceclaimtemplates", json.loads(r.stdout))
    json.dump(nodes, open(a.out, "w"))


def cmd_cleanup(a):
    api = api_of(a)
    names = {n["metadata"]["name"] for n in api.call("GET", "/api/v1/nodes" + api.q(labelSelector=NODE_LABEL))["items"]}
    for sl in api.call("GET", "/apis/resource.k8s.io/v1/resourceslices")["items"]:
        if sl["spec"].get("nodeName") in names:
            api.call("DELETE", f"/apis/resource.k8s.io/v1/resourceslices/{sl['metadata']['name']}", ok=(200, 202, 404))
    for n in sorted(names):
        api.call("DELETE", f"/api/v1/nodes/{n}", ok=(200, 202, 404))
    print(f"deleted {len(names)} nodes and their slices")


def cmd_stream(a):
    rng = random.Random(a.seed)
    out = []
    for i in range(a.count):
        size = rng.choices(SIZES, SIZE_WEIGHTS)[0]
        pxb = size in PXB_SIZES and rng.random() < 1 / 6
        out.append({"index": i, "pairs": size, "pxb": pxb})
    json.dump(out, sys.stdout)


class Pass:
    def __init__(self, a):
        self.a = a
        self.api = api_of(a)
        self.nodes = {n["name"]: n for n in json.load(open(a.nodes))}
        self.stream = json.load(open(a.stream))
        self.pods = f"/api/v1/namespaces/{a.ns}/pods"
        self.claims = f"/apis/resource.k8s.io/v1/namespaces/{a.ns}/resourceclaims"
        self.stats = collections.Counter()
        self.classes = collections.Counter()
        self.ranks = []
        self.by_size = collections.defaultdict(collections.Counter)
        self.by_profile = collections.Counter()
        self.live = {}  # pod name -> batch
        self.timing = collections.Counter()

    def pod(self, name, labels, claims, sched, node=None):
        spec = {"schedulerName": sched, "terminationGracePeriodSeconds": 0, "resourceClaims": claims,
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"claims": [{"name": c["name"]} for c in claims]}}]}
        spec["nodeSelector"] = {"kubernetes.io/hostname": node} if node else {NODE_LABEL: "true"}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": self.a.ns, "labels": labels},
                "spec": spec}

    def occupy(self):
        """Per node, seeded: some GPUs and NICs held by one allocated claim."""
        t = time.time()
        names = []
        held = 0
        for name in sorted(self.nodes):
            n = self.nodes[name]
            rng = random.Random(f"{self.a.seed}-{name}")
            gpus = rng.sample(n["gpus"], rng.randint(0, len(n["gpus"]) // 2))
            nics = rng.sample(n["nics"], min(len(n["nics"]), rng.randint(0, 2)))
            reqs = []
            for cls, bdfs in (("gpu", gpus), ("nic", nics)):
                for i, b in enumerate(bdfs):
                    expr = f'device.attributes["resource.kubernetes.io"].pciBusID == "{b}"'
                    reqs.append({"name": f"{cls}{i}", "exactly": {"deviceClassName": f"{cls}.{DRIVER}",
                                                                  "selectors": [{"cel": {"expression": expr}}]}})
            if not reqs:
                continue
            held += len(gpus)
            cname = f"occ-{name}"
            self.api.call("POST", self.claims, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                                "metadata": {"name": cname}, "spec": {"devices": {"requests": reqs}}})
            self.api.call("POST", self.pods, self.pod(cname, {"placement-dra": "occupancy"},
                                                      [{"name": "held", "resourceClaimName": cname}],
                                                      "default-scheduler", node=name))
            names.append(cname)
        pending = set(names)

        def bound():
            for p in self.api.call("GET", self.pods + self.api.q(labelSelector="placement-dra=occupancy"))["items"]:
                if p["spec"].get("nodeName"):
                    pending.discard(p["metadata"]["name"])
            return not pending

        if not poll(bound, t + 120, every=0.5):
            raise RuntimeError(f"occupancy pods not bound in 120 s: {sorted(pending)[:5]}")
        total = sum(len(n["gpus"]) for n in self.nodes.values())
        self.stats["occupied_gpus"] = held
        log(f"{self.a.tag}: occupancy: {len(names)} claims hold {held} of {total} GPUs ({time.time() - t:.1f} s)")
        self.timing["occupy_s"] += time.time() - t

    def decided(self, names):
        t0 = time.time()
        # "0/N nodes are available: …": the scheduler tried every node (not the transient
        # "ResourceClaim not created yet" before the claim exists).
        out = wait_decided(self.api, self.pods, f"placement-run={self.a.tag},placement-batch={self.batch}",
                           names, self.a.decide_timeout,
                           unschedulable=lambda c: c.get("message", "").startswith("0/"))
        self.timing["scheduling_wait_s"] += time.time() - t0
        return out

    def claim_of(self, pod):
        for s in pod.get("status", {}).get("resourceClaimStatuses", []):
            if s.get("resourceClaimName"):
                return s["resourceClaimName"]
        return None

    def record(self, spec, pod):
        node = self.nodes.get(pod["spec"]["nodeName"])
        cname = self.claim_of(pod)
        if node is None or cname is None:
            raise RuntimeError(f"pod {pod['metadata']['name']}: bound to {pod['spec']['nodeName']} with claim {cname}")
        claim = self.api.call("GET", f"{self.claims}/{cname}")
        results = (claim.get("status", {}).get("allocation") or {}).get("devices", {}).get("results", [])
        if len(results) != spec["pairs"]:
            raise RuntimeError(f"claim {cname}: {len(results)} devices allocated for {spec['pairs']} pairs")
        for r in results:
            rank, cls = node["ranks"][r["device"]]
            self.ranks.append(rank)
            self.classes[cls] += 1
        self.by_profile[node["profile"]] += 1

    def delete(self, names, claims):
        t = time.time()
        for n in names:
            self.api.call("DELETE", f"{self.pods}/{n}", {"gracePeriodSeconds": 0}, ok=(200, 202, 404))
        # the resourceclaim controller deletes the generated claims and frees their devices
        claims = set(c for c in claims if c)

        def gone():
            claims.intersection_update(c["metadata"]["name"] for c in self.api.call("GET", self.claims)["items"])
            return not claims

        if claims and not poll(gone, t + 60):
            raise RuntimeError(f"generated claims not deleted 60 s after their pods: {sorted(claims)[:5]}")
        self.timing["delete_s"] += time.time() - t

    def teardown(self):
        t = time.time()
        self.api.call("DELETE", self.pods + self.api.q(gracePeriodSeconds=0))
        poll(lambda: not self.api.call("GET", self.pods)["items"], t + 60)
        self.api.call("DELETE", self.claims)
        if not poll(lambda: not self.api.call("GET", self.claims)["items"], t + 90):
            raise RuntimeError("claims of the pass still exist 90 s after deleting them")
        self.timing["teardown_s"] += time.time() - t

    def run(self):
        t_all = time.time()
        self.occupy()
        B = self.a.batch
        nb = (len(self.stream) + B - 1) // B
        claims_of = {}
        for self.batch in range(nb):
            chunk = self.stream[self.batch * B:(self.batch + 1) * B]
            t = time.time()
            pods = []
            for s in chunk:
                name = f"{self.a.tag}-{s['index']:04d}"
                pods.append(name)
                self.api.call("POST", self.pods, self.pod(
                    name, {"placement-run": self.a.tag, "placement-batch": str(self.batch)},
                    [{"name": "pairs", "resourceClaimTemplateName": template_name(s["pairs"], s["pxb"])}],
                    self.a.scheduler))
            self.timing["create_s"] += time.time() - t
            self.stats["created"] += len(chunk)
            dec = self.decided(pods)
            drop = []
            for s, name in zip(chunk, pods):
                state, obj = dec[name]
                self.stats[state] += 1
                self.by_size[s["pairs"]][state] += 1
                if state == "bound":
                    self.record(s, obj)
                    self.live[name] = self.batch
                    claims_of[name] = self.claim_of(obj)
                else:
                    drop.append(name)
                    claims_of[name] = self.claim_of(obj) if obj else None
            leave = [n for n, b in self.live.items() if b <= self.batch - self.a.lifetime]
            for n in leave:
                del self.live[n]
            self.delete(drop + leave, [claims_of.get(n) for n in drop + leave])
            log(f"{self.a.tag} batch {self.batch + 1}/{nb}: {dict(self.stats)}")
        self.timing["total_s"] = time.time() - t_all
        self.teardown()
        return {
            "tag": self.a.tag, "scheduler": self.a.scheduler, "stats": dict(self.stats),
            "classes": {c: self.classes.get(c, 0) for c in CLASSES},
            "meanRank": (sum(self.ranks) / len(self.ranks)) if self.ranks else None,
            "pairs": len(self.ranks),
            "byProfile": dict(self.by_profile),
            "bySize": {str(k): dict(v) for k, v in sorted(self.by_size.items())},
            "timing": {k: round(v, 2) for k, v in self.timing.items()},
        }


def cmd_run(a):
    res = Pass(a).run()
    json.dump(res, open(a.out, "w"))
    print(json.dumps(res))


def cmd_compare(a):
    s, e = json.load(open(a.stock)), json.load(open(a.extender))

    def dist(r):
        return " ".join(f"{c}×{r['classes'][c]}" for c in CLASSES if r["classes"].get(c))

    def mean(r):
        return "n/a" if r["meanRank"] is None else f"{r['meanRank']:.3f}"

    for r in (s, e):
        st = r["stats"]
        print(f"FIGURE placement-dra {r['tag']:>8} ({r['scheduler']}): bound {st.get('bound', 0)}, "
              f"unschedulable {st.get('unschedulable', 0)}, undecided {st.get('undecided', 0)}; "
              f"pairs {r['pairs']}: {dist(r)}; mean rank {mean(r)} (0 PIX … 3 NODE); "
              f"pods by profile {json.dumps(r['byProfile'], sort_keys=True)}")
    for size in sorted({*s["bySize"], *e["bySize"]}, key=int):
        a1, b1 = s["bySize"].get(size, {}), e["bySize"].get(size, {})
        print(f"INFO placement-dra {size}-pair pods: stock bound {a1.get('bound', 0)} / unschedulable "
              f"{a1.get('unschedulable', 0)}; extender bound {b1.get('bound', 0)} / unschedulable {b1.get('unschedulable', 0)}")
    su, eu = s["stats"].get("unschedulable", 0), e["stats"].get("unschedulable", 0)
    sm = s["meanRank"] if s["meanRank"] is not None else 9
    em = e["meanRank"] if e["meanRank"] is not None else 9
    nums = f"unschedulable stock {su} vs extender {eu}; mean rank stock {mean(s)} vs extender {mean(e)}"
    if em <= sm + 1e-9 and eu <= su:
        print(f"VERDICT ok {nums}")
    else:
        print(f"VERDICT worse {nums}")


def add_api(p):
    p.add_argument("--server", required=True, help="API server URL")
    p.add_argument("--ca", required=True)
    p.add_argument("--cert", required=True, help="admin client certificate")
    p.add_argument("--key", required=True)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup")
    s.add_argument("--count", type=int, default=40)
    s.add_argument("--seed", type=int, default=11)
    s.add_argument("--profiles", default="mi300x-8,gb300-4,dgx-h100")
    s.add_argument("--ns", required=True)
    s.add_argument("--out", required=True)
    add_api(s)
    s = sub.add_parser("cleanup")
    add_api(s)
    s = sub.add_parser("stream")
    s.add_argument("--count", type=int, default=300)
    s.add_argument("--seed", type=int, default=11)
    s = sub.add_parser("run")
    s.add_argument("--nodes", required=True)
    s.add_argument("--stream", required=True)
    s.add_argument("--scheduler", required=True)
    s.add_argument("--tag", required=True)
    s.add_argument("--ns", required=True)
    s.add_argument("--seed", type=int, default=11)
    s.add_argument("--out", required=True)
    s.add_argument("--batch", type=int, default=30)
    s.add_argument("--lifetime", type=int, default=3)
    s.add_argument("--decide-timeout", type=float, default=60)
    add_api(s)
    s = sub.add_parser("compare")
    s.add_argument("--stock", required=True)
    s.add_argument("--extender", required=True)
    a = p.parse_args()
    {"setup": cmd_setup, "cleanup": cmd_cleanup, "stream": cmd_stream, "run": cmd_run, "compare": cmd_compare}[a.cmd](a)


if __name__ == "__main__":
    main()
