#!/usr/bin/env python3
"""The cpus scenario: CPUs of kubernetes-sigs/dra-driver-cpu beside topoalign's pairs, in one
claim from `topoalign claims --cpus`, allocated by the real kube-scheduler.

  cpus.py run --ns NS --seed S --pods N --batch B --lifetime L --out result.json [api]

Nodes: every two-socket profile (mi300x-8, gb300-4, dgx-h100, pcie-2socket) once per device
mode of dra-driver-cpu (grouped, individual), each with topoalign's ResourceSlices (`topoalign
driver --dry-run`) and dra-driver-cpu's, written here from the profile's NUMA CPU lists
(`topoalign discover -o json`) in the format the driver's source publishes:
  - v0.2.0 (7f95568, pkg/driver/dra_hooks.go): `dra.cpu/numaNodeID`, `dra.cpu/socketID`,
    `dra.cpu/smtEnabled`, the compatibility key `dra.net/numaNode`; no standard NUMA key;
  - main at de98098 (pkg/device/builder.go, attributes.go): also the standard
    `resource.kubernetes.io/numaNode`;
  grouped (NUMA): one device `cpudevnuma<NNN>` per node, `allowMultipleAllocations: true`,
  capacity `dra.cpu/cpu` (its CPUs), attribute `dra.cpu/numCPUs`; individual: one device
  `cpudev<NNN>` per CPU (`cpuID`, `coreID`, `coreType`, `cacheL3ID`), numbered over the
  machine, siblings adjacent (the profiles' second thread of core c is c + cores).
Half the nodes publish v0.2.0's keys (claims then match on `dra.net/numaNode`), half main's.

Pods: a seeded stream (1/2/4/8 pairs, 2/4/8 CPUs per GPU, one in four with `--cpu-shape
one-node` when it has at most 4 pairs), each pinned to the nodes of one mode and key, in
batches, each pod leaving after a few batches. Pass "aligned": claims from `topoalign claims
--pairs P --cpus C ...`; every allocated CPU (grouped: `consumedCapacity` CPUs of a NUMA node's
device; individual: one CPU per device) is checked against the NUMA node of its GPUs (per-GPU
shape: `cpus-i` with `pair-i`; one-node: every pair). Pass "blind": the same stream with
`topoalign claims --pairs P` and the pod's CPUs from the kubelet's static CPU manager, which
takes no hint from DRA devices: modelled as it packs a Guaranteed container's CPUs
(`takeByTopologyNUMAPacked`: the lowest NUMA node holding them all, else node by node), per node
with the CPUs of earlier pods taken; a pod is split when a CPU lands off its GPUs' nodes.
[api]: --server URL --ca CA --cert CERT --key KEY
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

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from placement import Api, poll, wait_decided  # noqa: E402

TOPOALIGN = os.environ.get("TOPOALIGN", "topoalign")
PROFILES = ["mi300x-8", "gb300-4", "dgx-h100", "pcie-2socket"]
MODES = ["grouped", "individual"]
STD, COMPAT = "resource.kubernetes.io/numaNode", "dra.net/numaNode"
LABEL = "e2e.topoalign.dev/cpus"
SIZES, WEIGHTS = [1, 2, 4, 8], [4, 3, 2, 1]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] cpus: {msg}", file=sys.stderr, flush=True)


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(args[1:])}: {r.stderr.strip()[:600]}")
    return r.stdout


def cpulist(text):
    out = []
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def numa_cpus(profile):
    """{numa id: (socket, [cpu ids])} of a profile, nodes without CPUs left out."""
    topo = json.loads(run([TOPOALIGN, "discover", "--profile", profile, "-o", "json"]))
    topo = topo.get("topology", topo)
    out = {}
    for n in topo["numa"]:
        cpus = cpulist(n["cpus"]) if isinstance(n["cpus"], str) else list(n["cpus"])
        if cpus:
            out[n["id"]] = (n.get("socket", n["id"]), cpus)
    return out


def intv(v):
    return {"int": v}


def cpu_devices(numa, mode, release):
    """dra-driver-cpu's devices for the node's CPUs (see the module text)."""
    def keys(node):
        a = {"dra.cpu/numaNodeID": intv(node), COMPAT: intv(node)}
        if release == "main":
            a[STD] = intv(node)
        return a

    devices, where = [], {}
    if mode == "grouped":
        for node, (socket, cpus) in sorted(numa.items()):
            name = f"cpudevnuma{node:03d}"
            devices.append({"name": name, "allowMultipleAllocations": True,
                            "attributes": {"dra.cpu/socketID": intv(socket), "dra.cpu/smtEnabled": {"bool": True},
                                           "dra.cpu/numCPUs": intv(len(cpus)), **keys(node)},
                            "capacity": {"dra.cpu/cpu": {"value": str(len(cpus))}}})
            where[name] = node
        return devices, where
    every = sorted((c, node, socket) for node, (socket, cpus) in numa.items() for c in cpus)
    node_of = {c: node for c, node, _ in every}
    cores = len(every) // 2
    # Core groups as the driver makes them: a CPU and its sibling together. The profiles
    # number a core's second thread c + cores (Linux's usual numbering); a machine where
    # that is no CPU of the same node has no SMT, and its CPUs go in id order.
    smt = all(node_of.get(c + cores) == n for c, n, _ in every[:cores])
    order = []
    for c, node, socket in every:
        if not smt:
            order.append((c, node, socket))
        elif c < cores:
            order += [(c, node, socket), (c + cores, node, socket)]
    for i, (c, node, socket) in enumerate(order):
        name = f"cpudev{i:03d}"
        devices.append({"name": name, "attributes": {
            "dra.cpu/cpuID": intv(c), "dra.cpu/coreID": intv(c % cores if smt else c),
            "dra.cpu/coreType": {"string": "standard"}, "dra.cpu/cacheL3ID": intv(node),
            "dra.cpu/socketID": intv(socket), "dra.cpu/smtEnabled": {"bool": smt},
            **keys(node)}})
        where[name] = node
    return devices, where


def make_node(api, name, labels):
    ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    api.call("POST", "/api/v1/nodes", {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **labels}},
        "status": {"capacity": {"pods": "110", "cpu": "256", "memory": "2Ti"},
                   "allocatable": {"pods": "110", "cpu": "256", "memory": "2Ti"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "message": "e2e node (no kubelet)", "lastHeartbeatTime": ts,
                                   "lastTransitionTime": ts}]}})
    api.call("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}}, ctype="application/merge-patch+json")


def setup(api, ns):
    api.call("POST", "/apis/resource.k8s.io/v1/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "dra.cpu"},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "dra.cpu"'}}]}}, ok=(201, 409))
    nodes = {}
    for pi, profile in enumerate(PROFILES):
        numa = numa_cpus(profile)
        for mi, mode in enumerate(MODES):
            release = "main" if (pi + mi) % 2 == 0 else "v0.2.0"
            key = "std" if release == "main" else "compat"
            name = f"cpu-{profile}-{mode}"
            make_node(api, name, {LABEL: f"{mode}-{key}"})
            pairs = {}
            for o in json.loads(run([TOPOALIGN, "driver", "--dry-run", "-o", "json", "--profile", profile,
                                     "--node-name", name]))["items"]:
                if o["kind"] == "DeviceClass":
                    api.call("POST", "/apis/resource.k8s.io/v1/deviceclasses", o, ok=(201, 409))
                    continue
                api.call("POST", "/apis/resource.k8s.io/v1/resourceslices", o)
                for d in o["spec"].get("devices", []):
                    a = d.get("attributes", {})
                    if a.get("type", {}).get("string") == "pair":
                        pairs[d["name"]] = a.get(STD, {}).get("int")
            devices, where = cpu_devices(numa, mode, release)
            for i in range(0, len(devices), 128):
                api.call("POST", "/apis/resource.k8s.io/v1/resourceslices", {
                    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                    "metadata": {"generateName": f"{name}-dra.cpu-"},
                    "spec": {"driver": "dra.cpu", "nodeName": name,
                             "pool": {"name": name, "generation": 1,
                                      "resourceSliceCount": (len(devices) + 127) // 128},
                             "devices": devices[i:i + 128]}})
            nodes[name] = {"profile": profile, "mode": mode, "key": key, "release": release, "pairs": pairs,
                           "cpus": where, "numa": {n: len(c) for n, (_, c) in numa.items()}}
    log(f"{len(nodes)} nodes: " + ", ".join(f"{n} ({v['release']})" for n, v in sorted(nodes.items())))
    return nodes


def stream(seed, count):
    rng = random.Random(seed)
    out = []
    for i in range(count):
        pairs = rng.choices(SIZES, WEIGHTS)[0]
        group = f"{rng.choice(MODES)}-{rng.choice(['std', 'compat'])}"
        # individual mode: one device per CPU, and a claim holds at most 32 devices
        fits = [k for k in (2, 4, 8) if group.startswith("grouped") or pairs * (1 + k) <= 32]
        per_gpu = rng.choice(fits)
        one_node = pairs <= 4 and rng.random() < 0.25
        out.append({"index": i, "pairs": pairs, "cpus": pairs * per_gpu, "one_node": one_node, "group": group})
    return out


class Pass:
    def __init__(self, api, ns, nodes, tag, aligned):
        self.api, self.ns, self.nodes, self.tag, self.aligned = api, ns, nodes, tag, aligned
        self.pods = f"/api/v1/namespaces/{ns}/pods"
        self.claims = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
        self.templates = set()
        self.stats = collections.Counter()
        self.failures = []
        # the blind pass's model of the static CPU manager: CPUs taken per node and NUMA node
        self.taken = collections.defaultdict(collections.Counter)
        self.held = {}  # pod -> (node, Counter of NUMA -> CPUs)

    def template(self, p):
        mode, key = p["group"].split("-")
        name = f"p{p['pairs']}"
        args = [TOPOALIGN, "claims", "--pairs", str(p["pairs"]), "-o", "json"]
        if self.aligned:
            shape = "one-node" if p["one_node"] else "per-gpu"
            name += f"-c{p['cpus']}-{mode}-{key}-{shape}"
            args += ["--cpus", str(p["cpus"]), "--cpu-mode", mode, "--cpu-shape", shape,
                     "--cpu-numa-attribute", STD if key == "std" else COMPAT]
        if name not in self.templates:
            obj = json.loads(run(args + ["--name", name]))
            self.api.call("POST", f"/apis/resource.k8s.io/v1/namespaces/{self.ns}/resourceclaimtemplates", obj,
                          ok=(201, 409))
            self.templates.add(name)
        return name

    def create(self, p, batch):
        name = f"{self.tag}-{p['index']:03d}"
        t = self.template(p)
        self.api.call("POST", self.pods, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": self.ns, "labels": {"cpus-run": self.tag, "cpus-batch": str(batch)}},
            "spec": {"terminationGracePeriodSeconds": 0, "nodeSelector": {LABEL: p["group"]},
                     "resourceClaims": [{"name": "devs", "resourceClaimTemplateName": t}],
                     "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"claims": [{"name": "devs"}]}}]}})
        return name

    def check(self, p, pod):
        node = self.nodes[pod["spec"]["nodeName"]]
        cname = next((s["resourceClaimName"] for s in pod.get("status", {}).get("resourceClaimStatuses", [])
                      if s.get("resourceClaimName")), None)
        claim = self.api.call("GET", f"{self.claims}/{cname}")
        results = (claim.get("status", {}).get("allocation") or {}).get("devices", {}).get("results", [])
        gpu_numa = {}  # group -> NUMA node of the pair(s)
        cpus = collections.defaultdict(collections.Counter)  # group -> NUMA -> CPUs
        for r in results:
            req = r["request"]
            group = req.split("-", 1)[1] if "-" in req else "all"
            if r["driver"] == "topoalign.dev":
                gpu_numa.setdefault(group, set()).add(node["pairs"][r["device"]])
            elif r["driver"] == "dra.cpu":
                n = int(r.get("consumedCapacity", {}).get("dra.cpu/cpu", "1"))
                cpus[group][node["cpus"][r["device"]]] += n
        gpus = set().union(*gpu_numa.values()) if gpu_numa else set()
        if self.aligned:
            total = sum(sum(c.values()) for c in cpus.values())
            self.stats["cpus"] += total
            self.stats["pairs"] += sum(1 for r in results if r["driver"] == "topoalign.dev")
            bad = 0
            for group, by_numa in cpus.items():
                want = gpu_numa.get(group, gpus) if group != "all" else gpus
                bad += sum(c for n, c in by_numa.items() if {n} != want)
            self.stats["cpus_aligned"] += total - bad
            if total != p["cpus"] or bad:
                self.failures.append(f"{pod['metadata']['name']} on {pod['spec']['nodeName']}: {total} CPUs for "
                                     f"{p['cpus']} asked, {bad} off their GPUs' NUMA node ({dict(cpus)} vs {gpu_numa})")
            if len(gpus) > 1:
                self.stats["spanning_pods"] += 1
            return
        # blind: the static CPU manager's packed choice on what earlier pods left
        free = {n: c - self.taken[pod["spec"]["nodeName"]][n] for n, c in node["numa"].items()}
        want, got = p["cpus"], collections.Counter()
        whole = [n for n in sorted(free) if free[n] >= want]
        if whole:
            got[whole[0]] = want
        else:
            for n in sorted(free):
                take = min(free[n], want - sum(got.values()))
                if take > 0:
                    got[n] = take
        self.taken[pod["spec"]["nodeName"]].update(got)
        self.held[pod["metadata"]["name"]] = (pod["spec"]["nodeName"], got)
        self.stats["cpus"] += sum(got.values())
        off = sum(c for n, c in got.items() if n not in gpus)
        self.stats["cpus_aligned"] += sum(got.values()) - off
        self.stats["split_pods"] += off > 0

    def leave(self, names):
        for n in names:
            self.api.call("DELETE", f"{self.pods}/{n}", {"gracePeriodSeconds": 0}, ok=(200, 202, 404))
            if n in self.held:
                node, got = self.held.pop(n)
                self.taken[node].subtract(got)

    def run(self, podlist, batch, lifetime):
        t0 = time.time()
        live = collections.deque()
        for b in range(0, len(podlist), batch):
            chunk = podlist[b:b + batch]
            names = {self.create(p, b // batch): p for p in chunk}
            decided = wait_decided(self.api, self.pods, f"cpus-run={self.tag},cpus-batch={b // batch}", list(names),
                                   60, unschedulable=lambda c: c.get("message", "").startswith("0/"))
            bound = []
            for n, (state, pod) in decided.items():
                self.stats[state] += 1
                if state == "bound":
                    self.check(names[n], pod)
                    bound.append(n)
                else:
                    self.leave([n])
            live.append(bound)
            if len(live) > lifetime:
                self.leave(live.popleft())
        for names in live:
            self.leave(names)
        self.api.call("DELETE", self.pods + self.api.q(labelSelector=f"cpus-run={self.tag}"))
        poll(lambda: not self.api.call("GET", self.claims)["items"], time.time() + 90)
        self.stats["seconds"] = round(time.time() - t0, 1)
        log(f"{self.tag}: {dict(self.stats)}")
        return {"stats": dict(self.stats), "failures": self.failures[:20]}


def cmd_run(a):
    api = Api(a.server, a.ca, a.cert, a.key)
    nodes = setup(api, a.ns)
    podlist = stream(a.seed, a.pods)
    out = {"nodes": {n: {k: v[k] for k in ("profile", "mode", "release")} for n, v in nodes.items()}}
    out["aligned"] = Pass(api, a.ns, nodes, "aligned", True).run(podlist, a.batch, a.lifetime)
    out["blind"] = Pass(api, a.ns, nodes, "blind", False).run(podlist, a.batch, a.lifetime)
    json.dump(out, open(a.out, "w"), indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    for flag, kind, default in (("--ns", str, "cpus"), ("--seed", int, 1), ("--pods", int, 60), ("--batch", int, 10),
                                ("--lifetime", int, 2), ("--out", str, None)):
        r.add_argument(flag, type=kind, default=default, required=default is None)
    for flag in ("--server", "--ca", "--cert", "--key"):
        r.add_argument(flag, required=True)
    a = p.parse_args()
    cmd_run(a)


if __name__ == "__main__":
    main()
