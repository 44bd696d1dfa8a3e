#!/usr/bin/env bash
# Issue 24, a multi-node job on the real control plane: `topoalign gang --dialect kube`
# writes a Workload and PodGroup (scheduling.k8s.io/v1beta1, gang minCount, a topology
# constraint on the NVLink-domain label) and pods whose ResourceClaimTemplate pins their
# GPU+NIC pairs to rails 4-7 (`distinctAttribute` on the rail). First fit alone would take
# the pairs of rails 0-3 and fit two pods on a node (domain a could then hold the gang):
# only the rail pin makes one pod per node and domain b the only fit. The real kube-scheduler,
# with GenericWorkload and TopologyAwareWorkloadScheduling on, places them.
# Nodes: 5 dgx-h100 nodes with the slices `topoalign driver --rails deploy/gang/rails.yaml
# --dry-run` publishes (rail i = the NIC nearest GPU i), domain "a" of 2 nodes and domain
# "b" of 3, by the Topograph label accelerator.topograph.run/domain.
#   1. a gang of 3 pods × 4 pairs: all bound, all in domain b (a is too small), one pod per
#      node, each pod's 4 pairs on rails 4,5,6,7 at PXB or better;
#   2. a second such gang while b is full: no pod of it binds (all or nothing; a holds
#      only 2 of its 3 pods);
#   3. the first gang deleted: the second binds whole, in domain b.
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$E2E_DIR/lib/cluster.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"

need_topoalign_cmd gang
need_topoalign_cmd driver

D=$SCEN_DIR
NS=gang
KEY=accelerator.topograph.run/domain
SCHED=topoalign-gang-scheduler
RAILS=$REPO_DIR/deploy/gang/rails.yaml
NODES=(gang-a-0:a gang-a-1:a gang-b-0:b gang-b-1:b gang-b-2:b)
make_namespace "$NS"

# ---- nodes, their slices and the driver's DeviceClasses
for nd in "${NODES[@]}"; do
  n=${nd%%:*}
  make_node "$n" "$KEY=${nd##*:}" || { fail "gang: node $n"; exit 1; }
  "$TOPOALIGN" driver --profile dgx-h100 --node-name "$n" --rails "$RAILS" --dry-run -o json > "$D/$n.json" 2> "$D/$n.err" ||
    { fail "gang: topoalign driver --dry-run --rails for $n: $(cat "$D/$n.err")"; exit 1; }
  jq '{apiVersion: "v1", kind: "List", items: [.items[] | select(.kind == "ResourceSlice")]}' "$D/$n.json" > "$D/$n-slices.json"
  K apply -f "$D/$n-slices.json" > /dev/null || { fail "gang: applying the slices of $n"; exit 1; }
done
jq '{apiVersion: "v1", kind: "List", items: [.items[] | select(.kind == "DeviceClass")]}' "$D/${NODES[0]%%:*}.json" > "$D/classes.json"
K apply -f "$D/classes.json" > /dev/null || { fail "gang: applying the DeviceClasses"; exit 1; }
K get nodes -l "$KEY" -o yaml > "$D/nodes.yaml"

# ---- a kube-scheduler with the workload gates on (the stock one keeps its defaults)
cat > "$D/scheduler-config.yaml" << EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: "$RUN/scheduler.kubeconfig"}
leaderElection: {leaderElect: false}
profiles:
- schedulerName: $SCHED
EOF
start_extra_scheduler "$SCHED" "$D/scheduler-config.yaml" --feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true ||
  { fail "gang: kube-scheduler with GenericWorkload and TopologyAwareWorkloadScheduling did not start (log: $RUN/logs/$SCHED.log)"; exit 1; }

# gang_apply NAME : `topoalign gang` for a 3-pod job NAME, its pods handed to $SCHED, applied
gang_apply() {
  cat > "$D/$1-job.yaml" << EOF
name: $1
pods: 3
pairsPerPod: 4
class: PXB
sameRails: true
rails: [4, 5, 6, 7]
domain: {key: $KEY, mode: required}
image: registry.k8s.io/pause:3.10
EOF
  "$TOPOALIGN" gang --job "$D/$1-job.yaml" --nodes "$D/nodes.yaml" -o json > "$D/$1.json" 2> "$D/$1.err" ||
    { fail "gang: topoalign gang --job $1: $(cat "$D/$1.err")"; return 1; }
  jq --arg s "$SCHED" '.items |= map(if .kind == "Pod" then .spec.schedulerName = $s else . end)' "$D/$1.json" > "$D/$1-applied.json"
  K -n "$NS" apply -f "$D/$1-applied.json" > "$D/$1-apply.out" 2>&1 ||
    { fail "gang: kube-apiserver refused the objects of $1: $(tail -3 "$D/$1-apply.out")"; return 1; }
}
# bound_count NAME : how many of gang NAME's pods have a node
bound_count() {
  K -n "$NS" get pods -l "topoalign.dev/gang=$1" -o json | jq '[.items[] | select(.spec.nodeName != null)] | length'
}
all_bound() { [ "$(bound_count "$1")" = 3 ]; }
# check_gang NAME : every pod of NAME in domain b, one per node, 4 pairs on rails 4-7 at rank <= 1
check_gang() {
  local name=$1
  K -n "$NS" get pods -l "topoalign.dev/gang=$name" -o json > "$D/$name-pods.json"
  K -n "$NS" get resourceclaims -o json > "$D/claims.json"
  python3 - "$D/$name-pods.json" "$D/claims.json" "$D/node-domains.json" "$D" > "$D/$name-check.json" << 'PY'
import json, sys, glob, os
pods = json.load(open(sys.argv[1]))["items"]
claims = json.load(open(sys.argv[2]))["items"]
domain = json.load(open(sys.argv[3]))
d = sys.argv[4]
attrs = {}
for f in glob.glob(os.path.join(d, "gang-*-slices.json")):
    for s in json.load(open(f))["items"]:
        for dev in s["spec"].get("devices", []):
            a = dev.get("attributes", {})
            attrs[(s["spec"]["nodeName"], dev["name"])] = (a.get("rail", {}).get("int"), a.get("rank", {}).get("int"))
out = {"pods": [], "problems": []}
for p in pods:
    node = p["spec"].get("nodeName")
    mine = [c for c in claims if any(r.get("uid") == p["metadata"]["uid"] for r in c["metadata"].get("ownerReferences", []))]
    results = [r for c in mine for r in (c.get("status", {}).get("allocation", {}) or {}).get("devices", {}).get("results", [])]
    rails = sorted(attrs.get((r["pool"], r["device"]), (None, None))[0] for r in results if attrs.get((r["pool"], r["device"])))
    ranks = [attrs[(r["pool"], r["device"])][1] for r in results if (r["pool"], r["device"]) in attrs]
    out["pods"].append({"pod": p["metadata"]["name"], "node": node, "domain": domain.get(node), "rails": rails, "ranks": ranks})
    if rails != [4, 5, 6, 7]:
        out["problems"].append(f'{p["metadata"]["name"]}: rails {rails}, want [4, 5, 6, 7]')
    if any(r is None or r > 1 for r in ranks) or len(ranks) != 4:
        out["problems"].append(f'{p["metadata"]["name"]}: pair ranks {ranks}, want 4 at PXB or better (rank <= 1)')
nodes = [x["node"] for x in out["pods"]]
if len(set(nodes)) != len(nodes):
    out["problems"].append(f"two pods on one node: {nodes}")
doms = {x["domain"] for x in out["pods"]}
if doms != {"b"}:
    out["problems"].append(f"domains {sorted(map(str, doms))}, want only b")
print(json.dumps(out))
PY
  [ "$(jq '.problems | length' "$D/$name-check.json")" = 0 ]
}
K get nodes -l "$KEY" -o json | jq --arg k "$KEY" '[.items[] | {key: .metadata.name, value: .metadata.labels[$k]}] | from_entries' > "$D/node-domains.json"

# ---- 1. the first gang: whole, in domain b, on rails 4-7
t=$(now)
gang_apply g1 || exit 1
if wait_until 60 "gang g1 bound" all_bound g1; then
  figure "gang: 3 pods × 4 GPU+NIC pairs bound as one gang in $(since "$t") s"
  if check_gang g1; then
    pass "gang: g1 whole in domain b (domain a has 2 nodes), one pod per node, each on rails 4-7 at PXB or better: $(jq -c '[.pods[] | {(.pod): .node}] | add' "$D/g1-check.json")"
  else
    fail "gang: g1 placed wrong: $(jq -c '.problems' "$D/g1-check.json")"
  fi
else
  fail "gang: g1 not bound within 60 s: $(bound_count g1) of 3 pods bound; $(K -n "$NS" get pods -l topoalign.dev/gang=g1 -o json | jq -c '[.items[] | (.status.conditions // [])[] | select(.type == "PodScheduled") | .message] | unique') (log: $RUN/logs/$SCHED.log)"
  exit 1
fi

# ---- 2. a second gang while b is full: nothing of it binds
gang_apply g2 || exit 1
sleep 20
n2=$(bound_count g2)
if [ "$n2" = 0 ]; then
  pass "gang: g2 (3 pods) while domain b is full: 0 pods bound after 20 s (domain a could hold 2: all or nothing)"
else
  fail "gang: g2 while domain b is full: $n2 of 3 pods bound (want 0: gang all or nothing in one domain)"
fi

# ---- 3. the first gang leaves: the second binds whole in b
t=$(now)
# no kubelet runs: the pods go at once; the controller manager then drops their claims
K -n "$NS" delete pods -l topoalign.dev/gang=g1 --grace-period=0 --force > /dev/null 2>&1
if wait_until 90 "gang g2 bound" all_bound g2; then
  figure "gang: g2 bound whole $(since "$t") s after g1 left"
  if check_gang g2; then
    pass "gang: after g1 left, g2 whole in domain b on rails 4-7: $(jq -c '[.pods[] | {(.pod): .node}] | add' "$D/g2-check.json")"
  else
    fail "gang: g2 placed wrong: $(jq -c '.problems' "$D/g2-check.json")"
  fi
else
  fail "gang: g2 not bound within 90 s of g1 leaving: $(bound_count g2) of 3 pods bound (log: $RUN/logs/$SCHED.log)"
fi
K delete namespace "$NS" --wait=false > /dev/null 2>&1
stop_component "$SCHED"
