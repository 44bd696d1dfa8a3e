#!/usr/bin/env python3
"""Helpers of the gang scenario (e2e/scenarios/gang.sh).

  gang.py occupy --slices FILE --gpu-rails 0,1,2,3 --nic-rails 4,5,6,7 --matrix FILE --node N
                 --name C
      a ResourceClaim (JSON) holding, on node N's slices, the GPUs with a PIX NIC on
      --gpu-rails (classes from `topoalign matrix -o json`) and the NICs of --nic-rails: what is left free is GPUs whose own NIC is
      held and NICs far from them.
  gang.py check --slices-dir DIR --pods FILE --claims FILE --domains FILE --want-rails 4,5,6,7
               --matrix FILE
      per pod of a gang: its node, domain, the rails of its NICs, the class of each
      allocated GPU to the nearest NIC the pod holds (from `topoalign matrix -o json` of the
      nodes' profile), and how many of its GPUs got their own PIX NIC (JSON).
  gang.py kept --written FILE --stored FILE
      every value `topoalign gang` wrote (a List, JSON) that the API server did not keep as
      written in the objects read back (a List of the same objects, by kind and name): a
      field pruned by a CRD schema, or changed. Prints {"objects": N, "leaves": N,
      "lost": [...]} (JSON).
"""
import argparse
import glob
import json
import os
import sys

RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4}


def devices(slices):
    """(node, device name) -> (type, attributes as plain values) over a list of slices."""
    out = {}
    for s in slices:
        for d in s["spec"].get("devices", []):
            a = {k: next(iter(v.values())) for k, v in d.get("attributes", {}).items()}
            out[(s["spec"]["nodeName"], d["name"])] = a
    return out


class Matrix:
    """`topoalign matrix -o json`: the class of every device pair, by PCI address."""

    def __init__(self, path):
        m = json.load(open(path))
        self.index = {d["bdf"]: i for i, d in enumerate(m["devices"])}
        self.cells = m["cells"]
        self.n = len(m["devices"])
        if len(self.cells) != self.n * self.n:
            sys.exit(f"{path}: {len(self.cells)} cells for {self.n} devices, expected {self.n * self.n}")

    def cls(self, a, b):
        return self.cells[self.index[a] * self.n + self.index[b]]


def occupy(a):
    slices = json.load(open(a.slices))["items"]
    devs = devices([s for s in slices if s.get("kind", "ResourceSlice") == "ResourceSlice"])
    gpu_rails = {int(r) for r in a.gpu_rails.split(",")}
    nic_rails = {int(r) for r in a.nic_rails.split(",")}
    nics = {name: at for (n, name), at in devs.items() if at.get("type") == "nic"}
    held_nics = [at["resource.kubernetes.io/pciBusID"] for at in nics.values() if at.get("rail") in nic_rails]
    matrix = Matrix(a.matrix)
    rail_nics = [at["resource.kubernetes.io/pciBusID"] for at in nics.values() if at.get("rail") in gpu_rails]
    held_gpus = []
    for (n, name), at in devs.items():
        if at.get("type") != "gpu":
            continue
        gpu = at["resource.kubernetes.io/pciBusID"]
        if any(matrix.cls(gpu, nic) == "PIX" for nic in rail_nics):
            held_gpus.append(gpu)
    if len(held_gpus) != len(gpu_rails) or len(held_nics) != len(nic_rails):
        sys.exit(f"occupy {a.node}: found GPUs {held_gpus} for rails {sorted(gpu_rails)} and NICs {held_nics} for rails {sorted(nic_rails)}")
    reqs = []
    for cls, bdfs in (("gpu", sorted(held_gpus)), ("nic", sorted(held_nics))):
        for i, b in enumerate(bdfs):
            reqs.append({"name": f"{cls}{i}", "exactly": {"deviceClassName": f"{cls}.topoalign.dev", "selectors": [
                {"cel": {"expression": f'device.attributes["resource.kubernetes.io"].pciBusID == "{b}"'}}]}})
    print(json.dumps({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": a.name},
                      "spec": {"devices": {"requests": reqs}}}))


def check(a):
    slices = []
    for f in glob.glob(os.path.join(a.slices_dir, "*-slices.json")):
        slices += json.load(open(f))["items"]
    devs = devices(slices)
    pods = json.load(open(a.pods))["items"]
    claims = json.load(open(a.claims))["items"]
    domains = json.load(open(a.domains))
    want = sorted(int(r) for r in a.want_rails.split(","))
    matrix = Matrix(a.matrix)
    out = {"pods": [], "problems": []}
    for p in pods:
        node = p["spec"].get("nodeName")
        mine = [c for c in claims if any(r.get("uid") == p["metadata"]["uid"] for r in c["metadata"].get("ownerReferences", []))]
        results = [r for c in mine for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", [])]
        got = [(r["pool"], r["device"]) for r in results]
        gpus, nics = [], []
        for key in got:
            at = devs.get(key, {})
            if at.get("type") == "pair":
                gpus.append(at["gpu"])
                nics.append(at["nic"])
            elif at.get("type") == "gpu":
                gpus.append(key[1])
            elif at.get("type") == "nic":
                nics.append(key[1])
        rails = sorted(devs.get((node, n), {}).get("rail", -1) for n in nics)
        bdf = lambda name: devs[(node, name)]["resource.kubernetes.io/pciBusID"]
        classes = []
        own = 0
        for g in gpus:
            cs = [matrix.cls(bdf(g), bdf(n)) for n in nics]
            classes.append(min(cs, key=RANK.get) if cs else "none")
            if "PIX" in cs:
                own += 1
        out["pods"].append({"pod": p["metadata"]["name"], "node": node, "domain": domains.get(node), "rails": rails,
                            "classes": sorted(classes, key=RANK.get), "ownPixNic": own, "gpus": len(gpus)})
        if rails != want:
            out["problems"].append(f'{p["metadata"]["name"]}: rails {rails}, want {want}')
        if len(gpus) != len(want) or any(RANK.get(c, 9) > 1 for c in classes):
            out["problems"].append(f'{p["metadata"]["name"]}: {len(gpus)} GPUs at {classes}, want {len(want)} at PXB or better')
    nodes = [x["node"] for x in out["pods"]]
    if len(set(nodes)) != len(nodes):
        out["problems"].append(f"two pods on one node: {nodes}")
    out["domains"] = sorted({str(x["domain"]) for x in out["pods"]})
    print(json.dumps(out))


def leaves(value, path=()):
    """(path, scalar) for every scalar under value; an empty list or object is a leaf too."""
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from leaves(v, path + (k,))
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            yield from leaves(v, path + (i,))
    else:
        yield path, value


def lookup(value, path):
    for p in path:
        if isinstance(value, dict) and isinstance(p, str) and p in value:
            value = value[p]
        elif isinstance(value, list) and isinstance(p, int) and p < len(value):
            value = value[p]
        else:
            return KeyError
    return value


def kept(a):
    written = json.load(open(a.written))["items"]
    stored = {(o["kind"], o["metadata"]["name"]): o for o in json.load(open(a.stored))["items"]}
    out = {"objects": len(written), "leaves": 0, "lost": []}
    for w in written:
        key = (w["kind"], w["metadata"]["name"])
        s = stored.get(key)
        if s is None:
            out["lost"].append(f"{key[0]}/{key[1]}: not stored")
            continue
        for path, v in leaves(w):
            out["leaves"] += 1
            got = lookup(s, path)
            if got is KeyError or got != v:
                where = ".".join(str(p) for p in path)
                out["lost"].append(f"{key[0]}/{key[1]} {where}: wrote {json.dumps(v)}, stored {'nothing' if got is KeyError else json.dumps(got)}")
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    o = sub.add_parser("occupy")
    o.add_argument("--slices", required=True)
    o.add_argument("--gpu-rails", required=True)
    o.add_argument("--nic-rails", required=True)
    o.add_argument("--matrix", required=True)
    o.add_argument("--node", required=True)
    o.add_argument("--name", required=True)
    c = sub.add_parser("check")
    c.add_argument("--slices-dir", required=True)
    c.add_argument("--pods", required=True)
    c.add_argument("--claims", required=True)
    c.add_argument("--domains", required=True)
    c.add_argument("--want-rails", required=True)
    c.add_argument("--matrix", required=True)
    k = sub.add_parser("kept")
    k.add_argument("--written", required=True)
    k.add_argument("--stored", required=True)
    a = ap.parse_args()
    {"occupy": occupy, "check": check, "kept": kept}[a.cmd](a)


if __name__ == "__main__":
    main()
