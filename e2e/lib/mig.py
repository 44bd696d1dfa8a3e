#!/usr/bin/env python3
"""MIG checks for e2e/scenarios/mig.sh, from the ResourceSlices and ResourceClaims as stored.

  mig.py slices  --slices S.json                         devices by type, counter sets
  mig.py alloc   --slices S.json --claims C.json         one line per allocated device:
                                                         claim device type profile gpu class
  mig.py twice   --slices S.json --claims C.json         counters (set/name) consumed by more
                                                         allocations than they hold; exit 1 if any
  mig.py best    --slices S.json --claims C.json --profile P --count N
                                                         the best pair classes N MIG pairs of P
                                                         can have on what the claims leave free
                                                         (exhaustive over distinct instances and
                                                         NIC functions; counters of 1 each)
"""
import argparse
import itertools
import json
import sys

RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4}


def devices(slices):
    out = {}
    for s in slices:
        for d in (s.get("spec", {}).get("devices") or []):
            out[d["name"]] = d
    return out


def attr(d, name):
    v = d.get("attributes", {}).get(name) or {}
    return v.get("string", v.get("int", v.get("bool")))


def allocated(claims):
    for c in claims.get("items", []):
        name = c["metadata"]["name"]
        alloc = (c.get("status") or {}).get("allocation") or {}
        for r in (alloc.get("devices") or {}).get("results") or []:
            yield name, r["device"]


def consumed(d):
    """(counterSet, counter) -> amount the device consumes."""
    out = {}
    for cc in d.get("consumesCounters") or []:
        for k, v in (cc.get("counters") or {}).items():
            out[(cc["counterSet"], k)] = out.get((cc["counterSet"], k), 0) + int(v["value"])
    return out


def capacity(slices):
    out = {}
    for s in slices:
        for cs in (s.get("spec", {}).get("sharedCounters") or []):
            for k, v in (cs.get("counters") or {}).items():
                out[(cs["name"], k)] = int(v["value"])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["slices", "alloc", "twice", "best"])
    ap.add_argument("--slices", required=True)
    ap.add_argument("--claims")
    ap.add_argument("--profile")
    ap.add_argument("--count", type=int)
    a = ap.parse_args()
    with open(a.slices) as f:
        slices = json.load(f)
    devs = devices(slices)
    claims = {"items": []}
    if a.claims:
        with open(a.claims) as f:
            claims = json.load(f)

    if a.cmd == "slices":
        by = {}
        for d in devs.values():
            key = attr(d, "type") or "?"
            by[key] = by.get(key, 0) + 1
        sets = sorted({k[0] for k in capacity(slices)})
        print(json.dumps({"devices": by, "counterSets": sets,
                          "migWithCounters": sum(1 for d in devs.values()
                                                 if attr(d, "type") in ("mig", "mig-pair")
                                                 and any(k for k in consumed(d)
                                                         if k[1].startswith("memory-slice-")))}))
        return 0

    if a.cmd == "alloc":
        for claim, dev in allocated(claims):
            d = devs.get(dev, {})
            print(claim, dev, attr(d, "type") or "-", attr(d, "profile") or "-",
                  attr(d, "gpu") or "-", attr(d, "class") or "-")
        return 0

    if a.cmd == "twice":
        cap = capacity(slices)
        used = {}
        holders = {}
        for claim, dev in allocated(claims):
            d = devs.get(dev)
            if d is None:
                print(f"unknown device {dev} in claim {claim}", file=sys.stderr)
                return 2
            for k, n in consumed(d).items():
                used[k] = used.get(k, 0) + n
                holders.setdefault(k, []).append(f"{claim}/{dev}")
        bad = [(k, used[k], cap.get(k, 0), holders[k]) for k in used if used[k] > cap.get(k, 0)]
        mem = sum(v for k, v in used.items() if k[1].startswith("memory-slice-"))
        print(json.dumps({"memorySlicesHeld": mem,
                          "over": [{"set": k[0], "counter": k[1], "used": u, "has": c, "by": h}
                                   for k, u, c, h in bad]}))
        return 1 if bad else 0

    # best
    cap = capacity(slices)
    used = {}
    for _, dev in allocated(claims):
        for k, n in consumed(devs[dev]).items():
            used[k] = used.get(k, 0) + n
    free = {k: cap[k] - used.get(k, 0) for k in cap}
    pairs = []
    for d in devs.values():
        if attr(d, "type") != "mig-pair" or attr(d, "profile") != a.profile:
            continue
        need = consumed(d)
        if all(free.get(k, 0) >= n for k, n in need.items()):
            pairs.append((RANK.get(attr(d, "class"), 9), attr(d, "class"), need))
    # every set of COUNT free pairs whose counters fit together; the lowest sorted ranks win
    best = None
    for combo in itertools.combinations(sorted(pairs, key=lambda p: p[0]), a.count):
        tot = {}
        ok = True
        for _, _, need in combo:
            for k, n in need.items():
                tot[k] = tot.get(k, 0) + n
                if tot[k] > free.get(k, 0):
                    ok = False
        if not ok:
            continue
        key = sorted(p[0] for p in combo)
        if best is None or key < best[0]:
            best = (key, sorted((p[1] for p in combo), key=lambda c: RANK.get(c, 9)))
    if best is None:
        print("none")
        return 1
    print(" ".join(best[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
