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
  placement_dra.py selftest
      checks the seeded generator (a port of the project's PCG-64, `Pcg64`) against the
      replay's pinned draws: the same seed gives the same streams and pre-occupancy here
      and in crates/extender/tests/it/replay.
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
      deletes the scenario's Nodes (both variants) and their ResourceSlices.
  placement_dra.py compare --stock A.json[,A2.json…] --extender B.json[,B2.json…] [--load L]
      FIGURE lines per seed and summed, and a VERDICT line (ok: no more unschedulable
      pods than stock summed, never more than stock's + 1 on a seed, pooled mean rank
      better).

Mixed-driver variant (seed 001's cluster: GPUs from NVIDIA's DRA driver, NICs from dranet):
  placement_dra.py setup-mixed --count N --ns NS --out mixed-nodes.json [api]
      Nodes labelled e2e.topoalign.dev/placement-dra-mixed cycling two layouts (gb300: 4
      GPUs and 4 IB functions over 2 NUMA nodes, plus an Ethernet function without NUMA
      node; h100: 8 GPUs and 8 RDMA NICs over 2 NUMA nodes), each with a `gpu.nvidia.com`
      slice in the newest NVIDIA driver's format (standard pciBusID, pcieRoot and numaNode;
      type, uuid, productName, pcieBusID) and a `dra.net` slice in dranet's (numaNode,
      pciAddress, rdma, rdmaDevice, ibOnly; no pcieRoot), the DeviceClasses
      `gpu.nvidia.com` (NVIDIA's) and `dranet.net` (RDMA functions of dra.net), and claim
      templates `mixed-K` (K GPUs + K NICs, no matchAttribute: the stock allocator is free
      to pick NICs on the other NUMA node).
  placement_dra.py stream-mixed --count N --seed S > stream.json
      per pod K = 1 or 2 (weights 3:1).
  placement_dra.py run --mixed … : as run, with seeded pre-occupancy of GPUs and NICs (up
      to half of each per node) and each bound pod's GPUs classed against the nearest of
      its NICs by NUMA node (same: NODE, different: SYS).
  placement_dra.py compare --mixed …: per seed and summed, pods with a cross-NUMA (SYS)
      GPU–NIC pair and unschedulable pods; VERDICT ok when the extender's sums are no
      worse on either.
  [api]: --server URL --ca CA --cert CERT --key KEY (the admin client certificate)
Environment: TOPOALIGN (path of the binary).
"""
import argparse
import collections
import json
import os
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
MIXED_LABEL = "e2e.topoalign.dev/placement-dra-mixed"  # the mixed-driver variant's nodes
GPU_DRIVER, NIC_DRIVER = "gpu.nvidia.com", "dra.net"
GPU_CLASS, NIC_CLASS = "gpu.nvidia.com", "dranet.net"
MIXED_SIZES, MIXED_WEIGHTS = [1, 2], [3, 1]
# (GPUs, NUMA node of each GPU and NIC in address order, Ethernet function without NUMA)
LAYOUTS = {"gb300": (4, [0, 0, 1, 1], True), "h100": (8, [0, 0, 0, 0, 1, 1, 1, 1], False)}


class Pcg64:
    """The project's seeded generator (crates/rng: `rand_pcg::Pcg64` seeded by rand_core's
    `seed_from_u64`, `derive` by FNV-1a of the stream name, rand 0.10's `random_range` on
    `usize` and `f64` sampling), bit for bit: the offline replay
    (crates/extender/tests/it/replay.rs) draws the same pod streams and pre-occupancy from
    the same seeds, so its counts can be set against this scenario's seed by seed."""

    M64 = (1 << 64) - 1
    M128 = (1 << 128) - 1
    MUL = 0x2360ED051FC65DA44385DF649FCCF645

    def __init__(self, seed):
        words, s = [], seed & self.M64
        for _ in range(8):  # rand_core's seed_from_u64: PCG-32 output fills the 32-byte seed
            s = (s * 0x5851F42D4C957F2D + 0xA17654E46FBE17F3) & self.M64
            xs, rot = (((s >> 18) ^ s) >> 27) & 0xFFFFFFFF, s >> 59
            words.append(((xs >> rot) | (xs << (32 - rot))) & 0xFFFFFFFF)
        u = [words[2 * i] | (words[2 * i + 1] << 32) for i in range(4)]
        self.inc = u[2] | (u[3] << 64) | 1
        self.state = ((u[0] | (u[1] << 64)) + self.inc) & self.M128
        self.state = (self.state * self.MUL + self.inc) & self.M128

    @classmethod
    def derive(cls, seed, stream):
        h = 0xCBF29CE484222325
        for b in stream.encode():
            h = ((h ^ b) * 0x100000001B3) & cls.M64
        return cls(seed ^ h)

    def next_u64(self):
        self.state = (self.state * self.MUL + self.inc) & self.M128
        rot, x = self.state >> 122, ((self.state >> 64) ^ self.state) & self.M64
        return ((x >> rot) | (x << (64 - rot))) & self.M64

    def below(self, n):
        """A uniform index in 0..n (n < 2^32; 0 when n is 0)."""
        if n == 0:
            return 0
        m = (self.next_u64() & 0xFFFFFFFF) * n
        hi, lo = m >> 32, m & 0xFFFFFFFF
        if lo > (-n) & 0xFFFFFFFF:
            if lo + (((self.next_u64() & 0xFFFFFFFF) * n) >> 32) > 0xFFFFFFFF:
                hi += 1
        return hi

    def next_f64(self):
        return (self.next_u64() >> 11) * (1.0 / (1 << 53))

    def sample(self, items, k):
        """K of `items` (all when k is larger), by a partial Fisher-Yates shuffle."""
        v = list(items)
        for i in range(min(k, len(v))):
            j = i + self.below(len(v) - i)
            v[i], v[j] = v[j], v[i]
        return v[:k]


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
        make_node(api, name, {"topoalign.dev/profile": profile, NODE_LABEL: "true"}, ts)
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
                    gpus.append((d["name"], attr(d, PCI)))
                elif kind == "nic":
                    nics.append((d["name"], attr(d, PCI)))
        classes_done = True
        # by device name, the order the replay samples them in
        nodes.append({"name": name, "profile": profile, "ranks": ranks,
                      "gpus": [b for _, b in sorted(gpus)], "nics": [b for _, b in sorted(nics)]})
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


def make_node(api, name, labels, ts):
    """A Ready Node object without a kubelet."""
    api.call("POST", "/api/v1/nodes", {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **labels}},
        "status": {"capacity": {"pods": "110", "cpu": "64", "memory": "512Gi"},
                   "allocatable": {"pods": "110", "cpu": "64", "memory": "512Gi"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "message": "e2e node (no kubelet)", "lastHeartbeatTime": ts,
                                   "lastTransitionTime": ts}]}})
    # TaintNodesByCondition adds node.kubernetes.io/not-ready on create; a kubelet clears it.
    api.call("PATCH", f"/api/v1/nodes/{name}", {"spec": {"taints": None}}, ctype="application/merge-patch+json")


def mixed_slices(name, layout, n):
    """The node's slices as NVIDIA's DRA GPU driver (newest, with the standard numaNode)
    and dranet publish them."""
    gpus_n, numas, eth = LAYOUTS[layout]
    gpus, nics, devices = [], [], {}
    for i in range(gpus_n):
        dom = 0x0008 + i if layout == "gb300" else 0
        bus = 0x06 if layout == "gb300" else 0x18 + 0x20 * i
        bdf = f"{dom:04x}:{bus:02x}:00.0"
        root = f"pci{dom:04x}:{bus - 1 if layout == 'h100' else 0:02x}"
        gpus.append({"name": f"gpu-{i}", "attributes": {
            "type": {"string": "gpu"}, "index": {"int": i}, "minor": {"int": i},
            "uuid": {"string": f"GPU-{n:04x}{i:04x}-0000-4000-8000-{i:012x}"},
            "productName": {"string": "NVIDIA GB300" if layout == "gb300" else "NVIDIA H100 80GB HBM3"},
            "architecture": {"string": "Blackwell" if layout == "gb300" else "Hopper"},
            "driverVersion": {"version": "580.82.7"}, "pcieBusID": {"string": bdf},
            "resource.kubernetes.io/pciBusID": {"string": bdf},
            "resource.kubernetes.io/pcieRoot": {"string": root},
            "resource.kubernetes.io/numaNode": {"int": numas[i]}},
            "capacity": {"memory": {"value": "288Gi" if layout == "gb300" else "80Gi"}}})
        devices[f"gpu-{i}"] = {"role": "gpu", "numa": numas[i], "bdf": bdf}
    for i in range(gpus_n):
        bdf = f"{0x0101 + i:04x}:00:00.0" if layout == "gb300" else f"0000:{0x19 + 0x20 * i:02x}:00.0"
        dev = "pci-" + bdf.replace(":", "-").replace(".", "-")
        nics.append({"name": dev, "attributes": {
            "dra.net/ibOnly": {"bool": layout == "gb300"}, "dra.net/numaNode": {"int": numas[i]},
            "dra.net/pciAddress": {"string": bdf}, "dra.net/pciVendor": {"string": "Mellanox Technologies"},
            "dra.net/rdma": {"bool": True}, "dra.net/rdmaDevice": {"string": f"mlx5_{i}"}}})
        devices[dev] = {"role": "nic", "numa": numas[i], "bdf": bdf}
    if eth:
        nics.append({"name": "pci-7870-00-00-0", "attributes": {
            "dra.net/ifName": {"string": "eth0"}, "dra.net/pciAddress": {"string": "7870:00:00.0"},
            "dra.net/rdma": {"bool": False}, "dra.net/encapsulation": {"string": "ether"}}})
    out = []
    for driver, devs in ((GPU_DRIVER, gpus), (NIC_DRIVER, nics)):
        out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                    "metadata": {"name": f"{name}-{driver}"},
                    "spec": {"driver": driver, "nodeName": name,
                             "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}, "devices": devs}})
    return out, devices


def mixed_template(k):
    """Seed 001's claim for K GPUs and K NICs, without its matchAttribute."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": f"mixed-{k}"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS, "count": k}},
                {"name": "nic", "exactly": {"deviceClassName": NIC_CLASS, "count": k}}]}}}}


def cmd_setup_mixed(a):
    api = api_of(a)
    ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for cname, expr in ((GPU_CLASS, f"device.driver == '{GPU_DRIVER}' && device.attributes['{GPU_DRIVER}'].type == 'gpu'"),
                        (NIC_CLASS, f'device.driver == "{NIC_DRIVER}" && device.attributes["{NIC_DRIVER}"].rdma == true')):
        api.call("POST", "/apis/resource.k8s.io/v1/deviceclasses", {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": cname},
            "spec": {"selectors": [{"cel": {"expression": expr}}]}}, ok=(201, 409))
    nodes = []
    layouts = sorted(LAYOUTS)
    for i in range(a.count):
        layout = layouts[i % len(layouts)]
        name = f"mixed-{i:03d}-{layout}"
        make_node(api, name, {MIXED_LABEL: "true"}, ts)
        slices, devices = mixed_slices(name, layout, i)
        for o in slices:
            api.call("POST", "/apis/resource.k8s.io/v1/resourceslices", o)
        nodes.append({"name": name, "profile": layout, "devices": devices,
                      "gpus": sorted(d for d, v in devices.items() if v["role"] == "gpu"),
                      "nics": sorted(d for d, v in devices.items() if v["role"] == "nic")})
    for k in MIXED_SIZES:
        api.call("POST", f"/apis/resource.k8s.io/v1/namespaces/{a.ns}/resourceclaimtemplates", mixed_template(k))
    json.dump(nodes, open(a.out, "w"))


def cmd_cleanup(a):
    api = api_of(a)
    names = set()
    for label in (NODE_LABEL, MIXED_LABEL):
        names |= {n["metadata"]["name"] for n in api.call("GET", "/api/v1/nodes" + api.q(labelSelector=label))["items"]}
    for sl in api.call("GET", "/apis/resource.k8s.io/v1/resourceslices")["items"]:
        if sl["spec"].get("nodeName") in names:
            api.call("DELETE", f"/apis/resource.k8s.io/v1/resourceslices/{sl['metadata']['name']}", ok=(200, 202, 404))
    for n in sorted(names):
        api.call("DELETE", f"/api/v1/nodes/{n}", ok=(200, 202, 404))
    print(f"deleted {len(names)} nodes and their slices")


def weighted(rng, sizes, weights):
    """One of `sizes` by integer `weights` (one draw below their sum)."""
    x = rng.below(sum(weights))
    for size, w in zip(sizes, weights):
        if x < w:
            return size
        x -= w
    raise AssertionError("unreachable")


def cmd_selftest(_a):
    """The generator's first draws, pinned here and in the replay
    (crates/extender/tests/it/replay/cluster.rs, the_script_draws_the_same_numbers)."""
    r = Pcg64(42)
    words = [r.next_u64() for _ in range(3)]
    r = Pcg64.derive(11, "stream")
    idx = [r.below(10) for _ in range(10)]
    got = (words, idx, r.next_f64())
    want = ([4178418447715145737, 4410739922618931473, 14034899209665866285],
            [2, 9, 8, 4, 7, 3, 8, 4, 0, 5], 0.4357687038227247)
    if got != want:
        sys.exit(f"selftest: the PCG-64 port draws {got}, the replay's generator {want}")
    print("selftest: the PCG-64 port draws the replay's numbers")


def cmd_stream_mixed(a):
    rng = Pcg64.derive(a.seed, "stream")
    json.dump([{"index": i, "pairs": weighted(rng, MIXED_SIZES, MIXED_WEIGHTS), "pxb": False}
               for i in range(a.count)], sys.stdout)


def cmd_stream(a):
    rng = Pcg64.derive(a.seed, "stream")
    out = []
    for i in range(a.count):
        size = weighted(rng, SIZES, SIZE_WEIGHTS)
        pxb = size in PXB_SIZES and rng.next_f64() < 1 / 6
        out.append({"index": i, "pairs": size, "pxb": pxb})
    json.dump(out, sys.stdout)


def claim_pod(ns, label, name, labels, claims, sched, node=None):
    """A pause pod asking `claims` (PodResourceClaims), scheduled by `sched` onto `node`,
    else onto a node labelled `label`."""
    spec = {"schedulerName": sched, "terminationGracePeriodSeconds": 0, "resourceClaims": claims,
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"claims": [{"name": c["name"]} for c in claims]}}]}
    spec["nodeSelector"] = {"kubernetes.io/hostname": node} if node else {label: "true"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": spec}


def delete_pods(api, pods, claims_url, names, claims):
    """Deletes the pods `names` and waits until their generated `claims` are gone (the
    resourceclaim controller deletes them and frees their devices)."""
    t = time.time()
    for n in names:
        api.call("DELETE", f"{pods}/{n}", {"gracePeriodSeconds": 0}, ok=(200, 202, 404))
    claims = set(c for c in claims if c)

    def gone():
        claims.intersection_update(c["metadata"]["name"] for c in api.call("GET", claims_url)["items"])
        return not claims

    if claims and not poll(gone, t + 60):
        raise RuntimeError(f"generated claims not deleted 60 s after their pods: {sorted(claims)[:5]}")


def delete_all(api, pods, claims_url):
    """Deletes every pod and claim of a pass and waits until they are gone."""
    t = time.time()
    api.call("DELETE", pods + api.q(gracePeriodSeconds=0))
    poll(lambda: not api.call("GET", pods)["items"], t + 60)
    api.call("DELETE", claims_url)
    if not poll(lambda: not api.call("GET", claims_url)["items"], t + 90):
        raise RuntimeError("claims of the pass still exist 90 s after deleting them")


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
        self.mixed = a.mixed
        self.label = MIXED_LABEL if a.mixed else NODE_LABEL
        self.cross_pods = 0  # mixed: pods with a cross-NUMA GPU–NIC pair
        self.placed = []  # [stream index, node or None, created at] per pod, in stream order
        self.created = {}  # pod name -> time.time() when its POST returned

    def pod(self, name, labels, claims, sched, node=None):
        return claim_pod(self.a.ns, self.label, name, labels, claims, sched, node)

    def occupy(self):
        """Per node, seeded: some GPUs and NICs held by one allocated claim."""
        t = time.time()
        names = []
        held = 0
        for name in sorted(self.nodes):
            n = self.nodes[name]
            rng = Pcg64.derive(self.a.seed, name)
            gpus = rng.sample(n["gpus"], rng.below(len(n["gpus"]) // 2 + 1))
            nics = rng.sample(n["nics"], rng.below(len(n["nics"]) // 2 + 1 if self.mixed else 3))
            reqs = []
            for cls, bdfs in (("gpu", gpus), ("nic", nics)):
                for i, b in enumerate(bdfs):
                    if self.mixed:  # by device name: the device's own address attribute
                        dev = n["devices"][b]
                        expr = (f'device.attributes["resource.kubernetes.io"].pciBusID == "{dev["bdf"]}"' if cls == "gpu"
                                else f'device.attributes["{NIC_DRIVER}"].pciAddress == "{dev["bdf"]}"')
                        dclass = GPU_CLASS if cls == "gpu" else NIC_CLASS
                    else:
                        expr = f'device.attributes["resource.kubernetes.io"].pciBusID == "{b}"'
                        dclass = f"{cls}.{DRIVER}"
                    reqs.append({"name": f"{cls}{i}", "exactly": {"deviceClassName": dclass,
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
        if self.mixed:
            self.record_mixed(spec, pod, node, cname, results)
            return
        if len(results) != spec["pairs"]:
            raise RuntimeError(f"claim {cname}: {len(results)} devices allocated for {spec['pairs']} pairs")
        for r in results:
            rank, cls = node["ranks"][r["device"]]
            self.ranks.append(rank)
            self.classes[cls] += 1
        self.by_profile[node["profile"]] += 1

    def record_mixed(self, spec, pod, node, cname, results):
        """Each GPU against the nearest of the pod's NICs (what NCCL uses): NODE on the
        same NUMA node, SYS across."""
        devs = [node["devices"].get(r["device"]) for r in results]
        gpus = [d for d in devs if d and d["role"] == "gpu"]
        nics = [d for d in devs if d and d["role"] == "nic"]
        if len(gpus) != spec["pairs"] or len(nics) != spec["pairs"]:
            raise RuntimeError(f"claim {cname}: {len(gpus)} GPUs and {len(nics)} NICs allocated for {spec['pairs']} each")
        cross = False
        for g in gpus:
            same = any(n["numa"] == g["numa"] for n in nics)
            cls = "NODE" if same else "SYS"
            cross |= not same
            self.ranks.append(CLASSES.index(cls))
            self.classes[cls] += 1
        self.cross_pods += cross
        self.by_profile[node["profile"]] += 1

    def delete(self, names, claims):
        t = time.time()
        delete_pods(self.api, self.pods, self.claims, names, claims)
        self.timing["delete_s"] += time.time() - t

    def teardown(self):
        t = time.time()
        delete_all(self.api, self.pods, self.claims)
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
                template = f"mixed-{s['pairs']}" if self.mixed else template_name(s["pairs"], s["pxb"])
                self.api.call("POST", self.pods, self.pod(
                    name, {"placement-run": self.a.tag, "placement-batch": str(self.batch)},
                    [{"name": "pairs", "resourceClaimTemplateName": template}],
                    self.a.scheduler))
                self.created[name] = round(time.time(), 4)
            self.timing["create_s"] += time.time() - t
            self.stats["created"] += len(chunk)
            dec = self.decided(pods)
            drop = []
            for s, name in zip(chunk, pods):
                state, obj = dec[name]
                self.placed.append([s["index"], obj["spec"]["nodeName"] if state == "bound" else None,
                                    self.created.get(name)])
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
            "rankSum": sum(self.ranks),
            "pairs": len(self.ranks),
            "seed": self.a.seed,
            "mixed": self.mixed,
            "crossNumaPods": self.cross_pods,
            "byProfile": dict(self.by_profile),
            "bySize": {str(k): dict(v) for k, v in sorted(self.by_size.items())},
            "timing": {k: round(v, 2) for k, v in self.timing.items()},
            "placed": self.placed,
        }


def cmd_run(a):
    res = Pass(a).run()
    json.dump(res, open(a.out, "w"))
    print(json.dumps(res))


def cmd_compare(a):
    stock = [json.load(open(f)) for f in a.stock.split(",")]
    ext = [json.load(open(f)) for f in a.extender.split(",")]
    if [r["seed"] for r in stock] != [r["seed"] for r in ext]:
        sys.exit("compare: the stock and extender results are not for the same seeds in the same order")
    name = "placement-dra mixed-driver" if a.mixed else "placement-dra"
    if a.load:
        name += f" ({a.load})"

    def unsched(rs):
        return sum(r["stats"].get("unschedulable", 0) for r in rs)

    def pooled(rs):
        pairs = sum(r["pairs"] for r in rs)
        return sum(r["rankSum"] for r in rs) / pairs if pairs else None

    def mean(m):
        return "n/a" if m is None else f"{m:.3f}"

    def dist(rs):
        c = collections.Counter()
        for r in rs:
            c.update(r["classes"])
        return " ".join(f"{k}×{c[k]}" for k in CLASSES if c.get(k))

    def cross(rs):
        return sum(r["crossNumaPods"] for r in rs)

    def bound(rs):
        return sum(r["stats"].get("bound", 0) for r in rs)

    for s1, e1 in zip(stock, ext):
        if a.mixed:
            print(f"FIGURE {name} seed {s1['seed']}: pods with a cross-NUMA (SYS) GPU-NIC pair stock {cross([s1])} "
                  f"vs extender {cross([e1])}; unschedulable stock {unsched([s1])} vs extender {unsched([e1])}; "
                  f"bound {bound([s1])} vs {bound([e1])}; GPU-NIC classes stock {dist([s1])} vs extender {dist([e1])}")
        else:
            print(f"FIGURE {name} seed {s1['seed']}: unschedulable stock {unsched([s1])} vs extender {unsched([e1])}; "
                  f"mean rank stock {mean(pooled([s1]))} vs extender {mean(pooled([e1]))}; "
                  f"pairs stock {dist([s1])} vs extender {dist([e1])}")
    for side, rs in (("stock", stock), ("extender", ext)):
        r0 = rs[0]
        by_profile = collections.Counter()
        for r in rs:
            by_profile.update(r["byProfile"])
        print(f"FIGURE {name} sum of {len(rs)} seeds, {side:>8} ({r0['scheduler']}): "
              f"bound {bound(rs)}, unschedulable {unsched(rs)}, "
              f"undecided {sum(r['stats'].get('undecided', 0) for r in rs)}"
              + (f", pods with a cross-NUMA pair {cross(rs)}" if a.mixed else "")
              + f"; pairs {sum(r['pairs'] for r in rs)}: {dist(rs)}; mean rank {mean(pooled(rs))} (0 PIX … 4 SYS); "
              f"pods by profile {json.dumps(dict(sorted(by_profile.items())))}")
    if not a.mixed:
        sizes = sorted({k for r in stock + ext for k in r["bySize"]}, key=int)
        for size in sizes:
            def tot(rs, what):
                return sum(r["bySize"].get(size, {}).get(what, 0) for r in rs)
            print(f"INFO {name} {size}-pair pods (all seeds): stock bound {tot(stock, 'bound')} / unschedulable "
                  f"{tot(stock, 'unschedulable')}; extender bound {tot(ext, 'bound')} / unschedulable {tot(ext, 'unschedulable')}")
    su, eu = unsched(stock), unsched(ext)
    nums = f"over {len(stock)} seeds: unschedulable stock {su} vs extender {eu}"
    if a.mixed:
        sc, ec = cross(stock), cross(ext)
        nums += f"; pods with a cross-NUMA GPU-NIC pair stock {sc} vs extender {ec}"
        ok = ec <= sc and eu <= su
    else:
        # The extender must cost no pod: never more than one more than stock on a seed
        # (stock's own count moves by about that between runs), no more summed, and give
        # better pairs.
        over = [f"seed {s1['seed']} ({unsched([e1])} vs {unsched([s1])})"
                for s1, e1 in zip(stock, ext) if unsched([e1]) > unsched([s1]) + 1]
        sm, em = pooled(stock), pooled(ext)
        nums += f"; mean rank stock {mean(sm)} vs extender {mean(em)}"
        if over:
            nums += "; more than stock's + 1 on " + ", ".join(over)
        ok = (em if em is not None else 9) < (sm if sm is not None else 9) and eu <= su and not over
    print(f"VERDICT {'ok' if ok else 'worse'} {nums}")


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
    s = sub.add_parser("setup-mixed")
    s.add_argument("--count", type=int, default=12)
    s.add_argument("--ns", required=True)
    s.add_argument("--out", required=True)
    add_api(s)
    sub.add_parser("selftest")
    s = sub.add_parser("stream")
    s.add_argument("--count", type=int, default=300)
    s.add_argument("--seed", type=int, default=11)
    s = sub.add_parser("stream-mixed")
    s.add_argument("--count", type=int, default=100)
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
    s.add_argument("--mixed", action="store_true", help="the mixed-driver variant's nodes and claims")
    add_api(s)
    s = sub.add_parser("compare")
    s.add_argument("--stock", required=True)
    s.add_argument("--extender", required=True)
    s.add_argument("--mixed", action="store_true")
    s.add_argument("--load", default="", help="the load, named in the figures")
    a = p.parse_args()
    {"setup": cmd_setup, "setup-mixed": cmd_setup_mixed, "cleanup": cmd_cleanup, "stream": cmd_stream,
     "selftest": cmd_selftest,
     "stream-mixed": cmd_stream_mixed, "run": cmd_run, "compare": cmd_compare}[a.cmd](a)


if __name__ == "__main__":
    main()
