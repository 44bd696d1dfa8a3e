#!/usr/bin/env python3
"""The vendor scenario (issue 34): GPUs of NVIDIA's DRA driver v0.5 (gpu.nvidia.com) and NICs
of dranet (dra.net, main) or the SR-IOV DRA driver (sriovnetwork.k8snetworkplumbingwg.io),
in their own formats, claimed through `topoalign claims --gpu-class … --nic-class …` templates
(no device or node named), scheduled by the real kube-scheduler with and without
`topoalign extender`; and the same stream on topoalign's own driver.

The machines are the built-in `dgx-h100` profile (`topoalign discover --profile dgx-h100`):
every GPU with a ConnectX NIC under one PCIe switch (PIX), one more NIC alone. The truth of a
GPU–NIC pair is `topoalign matrix --profile dgx-h100`'s cell (an SR-IOV VF is its PF's); GDR
means PIX or PXB (NCCL_NET_GDR_LEVEL's default). Three layouts, cycled:
  full   NVIDIA v0.5 GPUs + every NIC from dranet (plus a frontend eth0 without NUMA node);
  half   the same GPUs, only the NICs of GPUs 1, 3, 5, 7 (the others pair by NUMA node, NODE);
  sriov  the same GPUs, two SR-IOV VFs of each GPU's NIC (standard pcieRoot, compat NUMA key).

  vendor.py setup --count N --own N --ns NS --out nodes.json [api]
      Nodes labelled e2e.topoalign.dev/vendor (layouts cycled) with their slices, the classes
      gpu.nvidia.com, dranet.net, sriov-rdma and the templates vendor-{dranet,sriov}-K from
      `topoalign claims`; and N own-driver dgx-h100 nodes through placement_dra's setup
      (label e2e.topoalign.dev/placement-dra, templates dra-pairs-K).
  vendor.py stream --count N --seed S > stream.json
      per pod: pairs K (1, 2, 4; weights 4:3:2) and family (dranet 3 : sriov 1).
  vendor.py run --nodes nodes.json --stream stream.json --mode vendor|own --scheduler NAME
                --tag TAG --ns NS --seed S --out result.json [--batch B --lifetime L]
                [--explain FILE] [api]
      one pass: seeded pre-occupancy (whole GPU+NIC pairs held by allocated claims), then the
      stream in batches; each bound pod's GPUs classed against the best of its NICs (truth),
      GDR on every GPU, a cross-NUMA pair, and whether its node had an aligned choice then
      (the devices free after the batch plus its own: a lower bound). With --explain, before
      the pass is torn down, `topoalign explain --all --profile dgx-h100 -o json` is checked
      against the claims' status.allocation and the truth, and its summary written to FILE.
  vendor.py compare --stock A,… --extender B,… --own C,…
      FIGURE lines per seed and summed, and VERDICT lines on the targets.
  vendor.py cleanup [api]
  [api]: --server URL --ca CA --cert CERT --key KEY
Environment: TOPOALIGN (the binary), KUBECONFIG (for explain --all).
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import time
import zlib

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from placement import poll, wait_decided  # noqa: E402  (the wait loops of the placement scenarios)
import placement_dra  # noqa: E402  (its API client and flags, own-driver nodes, Node objects and cleanup)

TOPOALIGN = os.environ.get("TOPOALIGN", "topoalign")
PROFILE = "dgx-h100"
LABEL = "e2e.topoalign.dev/vendor"
LAYOUTS = ["full", "half", "sriov"]
# No 8-pair pods: a per-pair ladder that does not fit a node costs the allocator a search
# over every ordering of the node's free GPUs (8 pairs on 7 free GPUs: more than 20 million
# devices tried in topoalign's model, the Filter's 10 s in kube-scheduler).
SIZES, WEIGHTS = [1, 2, 4], [4, 3, 2]
FAMILIES = ["dranet", "sriov"]  # 3 in 4 on dranet's NICs, 1 in 4 on SR-IOV VFs
GPU_DRIVER, DRANET, SRIOV = "gpu.nvidia.com", "dra.net", "sriovnetwork.k8snetworkplumbingwg.io"
GDR_CLASSES = ("PIX", "PXB")
STD = "resource.kubernetes.io"


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] vendor: {msg}", file=sys.stderr, flush=True)


def topoalign(*args):
    r = subprocess.run([TOPOALIGN, *args], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"topoalign {' '.join(args)}: {r.stderr.strip()[:600]}")
    return r.stdout


def machine():
    """The profile's GPUs and NICs (bdf, NUMA node, pcieRoot, RDMA device) and the truth
    class of every GPU–NIC pair by address."""
    t = json.loads(topoalign("discover", "--profile", PROFILE, "-o", "json"))
    t = t.get("topology", t)
    pci, hb = t["pci"], t["hostBridges"]

    def root(i):
        p = pci[i]
        while True:
            par = p["parent"]
            if "host" in par:
                h = hb[par["host"]]
                return f"pci{h['domain']:04x}:{h['bus']:02x}"
            p = pci[par["bridge"]]

    dev = lambda i, extra: {"bdf": pci[i]["bdf"], "numa": pci[i].get("numaNode"), "root": root(i), **extra}
    gpus = [dev(g["pci"], {}) for g in t["gpus"]]
    nics = [dev(n["pci"], {"rdma": n.get("rdma")}) for n in t["nics"]]
    m = json.loads(topoalign("matrix", "--profile", PROFILE, "-o", "json"))
    labels = [d["bdf"] for d in m["devices"]]
    n = len(labels)
    truth = {}
    for i, a in enumerate(labels):
        for j, b in enumerate(labels):
            truth[f"{a}|{b}"] = m["cells"][i * n + j]
    return gpus, nics, truth


def attr_s(v):
    return {"string": v}


def nvidia_slice(node, gpus):
    """NVIDIA's DRA driver v0.5 (deviceinfo.go at 9593204): type, uuid, productName, the
    version attributes, standard pciBusID, pcieRoot, numaNode."""
    devs = []
    for i, g in enumerate(gpus):
        devs.append({"name": f"gpu-{i}", "attributes": {
            "type": attr_s("gpu"), "uuid": attr_s(f"GPU-{zlib.crc32(node.encode()):08x}-0000-4000-8000-{i:012d}"),
            "productName": attr_s("NVIDIA H100 80GB HBM3"), "brand": attr_s("Nvidia"), "architecture": attr_s("Hopper"),
            "cudaComputeCapability": {"version": "9.0.0"}, "driverVersion": {"version": "580.82.7"},
            "cudaDriverVersion": {"version": "13.0.0"}, "addressingMode": attr_s("HMM"),
            f"{STD}/pciBusID": attr_s(g["bdf"]), f"{STD}/pcieRoot": attr_s(g["root"]),
            f"{STD}/numaNode": {"int": g["numa"]}},
            "capacity": {"memory": {"value": "80Gi"}}})
    return devs


def dranet_slice(nics):
    """dranet main (attributes.go, db.go at f258477): dra.net/* and the standard pcieRoot and
    numaNode; an Ethernet function without NUMA node."""
    devs = []
    for n in nics:
        name = "pci-" + n["bdf"].replace(":", "-").replace(".", "-")
        devs.append({"name": name, "attributes": {
            "dra.net/pciAddress": attr_s(n["bdf"]), "dra.net/rdma": {"bool": True},
            "dra.net/rdmaDevice": attr_s(n["rdma"]), "dra.net/ifName": attr_s(f"ib{n['rdma'][5:]}"),
            "dra.net/numaNode": {"int": n["numa"]}, "dra.net/pciVendor": attr_s("Mellanox Technologies"),
            "dra.net/encapsulation": attr_s("infiniband"), "dra.net/state": attr_s("up"),
            f"{STD}/pcieRoot": attr_s(n["root"]), f"{STD}/numaNode": {"int": n["numa"]}}})
    devs.append({"name": "pci-0000-e1-00-0", "attributes": {
        "dra.net/pciAddress": attr_s("0000:e1:00.0"), "dra.net/ifName": attr_s("eth0"),
        "dra.net/rdma": {"bool": False}, "dra.net/encapsulation": attr_s("ether")}})
    return devs


def sriov_slice(nics):
    """The SR-IOV DRA driver (consts.go, discovery.go at cd9404f): two VFs per PF, standard
    pciBusID and pcieRoot, the compat dra.net/numaNode only."""
    devs = []
    for n in nics:
        for f in (2, 3):
            vf = n["bdf"][:-1] + str(f)
            p = "sriovnetwork.k8snetworkplumbingwg.io/"
            devs.append({"name": vf.replace(":", "-").replace(".", "-"), "attributes": {
                p + "pciAddress": attr_s(vf), p + "pfPciAddress": attr_s(n["bdf"]), p + "PFName": attr_s(f"ib{n['rdma'][5:]}"),
                p + "vfID": {"int": f - 2}, p + "vendor": attr_s("15b3"), p + "deviceID": attr_s("101e"),
                p + "linkType": attr_s("infiniband"), p + "rdmaCapable": {"bool": True}, p + "EswitchMode": attr_s("legacy"),
                f"{STD}/pciBusID": attr_s(vf), f"{STD}/pcieRoot": attr_s(n["root"]), "dra.net/numaNode": {"int": n["numa"]}}})
    return devs


def slice_obj(name, driver, node, devices):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name},
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def cmd_setup(a):
    api = placement_dra.api_of(a)
    gpus, nics, truth = machine()
    ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for cname, expr in (
            ("gpu.nvidia.com", f"device.driver == '{GPU_DRIVER}' && device.attributes['{GPU_DRIVER}'].type == 'gpu'"),
            ("dranet.net", f'device.driver == "{DRANET}" && device.attributes["{DRANET}"].rdma == true'),
            ("sriov-rdma", f'device.driver == "{SRIOV}" && device.attributes["{SRIOV}"].rdmaCapable == true')):
        api.call("POST", "/apis/resource.k8s.io/v1/deviceclasses", {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": cname},
            "spec": {"selectors": [{"cel": {"expression": expr}}]}}, ok=(201, 409))
    by_root = {g["root"]: i for i, g in enumerate(gpus)}
    paired = [n for n in nics if n["root"] in by_root]
    nodes = []
    for i in range(a.count):
        layout = LAYOUTS[i % len(LAYOUTS)]
        name = f"vendor-{i:03d}-{layout}"
        placement_dra.make_node(api, name, {LABEL: "true", "e2e.topoalign.dev/layout": layout}, ts)
        api.call("POST", "/apis/resource.k8s.io/v1/resourceslices",
                 slice_obj(f"{name}-gpu", GPU_DRIVER, name, nvidia_slice(name, gpus)))
        if layout == "sriov":
            devs, driver = sriov_slice(paired), SRIOV
        else:
            keep = nics if layout == "full" else [n for n in paired if by_root[n["root"]] % 2 == 1]
            devs, driver = dranet_slice(keep), DRANET
        api.call("POST", "/apis/resource.k8s.io/v1/resourceslices", slice_obj(f"{name}-nic", driver, name, devs))
        devices = {f"gpu-{k}": {"role": "gpu", "bdf": g["bdf"], "numa": g["numa"], "truth": g["bdf"]}
                   for k, g in enumerate(gpus)}
        for d in devs:
            at = d["attributes"]
            bdf = (at.get("dra.net/pciAddress") or at.get(f"{STD}/pciBusID"))["string"]
            rdma = at.get("dra.net/rdma", at.get(f"{SRIOV}/rdmaCapable", {"bool": False}))["bool"]
            numa = at.get("dra.net/numaNode", {}).get("int")
            pf = at.get(f"{SRIOV}/pfPciAddress", {"string": bdf})["string"]
            if rdma:
                devices[d["name"]] = {"role": "nic", "bdf": bdf, "numa": numa, "truth": pf}
        nodes.append({"name": name, "layout": layout, "driver": driver, "devices": devices})
    for fam, nic_class, extra in (("dranet", "dranet.net", []), ("sriov", "sriov-rdma", ["--nic-driver", SRIOV])):
        for k in SIZES:
            t = json.loads(topoalign("claims", "--pairs", str(k), "--gpu-class", "gpu.nvidia.com", "--nic-class", nic_class,
                                     *extra, "--name", f"vendor-{fam}-{k}", "-o", "json"))
            api.call("POST", f"/apis/resource.k8s.io/v1/namespaces/{a.ns}/resourceclaimtemplates", t)
    own_out = a.out + ".own"
    placement_dra.cmd_setup(argparse.Namespace(count=a.own, profiles=PROFILE, ns=a.ns, out=own_out, server=a.server,
                                               ca=a.ca, cert=a.cert, key=a.key))
    own = json.load(open(own_out))
    json.dump({"vendor": nodes, "own": own, "truth": truth}, open(a.out, "w"))
    log(f"{a.count} vendor nodes ({', '.join(LAYOUTS)}), {a.own} own-driver {PROFILE} nodes")


def cmd_stream(a):
    # The project's generator, drawn as crates/extender/tests/it/replay/vendor.rs draws it
    # (a seed here is the same seed in the offline replay).
    rng = placement_dra.Pcg64.derive(a.seed, "vendor-stream")
    table = [k for k, w in zip(SIZES, WEIGHTS) for _ in range(w)]
    out = []
    for i in range(a.count):
        pairs = table[rng.below(len(table))]
        family = FAMILIES[1] if rng.below(4) == 3 else FAMILIES[0]
        out.append({"index": i, "pairs": pairs, "family": family})
    json.dump(out, sys.stdout)


def cmd_cleanup(a):
    api = placement_dra.api_of(a)
    names = {n["metadata"]["name"] for n in api.call("GET", "/api/v1/nodes" + api.q(labelSelector=LABEL))["items"]}
    for sl in api.call("GET", "/apis/resource.k8s.io/v1/resourceslices")["items"]:
        if sl["spec"].get("nodeName") in names:
            api.call("DELETE", f"/apis/resource.k8s.io/v1/resourceslices/{sl['metadata']['name']}", ok=(200, 202, 404))
    for n in sorted(names):
        api.call("DELETE", f"/api/v1/nodes/{n}", ok=(200, 202, 404))
    placement_dra.cmd_cleanup(a)


def truth_of(truth, gpu, nics):
    """A GPU's class with the best of `nics` (NCCL picks it): (class, GDR)."""
    order = ["PIX", "PXB", "PHB", "NODE", "SYS"]
    best = min((truth.get(f"{gpu}|{n}", "SYS") for n in nics), key=lambda c: order.index(c) if c in order else 9)
    return best, best in GDR_CLASSES


def aligned_possible(node, free, k):
    """Whether `k` GPUs of `free` device names can each get their own same-NUMA NIC."""
    per = collections.defaultdict(lambda: [0, 0])
    for d in free:
        v = node["devices"].get(d)
        if v:
            per[v["numa"]][0 if v["role"] == "gpu" else 1] += 1
    return sum(min(g, n) for g, n in per.values()) >= k


class VendorPass:
    def __init__(self, a):
        self.a = a
        self.api = placement_dra.api_of(a)
        data = json.load(open(a.nodes))
        self.truth = data["truth"]
        self.own = a.mode == "own"
        nodes = data["own"] if self.own else data["vendor"]
        self.nodes = {n["name"]: n for n in nodes}
        self.label = placement_dra.NODE_LABEL if self.own else LABEL
        self.stream = json.load(open(a.stream))
        self.pods = f"/api/v1/namespaces/{a.ns}/pods"
        self.claims = f"/apis/resource.k8s.io/v1/namespaces/{a.ns}/resourceclaims"
        self.stats = collections.Counter()
        self.classes = collections.Counter()
        self.live = {}
        self.claim_of_pod = {}
        self.records = []
        self.why = collections.Counter()

    def pod(self, name, labels, claims, sched, node=None):
        return placement_dra.claim_pod(self.a.ns, self.label, name, labels, claims, sched, node)

    def occupy(self):
        """Per node, seeded: up to half its GPUs held, each with a NIC on its root where
        there is one (a pair leaves whole), by one allocated claim pinned by address."""
        names = []
        for name in sorted(self.nodes):
            n = self.nodes[name]
            rng = placement_dra.Pcg64.derive(self.a.seed, name)
            reqs = []
            if self.own:
                gpus = rng.sample(n["gpus"], rng.below(len(n["gpus"]) // 2 + 1))
                for i, b in enumerate(gpus):
                    reqs.append({"name": f"gpu{i}", "exactly": {"deviceClassName": "gpu.topoalign.dev", "selectors": [
                        {"cel": {"expression": f'device.attributes["{STD}"].pciBusID == "{b}"'}}]}})
            else:
                gpus = [d for d, v in n["devices"].items() if v["role"] == "gpu"]
                taken = rng.sample(sorted(gpus), rng.below(len(gpus) // 2 + 1))
                near_held = set()
                for i, g in enumerate(taken):
                    gb = n["devices"][g]["bdf"]
                    reqs.append({"name": f"gpu{i}", "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": [
                        {"cel": {"expression": f'device.attributes["{STD}"].pciBusID == "{gb}"'}}]}})
                    near = sorted(d for d, v in n["devices"].items()
                                  if v["role"] == "nic" and self.truth.get(f"{gb}|{v['truth']}") in GDR_CLASSES)
                    if near:
                        v = n["devices"][near[0]]
                        near_held.add(near[0])
                        expr, cls = ((f'device.attributes["{STD}"].pciBusID == "{v["bdf"]}"', "sriov-rdma")
                                     if n["driver"] == SRIOV else
                                     (f'device.attributes["dra.net"].pciAddress == "{v["bdf"]}"', "dranet.net"))
                        reqs.append({"name": f"nic{i}", "exactly": {"deviceClassName": cls, "selectors": [
                            {"cel": {"expression": expr}}]}})
            if not self.own and n["driver"] == DRANET:
                # A NIC held without its GPU (dranet nodes only: there the NUMA rung can
                # take over; an SR-IOV VF publishes its NUMA node only as the compat key, which
                # no GPU driver writes, so there a GPU without its VF could only fall back).
                lone = sorted(d for d, v in n["devices"].items() if v["role"] == "nic" and d not in near_held)
                for j, d in enumerate(rng.sample(lone, rng.below(3))):
                    reqs.append({"name": f"lone{j}", "exactly": {"deviceClassName": "dranet.net", "selectors": [
                        {"cel": {"expression": f'device.attributes["dra.net"].pciAddress == "{n["devices"][d]["bdf"]}"'}}]}})
            if not reqs:
                continue
            cname = f"occ-{name}"
            self.api.call("POST", self.claims, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                                "metadata": {"name": cname}, "spec": {"devices": {"requests": reqs}}})
            self.api.call("POST", self.pods, self.pod(cname, {"vendor": "occupancy"}, [{"name": "held", "resourceClaimName": cname}],
                                                      "default-scheduler", node=name))
            names.append(cname)
        pending = set(names)

        def bound():
            for p in self.api.call("GET", self.pods + self.api.q(labelSelector="vendor=occupancy"))["items"]:
                if p["spec"].get("nodeName"):
                    pending.discard(p["metadata"]["name"])
            return not pending

        if not poll(bound, time.time() + 120, every=0.5):
            raise RuntimeError(f"occupancy pods not bound in 120 s: {sorted(pending)[:5]}")

    def held(self):
        """Devices held by every allocated claim of the namespace, per node: {node: {device}}."""
        out = collections.defaultdict(set)
        for c in self.api.call("GET", self.claims)["items"]:
            alloc = (c.get("status", {}).get("allocation") or {}).get("devices", {}).get("results", [])
            for r in alloc:
                if r["pool"] in self.nodes:
                    out[r["pool"]].add(r["device"])
        return out

    def claim_results(self, pod):
        for s in pod.get("status", {}).get("resourceClaimStatuses", []):
            if s.get("resourceClaimName"):
                c = self.api.call("GET", f"{self.claims}/{s['resourceClaimName']}")
                return s["resourceClaimName"], (c.get("status", {}).get("allocation") or {}).get("devices", {}).get("results", [])
        return None, []

    def record(self, spec, pod, held):
        node = self.nodes[pod["spec"]["nodeName"]]
        cname, results = self.claim_results(pod)
        self.claim_of_pod[pod["metadata"]["name"]] = cname
        if self.own:
            ranks = [node["ranks"][r["device"]][0] for r in results]
            classes = [node["ranks"][r["device"]][1] for r in results]
            gdr = all(r <= 1 for r in ranks)
            cross = any(c == "SYS" for c in classes)
            rec = {"pod": pod["metadata"]["name"], "node": node["name"], "classes": classes, "gdr": gdr, "cross": cross,
                   "aligned_choice": None}
        else:
            devs = [node["devices"].get(r["device"]) for r in results]
            gpus = [d for d in devs if d and d["role"] == "gpu"]
            nics = [d for d in devs if d and d["role"] == "nic"]
            if len(gpus) != spec["pairs"] or len(nics) != spec["pairs"]:
                raise RuntimeError(f"claim {cname}: {len(gpus)} GPUs and {len(nics)} NICs for {spec['pairs']} pairs: {results}")
            if len({g["bdf"] for g in gpus}) != len(gpus):
                raise RuntimeError(f"claim {cname}: one GPU twice: {results}")
            got = [truth_of(self.truth, g["truth"], [n["truth"] for n in nics]) for g in gpus]
            classes = [c for c, _ in got]
            gdr = all(g for _, g in got)
            cross = any(c == "SYS" for c in classes)
            mine = {r["device"] for r in results}
            free = (set(node["devices"]) - held.get(node["name"], set())) | mine
            rec = {"pod": pod["metadata"]["name"], "node": node["name"], "classes": classes, "gdr": gdr, "cross": cross,
                   "aligned_choice": aligned_possible(node, free, spec["pairs"]) if cross else None,
                   "pairs": spec["pairs"], "batch": int(pod["metadata"]["labels"]["vendor-batch"]),
                   "rungs": sorted({r["request"].split("/")[-1] for r in results if "/" in r["request"]})}
        for c in rec["classes"]:
            self.classes[c] += 1
        self.records.append(rec)

    def delete(self, names):
        claims = [self.claim_of_pod.get(n) for n in names]
        placement_dra.delete_pods(self.api, self.pods, self.claims, names, claims)

    def teardown(self):
        placement_dra.delete_all(self.api, self.pods, self.claims)

    def template(self, s):
        return f"dra-pairs-{s['pairs']}" if self.own else f"vendor-{s['family']}-{s['pairs']}"

    def run(self):
        t0 = time.time()
        self.occupy()
        B = self.a.batch
        nb = (len(self.stream) + B - 1) // B
        for b in range(nb):
            chunk = self.stream[b * B:(b + 1) * B]
            names = []
            for s in chunk:
                name = f"{self.a.tag}-{s['index']:04d}"
                names.append(name)
                self.api.call("POST", self.pods, self.pod(name, {"vendor-run": self.a.tag, "vendor-batch": str(b)},
                                                          [{"name": "pairs", "resourceClaimTemplateName": self.template(s)}],
                                                          self.a.scheduler))
            dec = wait_decided(self.api, self.pods, f"vendor-run={self.a.tag},vendor-batch={b}", names, self.a.decide_timeout,
                               unschedulable=lambda c: c.get("message", "").startswith("0/"))
            held = self.held()
            drop = []
            for s, name in zip(chunk, names):
                state, obj = dec[name]
                self.stats[state] += 1
                if state == "bound":
                    self.record(s, obj, held)
                    self.live[name] = b
                else:
                    drop.append(name)
                    if obj:
                        self.claim_of_pod[name] = self.claim_results(obj)[0]
                        why = [c.get("message", "") for c in obj.get("status", {}).get("conditions", [])
                               if c.get("type") == "PodScheduled"]
                        self.why[f"{s['family']}-{s['pairs']}: {why[0][:160] if why else state}"] += 1
            leave = [n for n, at in self.live.items() if at <= b - self.a.lifetime]
            if b == nb - 1 and self.a.explain:
                self.explain_check()
            for n in leave:
                del self.live[n]
            self.delete(drop + leave)
            log(f"{self.a.tag} batch {b + 1}/{nb}: {dict(self.stats)}")
        self.teardown()
        recs = self.records
        return {"tag": self.a.tag, "mode": self.a.mode, "scheduler": self.a.scheduler, "seed": self.a.seed,
                "stats": dict(self.stats), "classes": dict(self.classes),
                "gdrPods": sum(r["gdr"] for r in recs), "crossPods": sum(r["cross"] for r in recs),
                "crossWithChoice": sum(bool(r["aligned_choice"]) for r in recs),
                "bound": len(recs), "seconds": round(time.time() - t0, 1), "explain": getattr(self, "explained", None),
                "unschedulableWhy": dict(self.why), "records": recs}

    def explain_check(self):
        """`explain --all` against the claims and the truth, on the pods bound now."""
        out = subprocess.run([TOPOALIGN, "explain", "--all", "--profile", PROFILE, "-o", "json",
                              "--kubeconfig", os.environ["KUBECONFIG"]], capture_output=True, text=True)
        if out.returncode not in (0, 1):
            raise RuntimeError(f"explain --all: rc {out.returncode}: {out.stderr.strip()[:600]}")
        e = json.loads(out.stdout)
        by_pod = {p["pod"].split("/", 1)[1]: p for p in e["pods"]}
        bad = []
        checked = 0
        for p in self.api.call("GET", self.pods + self.api.q(labelSelector=f"vendor-run={self.a.tag}"))["items"]:
            name = p["metadata"]["name"]
            if not p["spec"].get("nodeName"):
                continue
            node = self.nodes[p["spec"]["nodeName"]]
            _, results = self.claim_results(p)
            devs = [node["devices"][r["device"]] for r in results]
            want_g = sorted(d["bdf"] for d in devs if d["role"] == "gpu")
            want_n = sorted({d["bdf"] for d in devs if d["role"] == "nic"})
            x = by_pod.get(name)
            if x is None:
                bad.append(f"{name}: missing from explain --all")
                continue
            got_g = sorted({q["gpu"] for q in x["pairs"]["pairs"]})
            got_n = sorted({q["nic"] for q in x["pairs"]["pairs"]})
            if got_g != want_g or got_n != want_n:
                bad.append(f"{name}: explain GPUs {got_g} NICs {got_n}, claim {want_g} {want_n}")
                continue
            truth = {d["bdf"]: d["truth"] for d in devs}
            for q in x["pairs"]["pairs"]:
                want = self.truth.get(f"{truth[q['gpu']]}|{truth[q['nic']]}")
                if node["layout"] == "sriov":
                    # VFs are not in the profile: classed on the slices (same root: PHB).
                    want = {"PIX": "PHB", "PXB": "PHB"}.get(want, want)
                if q.get("class") != want:
                    bad.append(f"{name}: {q['gpu']}→{q['nic']} explain {q.get('class')}, plan {want}")
            checked += 1
        self.explained = {"checked": checked, "bad": bad[:10], "badCount": len(bad), "summary": e["summary"]}
        if self.a.explain:
            json.dump(self.explained, open(self.a.explain, "w"))


def cmd_run(a):
    res = VendorPass(a).run()
    json.dump(res, open(a.out, "w"))
    print(json.dumps(res))


def cmd_compare(a):
    load = lambda spec: [json.load(open(f)) for f in spec.split(",")]
    stock, ext, own = load(a.stock), load(a.extender), load(a.own)
    tot = lambda rs, k: sum(r[k] for r in rs)
    uns = lambda rs: sum(r["stats"].get("unschedulable", 0) for r in rs)
    ok_gdr, ok_cross = True, True
    for s, e, o in zip(stock, ext, own):
        print(f"FIGURE vendor seed {s['seed']}: pods with GDR on every GPU stock {s['gdrPods']} vs extender {e['gdrPods']} "
              f"(own driver {o['gdrPods']}); cross-NUMA pods {s['crossPods']} vs {e['crossPods']} (own {o['crossPods']}), "
              f"of them with an aligned choice on their node {s['crossWithChoice']} vs {e['crossWithChoice']}; "
              f"unschedulable {uns([s])} vs {uns([e])} (own {uns([o])}); bound {s['bound']} vs {e['bound']} (own {o['bound']})")
        ok_gdr &= e["gdrPods"] >= s["gdrPods"]
        ok_cross &= e["crossWithChoice"] == 0
    for side, rs in (("stock", stock), ("extender", ext), ("own driver", own)):
        classes = collections.Counter()
        for r in rs:
            classes.update(r["classes"])
        cls = " ".join(f"{c}×{classes[c]}" for c in ("PIX", "PXB", "PHB", "NODE", "SYS") if classes.get(c))
        print(f"FIGURE vendor sum of {len(rs)} seeds, {side} ({rs[0]['scheduler']}): bound {tot(rs, 'bound')}, "
              f"unschedulable {uns(rs)}, pods with GDR on every GPU {tot(rs, 'gdrPods')}, cross-NUMA pods "
              f"{tot(rs, 'crossPods')} ({tot(rs, 'crossWithChoice')} with an aligned choice); pairs {cls}")
    for side, rs in (("stock", stock), ("extender", ext), ("own driver", own)):
        why = collections.Counter()
        for r in rs:
            why.update(r.get("unschedulableWhy", {}))
        for w, c in why.most_common(3):
            print(f"INFO vendor {side} unschedulable ×{c}: {w}")
    gap = tot(own, "gdrPods") - tot(ext, "gdrPods")
    print(f"FIGURE vendor gap to topoalign's own driver: {gap} more pods with GDR on every GPU on the own driver "
          f"({tot(own, 'gdrPods')} of {tot(own, 'bound')} bound) than on NVIDIA's driver with dranet/SR-IOV and the "
          f"extender ({tot(ext, 'gdrPods')} of {tot(ext, 'bound')}); the own driver's nodes are whole dgx-h100s with pair "
          f"devices down to NODE, a third of the vendor nodes carry half the NICs and the templates take aligned pairs only")
    print(f"VERDICT {'ok' if ok_cross else 'worse'} with the extender no pod got a cross-NUMA pair where its node had an "
          f"aligned choice: {[e['crossWithChoice'] for e in ext]} per seed")
    print(f"VERDICT {'ok' if ok_gdr else 'worse'} pods with GDR on every GPU, extender >= stock on every seed: "
          f"{[(s['gdrPods'], e['gdrPods']) for s, e in zip(stock, ext)]}")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("setup")
    s.add_argument("--count", type=int, default=12)
    s.add_argument("--own", type=int, default=8)
    s.add_argument("--ns", required=True)
    s.add_argument("--out", required=True)
    placement_dra.add_api(s)
    s = sub.add_parser("stream")
    s.add_argument("--count", type=int, default=40)
    s.add_argument("--seed", type=int, default=21)
    s = sub.add_parser("run")
    s.add_argument("--nodes", required=True)
    s.add_argument("--stream", required=True)
    s.add_argument("--mode", choices=["vendor", "own"], required=True)
    s.add_argument("--scheduler", required=True)
    s.add_argument("--tag", required=True)
    s.add_argument("--ns", required=True)
    s.add_argument("--seed", type=int, default=21)
    s.add_argument("--out", required=True)
    s.add_argument("--batch", type=int, default=10)
    s.add_argument("--lifetime", type=int, default=2)
    s.add_argument("--decide-timeout", type=float, default=60)
    s.add_argument("--explain", help="check explain --all at the last batch, its result into this file")
    placement_dra.add_api(s)
    s = sub.add_parser("compare")
    s.add_argument("--stock", required=True)
    s.add_argument("--extender", required=True)
    s.add_argument("--own", required=True)
    s = sub.add_parser("cleanup")
    placement_dra.add_api(s)
    a = p.parse_args()
    {"setup": cmd_setup, "stream": cmd_stream, "run": cmd_run, "compare": cmd_compare, "cleanup": cmd_cleanup}[a.cmd](a)


if __name__ == "__main__":
    main()
