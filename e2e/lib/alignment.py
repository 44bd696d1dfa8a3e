#!/usr/bin/env python3
"""Reads what the scheduler allocated and says which devices it used, for the alignment
scenarios (standard library only).

  alignment.py used   --slices S.json --claims C.json --discover D.json [--except NS/NAME]
      prints a `topoalign plan --used` file (JSON) for the devices the allocated claims hold:
      GPUs by PCI address; NIC functions, a pair on a physical NIC taking one function of it
      (its PF, then its VFs in order), as the driver's NIC counter counts them.
  alignment.py pairs  --slices S.json --claim CLAIM.json
      prints one line per allocated device: kind device class rank gpuBDF nicBDF
  alignment.py pairing --slices S.json --claim CLAIM.json
      for a claim of plain GPUs and NICs: the best one-to-one pairing of its GPUs with its
      NICs by the published pair classes (SYS where no pair is published), as sorted classes
S.json: the node's ResourceSlices (JSON array); C.json: kubectl get resourceclaims -A -o json.
"""
import argparse
import json
import sys

DOMAIN = "topoalign.dev"


def attr(dev, name):
    """The value of attribute `name` (bare or under the driver's domain) or None."""
    attrs = dev.get("attributes") or {}
    for key in (name, DOMAIN + "/" + name):
        if key in attrs:
            v = attrs[key]
            for kind in ("string", "int", "bool", "version"):
                if kind in v:
                    return v[kind]
    return None


def devices_by_name(slices):
    out = {}
    for s in slices:
        pool = s["spec"]["pool"]["name"]
        for d in s["spec"].get("devices") or []:
            out[(pool, d["name"])] = d
    return out


def describe(dev, name):
    """kind, class, rank, gpu BDF, nic BDF of a published device."""
    gpu, nic = attr(dev, "gpuPciBusID"), attr(dev, "nicPciBusID")
    if gpu and nic:
        return "pair", attr(dev, "class"), attr(dev, "rank"), gpu, nic
    bdf = attr(dev, "resource.kubernetes.io/pciBusID")
    kind = attr(dev, "type") or ("gpu" if "gpu" in name else "nic")
    return kind, "-", "-", bdf if kind == "gpu" else None, bdf if kind != "gpu" else None


def results(claim, driver_devices):
    alloc = (claim.get("status") or {}).get("allocation") or {}
    for r in (alloc.get("devices") or {}).get("results") or []:
        if r.get("driver") != DOMAIN:
            continue
        key = (r["pool"], r["device"])
        if key in driver_devices:
            yield r["device"], driver_devices[key]


def cmd_used(a):
    slices = json.load(open(a.slices))
    claims = json.load(open(a.claims))["items"]
    disc = json.load(open(a.discover))
    pci = disc["pci"]
    # functions of each physical NIC: PF first, then its VFs
    functions = {}
    for nic in disc["nics"]:
        pf = pci[nic["pci"]]["bdf"]
        sriov = nic.get("sriov") or {}
        if sriov.get("role") == "vf":
            continue
        functions[pf] = [pf] + list(sriov.get("vfs") or [])
    vf_to_pf = {vf: pf for pf, fs in functions.items() for vf in fs[1:]}
    devs = devices_by_name(slices)
    gpus, nics = set(), []
    taken = {pf: 0 for pf in functions}
    for c in claims:
        ref = c["metadata"]["namespace"] + "/" + c["metadata"]["name"]
        if ref == a.except_claim:
            continue
        for name, dev in results(c, devs):
            _, _, _, gpu, nic = describe(dev, name)
            if gpu:
                gpus.add(gpu)
            if nic:
                if nic in functions:
                    taken[nic] += 1  # a pair on a physical NIC: one of its functions
                else:
                    nics.append(nic)  # a function named directly
    named = set(nics)
    for pf, k in taken.items():
        nics.extend([f for f in functions[pf] if f not in named][:k])
    json.dump({"gpus": sorted(gpus), "nics": sorted(set(nics))}, sys.stdout)
    print()


def cmd_pairs(a):
    slices = json.load(open(a.slices))
    claim = json.load(open(a.claim))
    devs = devices_by_name(slices)
    for name, dev in results(claim, devs):
        kind, cls, rank, gpu, nic = describe(dev, name)
        print(kind, name, cls, rank, gpu or "-", nic or "-")


RANKS = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4}


def cmd_pairing(a):
    import itertools

    slices = json.load(open(a.slices))
    claim = json.load(open(a.claim))
    devs = devices_by_name(slices)
    klass = {}
    for (pool, name), d in devs.items():
        gpu, nic = attr(d, "gpuPciBusID"), attr(d, "nicPciBusID")
        if gpu and nic:
            klass[(gpu, nic)] = attr(d, "class")
    gpus, nics = [], []
    for name, dev in results(claim, devs):
        kind, _, _, gpu, nic = describe(dev, name)
        if kind == "pair":
            gpus.append(gpu)
            nics.append(nic)
        elif gpu:
            gpus.append(gpu)
        elif nic:
            nics.append(nic)
    best = None
    k = min(len(gpus), len(nics))
    for perm in itertools.permutations(nics, k):
        cls = sorted((klass.get((g, n), "SYS") for g, n in zip(gpus, perm)), key=RANKS.get)
        key = sorted((RANKS[c] for c in cls), reverse=True)  # the worst pair first
        if best is None or key < best[0]:
            best = (key, cls)
    print(" ".join(best[1] if best else []))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("used")
    u.add_argument("--slices", required=True)
    u.add_argument("--claims", required=True)
    u.add_argument("--discover", required=True)
    u.add_argument("--except", dest="except_claim", default="")
    u.set_defaults(func=cmd_used)
    q = sub.add_parser("pairs")
    q.add_argument("--slices", required=True)
    q.add_argument("--claim", required=True)
    q.set_defaults(func=cmd_pairs)
    r = sub.add_parser("pairing")
    r.add_argument("--slices", required=True)
    r.add_argument("--claim", required=True)
    r.set_defaults(func=cmd_pairing)
    a = p.parse_args()
    a.func(a)


if __name__ == "__main__":
    main()
