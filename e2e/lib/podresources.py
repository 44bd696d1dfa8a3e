#!/usr/bin/env python3
"""Fixed allocations for the podresources stand-in, and the checks of what the agent made
of them (scenario podresources).

  podresources.py alloc --discover D.json --seed S --release-first > alloc.json
      allocatable devices (GPUs by PCI address, or by UUID when the profile has them;
      SR-IOV VFs, else RDMA PFs), CPUs and memory per NUMA node, and a few pods holding
      devices and exclusive CPUs, chosen reproducibly from the seed. With --drop POD the
      same allocations without that pod.
  podresources.py expect --discover D.json --alloc alloc.json > expect.json
      the complement: per resource and NUMA node allocatable/available, per NUMA node CPUs
      allocatable/available, the used GPU and NIC addresses, the pods holding anything.
  podresources.py check-once --expect E --once agent-once.json
  podresources.py check-nrt --expect E --nrt nrt.json
      print one "ok ..." line, or "mismatch ..." lines and exit 1.
"""
import argparse
import json
import random
import sys


def cpu_list(text):
    out = []
    for part in filter(None, text.split(",")):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def inventory(d):
    """(gpus, nics, gpu_resource, nic_resource): lists of (id, bdf, numa)."""
    pci = d["pci"]

    def numa(i):
        return pci[i].get("numaNode", -1)

    vendor = d["gpus"][0]["vendor"] if d["gpus"] else "nvidia"
    gres = "amd.com/gpu" if vendor == "amd" else "nvidia.com/gpu"
    gpus = [(g.get("uuid") or pci[g["pci"]]["bdf"], pci[g["pci"]]["bdf"], numa(g["pci"])) for g in d["gpus"]]
    by_bdf = {p["bdf"]: i for i, p in enumerate(pci)}
    vfs = []
    for n in d["nics"]:
        if (n.get("sriov") or {}).get("role") == "pf":
            vfs.extend((v, v, numa(by_bdf[v])) for v in n["sriov"].get("vfs", []) if v in by_bdf)
    if vfs:
        return gpus, vfs, gres, "nvidia.com/sriov-rdma-vf"
    pfs = [(pci[n["pci"]]["bdf"], pci[n["pci"]]["bdf"], numa(n["pci"])) for n in d["nics"] if n.get("rdma")]
    return gpus, pfs, gres, "rdma/ib"


def dev(res, item):
    return {"resource": res, "id": item[0], "numa": [item[2]] if item[2] >= 0 else []}


def cmd_alloc(a):
    d = json.load(open(a.discover))
    gpus, nics, gres, nres = inventory(d)
    rng = random.Random(a.seed)
    cpus = {n["id"]: cpu_list(n["cpus"]) for n in d["numa"]}
    allocatable_cpus = sorted(c for cs in cpus.values() for c in cs)
    memory = [{"type": "memory", "size": n.get("memory_kib", 0) * 1024, "numa": [n["id"]]} for n in d["numa"]]
    g = gpus[:]
    n = nics[:]
    rng.shuffle(g)
    rng.shuffle(n)
    numa0 = sorted(cpus)[0]
    pods = [
        # two GPUs, two NICs, eight exclusive CPUs and memory on one NUMA node
        {"namespace": "train", "name": "big", "uid": "uid-big", "containers": [
            {"name": "main", "devices": [dev(gres, x) for x in g[0:2]] + [dev(nres, x) for x in n[0:2]],
             "cpus": cpus[numa0][2:10], "memory": [{"type": "memory", "size": 64 << 30, "numa": [numa0]}]},
            {"name": "sidecar", "devices": [], "cpus": [], "memory": []}]},
        # one GPU and one NIC in a second container
        {"namespace": "train", "name": "small", "uid": "uid-small", "containers": [
            {"name": "init-like", "devices": [], "cpus": [], "memory": []},
            {"name": "main", "devices": [dev(gres, g[2]), dev(nres, n[2])], "cpus": [], "memory": []}]},
        # exclusive CPUs only
        {"namespace": "svc", "name": "cpu-only", "uid": "uid-cpu", "containers": [
            {"name": "main", "devices": [], "cpus": cpus[numa0][10:14], "memory": []}]},
        # nothing exclusive: not a holder
        {"namespace": "svc", "name": "plain", "uid": "uid-plain", "containers": [
            {"name": "main", "devices": [], "cpus": [], "memory": []}]},
    ]
    if a.drop:
        pods = [p for p in pods if p["name"] != a.drop]
    out = {
        "allocatable": {
            "devices": [dev(gres, x) for x in gpus] + [dev(nres, x) for x in nics],
            "cpus": allocatable_cpus,
            "memory": memory,
        },
        "pods": pods,
    }
    json.dump(out, sys.stdout, indent=1)


def cmd_expect(a):
    d = json.load(open(a.discover))
    al = json.load(open(a.alloc))
    gpus, nics, gres, nres = inventory(d)
    bdf_of = {x[0]: x[1] for x in gpus + nics}
    gpu_ids = {x[0] for x in gpus}
    held, held_cpus, holders = set(), set(), []
    for p in al["pods"]:
        holds = False
        for c in p["containers"]:
            for x in c["devices"]:
                held.add((x["resource"], x["id"]))
                holds = True
            held_cpus.update(c["cpus"])
            holds = holds or bool(c["cpus"])
        if holds:
            holders.append(f'{p["namespace"]}/{p["name"]}')
    zones = {}
    for x in al["allocatable"]["devices"]:
        numa = str(x["numa"][0] if x["numa"] else -1)
        z = zones.setdefault(x["resource"], {}).setdefault(numa, {"allocatable": 0, "available": 0})
        z["allocatable"] += 1
        if (x["resource"], x["id"]) not in held:
            z["available"] += 1
    cpus = {}
    alloc_cpus = set(al["allocatable"]["cpus"])
    for n in d["numa"]:
        mine = set(cpu_list(n["cpus"])) & alloc_cpus
        cpus[str(n["id"])] = [len(mine), len(mine - held_cpus)]
    out = {
        "usedGpus": sorted(bdf_of[i] for r, i in held if i in gpu_ids),
        "usedNics": sorted(bdf_of[i] for r, i in held if i not in gpu_ids),
        "freeGpus": sorted(x[1] for x in gpus if (gres, x[0]) not in held),
        "pods": sorted(holders),
        "zones": zones,
        "cpus": cpus,
        "usedCpus": len(held_cpus),
    }
    json.dump(out, sys.stdout, indent=1)


def compare(label, got, want, bad):
    if got != want:
        bad.append(f"mismatch {label}: published {json.dumps(got, sort_keys=True)}, fixed allocations give {json.dumps(want, sort_keys=True)}")


def finish(bad, ok):
    if bad:
        print("\n".join(bad))
        sys.exit(1)
    print("ok " + ok)


def cmd_check_once(a):
    e = json.load(open(a.expect))
    o = json.load(open(a.once))
    r = o["report"]
    bad = []
    compare("used GPUs", sorted(r["used"]["gpus"]), e["usedGpus"], bad)
    compare("used NICs", sorted(r["used"]["nics"]), e["usedNics"], bad)
    compare("pods holding devices or CPUs", sorted(r["pods"]), e["pods"], bad)
    compare("zones", {res: {k: v for k, v in z.items()} for res, z in r["zones"].items()}, e["zones"], bad)
    compare("cpus per NUMA (allocatable, available)", {k: list(v) for k, v in r["cpus"].items()}, e["cpus"], bad)
    compare("unknown device IDs", r["unknownIds"], [], bad)
    free = sorted({p.split(">")[0] for p in r["freePairs"].split(";") if p})
    compare("GPUs in free-pairs", free, e["freeGpus"], bad)
    finish(bad, f'{len(e["pods"])} holders, {len(e["usedGpus"])} GPUs and {len(e["usedNics"])} NICs used, '
                f'{len(e["freeGpus"])} GPUs free, {e["usedCpus"]} exclusive CPUs')


def cmd_check_nrt(a):
    e = json.load(open(a.expect))
    n = json.load(open(a.nrt))
    bad = []
    ann = n["metadata"].get("annotations", {})
    used = json.loads(ann.get("topoalign.dev/used", "{}"))
    compare("annotation topoalign.dev/used gpus", sorted(used.get("gpus", [])), e["usedGpus"], bad)
    compare("annotation topoalign.dev/used nics", sorted(used.get("nics", [])), e["usedNics"], bad)
    compare("annotation topoalign.dev/pods", sorted(json.loads(ann.get("topoalign.dev/pods", "[]"))), e["pods"], bad)
    zones = {}
    cpus = {}
    for z in n.get("zones", []):
        if z.get("type") != "Node" or not z["name"].startswith("node-"):
            bad.append(f'mismatch zone {z.get("name")}: expected type Node named node-<id>')
            continue
        numa = z["name"][len("node-"):]
        for r in z.get("resources", []):
            if r["name"] == "cpu":
                cpus[numa] = [int(r["allocatable"]), int(r["available"])]
            else:
                zones.setdefault(r["name"], {})[numa] = {"allocatable": int(r["allocatable"]), "available": int(r["available"])}
                if int(r["capacity"]) != int(r["allocatable"]):
                    bad.append(f'mismatch zone {z["name"]} {r["name"]}: capacity {r["capacity"]} != allocatable {r["allocatable"]}')
    want_zones = {res: {k: v for k, v in z.items() if k != "-1"} for res, z in e["zones"].items()}
    compare("NUMA zones (per resource allocatable/available)", zones, want_zones, bad)
    compare("NUMA zones cpu (allocatable, available)", cpus, e["cpus"], bad)
    free = sorted({p.split(">")[0] for p in ann.get("topoalign.dev/free-pairs", "").split(";") if p})
    compare("GPUs in annotation topoalign.dev/free-pairs", free, e["freeGpus"], bad)
    finish(bad, f'{len(zones)} resources over {len(cpus)} NUMA zones equal the complement of the fixed allocations')


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("alloc")
    s.add_argument("--discover", required=True)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--drop")
    s = sub.add_parser("expect")
    s.add_argument("--discover", required=True)
    s.add_argument("--alloc", required=True)
    s = sub.add_parser("check-once")
    s.add_argument("--expect", required=True)
    s.add_argument("--once", required=True)
    s = sub.add_parser("check-nrt")
    s.add_argument("--expect", required=True)
    s.add_argument("--nrt", required=True)
    a = p.parse_args()
    {"alloc": cmd_alloc, "expect": cmd_expect, "check-once": cmd_check_once, "check-nrt": cmd_check_nrt}[a.cmd](a)


if __name__ == "__main__":
    main()
