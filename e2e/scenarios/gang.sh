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
#   3. the first gang deleted: the second binds whole, in domain b;
#   4. two racks (nvidia.com/gpu.clique rack-x, rack-y, 3 nodes each); on rack x the GPUs of
#      rails 0-3 and the NICs of rails 4-7 are held, so no free GPU has its PIX NIC, and
#      its nodes are smaller, so the bin-packing placement score prefers it. The same job
#      with the claim a user writes without topoalign (4 GPUs + 4 NICs) lands on rack x with
#      every GPU-NIC path SYS; with topoalign's pinned claims it lands on rack y, every GPU
#      with its own PIX NIC on rails 4-7. Classes come from `topoalign matrix -o json`.
#   5. the same racks under the real Kueue controller manager (v0.17.0 from the Go module
#      proxy, TAS on, its webhooks served with the harness PKI; e2e/lib/kueue.sh) with
#      the job `topoalign gang --dialect kueue` writes (an Indexed Job, a Topology over
#      the rack label and the hostname): rack y's nodes get 48 CPUs and each pod asks 25,
#      so TAS fits one pod per node on both racks and, capacities equal, picks rack x.
#      Without an admission check Kueue admits the gang onto rack x, where its claims
#      cannot be allocated; with the AdmissionCheck of `topoalign extender
#      --kueue-admission-check` on the ClusterQueue the gang is admitted onto rack y and
#      binds there, every GPU with its own PIX NIC on rails 4-7.
#   6. the dialects no engine here runs: the output of `topoalign gang --dialect volcano`
#      and `--dialect kai` applies as is, with strict field validation, on Volcano's Job CRD
#      (generated from volcano.sh/apis) and KAI's CRDs (from its module), and reads back
#      unchanged (e2e/lib/gang_dialects.sh).
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
GANGPY=$E2E_DIR/lib/gang.py
NODES=(gang-a-0:a gang-a-1:a gang-b-0:b gang-b-1:b gang-b-2:b)
make_namespace "$NS"

# ---- nodes, their slices and the driver's DeviceClasses
# add_node NAME LABEL=VALUE : a Node with the slices `topoalign driver --rails` publishes for it
add_node() {
  local n=$1
  make_node "$n" "$2" || { fail "gang: node $n"; return 1; }
  "$TOPOALIGN" driver --profile dgx-h100 --node-name "$n" --rails "$RAILS" --dry-run -o json > "$D/$n.json" 2> "$D/$n.err" ||
    { fail "gang: topoalign driver --dry-run --rails for $n: $(cat "$D/$n.err")"; return 1; }
  jq '{apiVersion: "v1", kind: "List", items: [.items[] | select(.kind == "ResourceSlice")]}' "$D/$n.json" > "$D/$n-slices.json"
  K apply -f "$D/$n-slices.json" > /dev/null || { fail "gang: applying the slices of $n"; return 1; }
}
for nd in "${NODES[@]}"; do add_node "${nd%%:*}" "$KEY=${nd##*:}" || exit 1; done
jq '{apiVersion: "v1", kind: "List", items: [.items[] | select(.kind == "DeviceClass")]}' "$D/${NODES[0]%%:*}.json" > "$D/classes.json"
K apply -f "$D/classes.json" > /dev/null || { fail "gang: applying the DeviceClasses"; exit 1; }
K get nodes -l "$KEY" -o yaml > "$D/nodes.yaml"
"$TOPOALIGN" matrix --profile dgx-h100 -o json > "$D/matrix.json" || { fail "gang: topoalign matrix --profile dgx-h100"; exit 1; }

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

# gang_apply NAME KEY NODES [JQ] : `topoalign gang --nodes NODES` for a 3-pod job NAME (4 pairs
# per pod on rails 4-7 at PXB or better, one domain by label KEY), its pods handed to $SCHED,
# the objects passed through the jq filter JQ (default: as written), applied
gang_apply() {
  local name=$1 key=$2 nodes=$3 filter=${4:-.}
  cat > "$D/$name-job.yaml" << EOF
name: $name
pods: 3
pairsPerPod: 4
class: PXB
sameRails: true
rails: [4, 5, 6, 7]
domain: {key: $key, mode: required}
image: registry.k8s.io/pause:3.10
EOF
  "$TOPOALIGN" gang --job "$D/$name-job.yaml" --nodes "$nodes" -o json > "$D/$name.json" 2> "$D/$name.err" ||
    { fail "gang: topoalign gang --job $name: $(cat "$D/$name.err")"; return 1; }
  jq --arg s "$SCHED" '.items |= map(if .kind == "Pod" then .spec.schedulerName = $s else . end)' "$D/$name.json" |
    jq "$filter" > "$D/$name-applied.json"
  K -n "$NS" apply -f "$D/$name-applied.json" > "$D/$name-apply.out" 2>&1 ||
    { fail "gang: kube-apiserver refused the objects of $name: $(tail -3 "$D/$name-apply.out")"; return 1; }
}
# bound_count NAME : how many of gang NAME's pods have a node
bound_count() {
  K -n "$NS" get pods -l "topoalign.dev/gang=$1" -o json | jq '[.items[] | select(.spec.nodeName != null)] | length'
}
all_bound() { [ "$(bound_count "$1")" = 3 ]; }
# gang_report NAME : gang.py's report of gang NAME (node, domain, rails, classes per pod)
# into $D/NAME-check.json
gang_report() {
  K -n "$NS" get pods -l "topoalign.dev/gang=$1" -o json > "$D/$1-pods.json"
  K -n "$NS" get resourceclaims -o json > "$D/claims.json"
  python3 "$GANGPY" check --slices-dir "$D" --pods "$D/$1-pods.json" --claims "$D/claims.json" \
    --domains "$D/node-domains.json" --want-rails 4,5,6,7 --matrix "$D/matrix.json" > "$D/$1-check.json"
}
# check_gang NAME : every pod of NAME in domain b, one per node, 4 pairs on rails 4-7 at PXB or better
check_gang() {
  gang_report "$1" || return 1
  [ "$(jq '.problems | length' "$D/$1-check.json")" = 0 ] && [ "$(jq -c '.domains' "$D/$1-check.json")" = '["b"]' ]
}
K get nodes -l "$KEY" -o json | jq --arg k "$KEY" '[.items[] | {key: .metadata.name, value: .metadata.labels[$k]}] | from_entries' > "$D/node-domains.json"

# ---- 1. the first gang: whole, in domain b, on rails 4-7
t=$(now)
gang_apply g1 "$KEY" "$D/nodes.yaml" || exit 1
if wait_until 60 "gang g1 bound" all_bound g1; then
  figure "gang: 3 pods × 4 GPU+NIC pairs bound as one gang in $(since "$t") s"
  if check_gang g1; then
    pass "gang: g1 whole in domain b (domain a has 2 nodes), one pod per node, each on rails 4-7 at PXB or better: $(jq -c '[.pods[] | {(.pod): .node}] | add' "$D/g1-check.json")"
  else
    fail "gang: g1 placed wrong: $(jq -c '{problems, domains}' "$D/g1-check.json")"
  fi
else
  fail "gang: g1 not bound within 60 s: $(bound_count g1) of 3 pods bound; $(K -n "$NS" get pods -l topoalign.dev/gang=g1 -o json | jq -c '[.items[] | (.status.conditions // [])[] | select(.type == "PodScheduled") | .message] | unique') (log: $RUN/logs/$SCHED.log)"
  exit 1
fi

# ---- 2. a second gang while b is full: nothing of it binds
gang_apply g2 "$KEY" "$D/nodes.yaml" || exit 1
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
    fail "gang: g2 placed wrong: $(jq -c '{problems, domains}' "$D/g2-check.json")"
  fi
else
  fail "gang: g2 not bound within 90 s of g1 leaving: $(bound_count g2) of 3 pods bound (log: $RUN/logs/$SCHED.log)"
fi

# ---- 4. two racks by nvidia.com/gpu.clique; on rack x every free GPU has lost its PIX NIC
# (the GPUs of rails 0-3 and the NICs of rails 4-7 held). Its nodes have half the CPU: the
# placement score of topology-aware scheduling bin-packs (NodeResourcesFit, MostAllocated),
# so a scheduler that sees labels and allocatable only prefers rack x.
RKEY=nvidia.com/gpu.clique
for r in x y; do
  for i in 0 1 2; do
    add_node "rack-$r-$i" "$RKEY=rack-$r" || exit 1
    if [ "$r" = x ]; then
      K patch node "rack-$r-$i" --subresource=status --type=merge \
        -p '{"status":{"capacity":{"cpu":"32","memory":"256Gi"},"allocatable":{"cpu":"32","memory":"256Gi"}}}' > /dev/null ||
        { fail "gang: patching the capacity of rack-$r-$i"; exit 1; }
      python3 "$GANGPY" occupy --slices "$D/rack-$r-$i-slices.json" --gpu-rails 0,1,2,3 --nic-rails 4,5,6,7 \
        --matrix "$D/matrix.json" --node "rack-$r-$i" --name "occ-rack-$r-$i" > "$D/occ-rack-$r-$i.json" || { fail "gang: occupancy claim of rack-$r-$i"; exit 1; }
      K -n "$NS" apply -f "$D/occ-rack-$r-$i.json" > /dev/null || { fail "gang: applying occ-rack-$r-$i"; exit 1; }
      K -n "$NS" apply -f - > /dev/null << EOF || { fail "gang: the occupancy pod of rack-$r-$i"; exit 1; }
apiVersion: v1
kind: Pod
metadata: {name: occ-rack-$r-$i, labels: {gang-e2e: occupancy}}
spec:
  nodeSelector: {kubernetes.io/hostname: rack-$r-$i}
  containers: [{name: held, image: registry.k8s.io/pause:3.10, resources: {claims: [{name: held}]}}]
  resourceClaims: [{name: held, resourceClaimName: occ-rack-$r-$i}]
EOF
    fi
  done
done
occupied() { [ "$(K -n "$NS" get pods -l gang-e2e=occupancy -o json | jq '[.items[] | select(.spec.nodeName != null)] | length')" = 3 ]; }
wait_until 60 "rack x occupancy bound" occupied || { fail "gang: the occupancy pods of rack x did not bind"; exit 1; }
K get nodes -l "$RKEY" -o yaml > "$D/racks.yaml"
K get nodes -l "$RKEY" -o json | jq --arg k "$RKEY" '[.items[] | {key: .metadata.name, value: .metadata.labels[$k]}] | from_entries' > "$D/node-domains.json"
# every pod asks 8 CPUs: the placement score (NodeResourcesFit, MostAllocated) then ranks rack x first
CPU='.items |= map(if .kind == "Pod" then .spec.containers[0].resources.requests.cpu = "8" else . end)'
# the stock job: the same Workload, PodGroup and pods, but the claim a user writes without
# topoalign: 4 GPUs and 4 NICs, no pairing, no rails
STOCK="$CPU"' | .items |= map(if .kind == "ResourceClaimTemplate" then .spec.spec.devices = {requests: [
  {name: "gpus", exactly: {deviceClassName: "gpu.topoalign.dev", count: 4}},
  {name: "nics", exactly: {deviceClassName: "nic.topoalign.dev", count: 4}}]} else . end)'

summary() { jq -c '[.pods[] | {(.pod): "\(.node) \(.classes | join(",")) own PIX NIC \(.ownPixNic)/\(.gpus) rails \(.rails | map(tostring) | join(","))"}] | add' "$D/$1-check.json"; }

gang_apply stock "$RKEY" "$D/racks.yaml" "$STOCK" || exit 1
if wait_until 60 "stock gang bound" all_bound stock && gang_report stock; then
  if [ "$(jq -c '.domains' "$D/stock-check.json")" = '["rack-x"]' ] && [ "$(jq '[.pods[].ownPixNic] | add' "$D/stock-check.json")" = 0 ]; then
    pass "gang: stock claims (4 GPUs + 4 NICs) go to rack x, chosen by labels and allocatable, where no GPU gets its PIX NIC: $(summary stock)"
  else
    fail "gang: the stock job was expected on rack x with no GPU on its PIX NIC: $(jq -c '.domains' "$D/stock-check.json") $(summary stock)"
  fi
else
  fail "gang: the stock job did not bind within 60 s: $(bound_count stock) of 3"
fi
K -n "$NS" delete pods -l topoalign.dev/gang=stock --grace-period=0 --force > /dev/null 2>&1

t=$(now)
gang_apply t1 "$RKEY" "$D/racks.yaml" "$CPU" || exit 1
if wait_until 90 "topoalign gang bound" all_bound t1 && gang_report t1; then
  figure "gang: topoalign's gang bound whole in $(since "$t") s: $(summary t1)"
  if [ "$(jq -c '.domains' "$D/t1-check.json")" = '["rack-y"]' ] && [ "$(jq '.problems | length' "$D/t1-check.json")" = 0 ] &&
    [ "$(jq '[.pods[].ownPixNic] | add' "$D/t1-check.json")" = 12 ]; then
    pass "gang: with topoalign's claims the same job lands on rack y, every GPU with its own PIX NIC on rails 4-7 (12 of 12)"
  else
    fail "gang: topoalign's gang: $(jq -c '{domains, problems}' "$D/t1-check.json") $(summary t1)"
  fi
else
  fail "gang: topoalign's gang did not bind within 90 s: $(bound_count t1) of 3 (log: $RUN/logs/$SCHED.log)"
fi

K -n "$NS" delete pods -l topoalign.dev/gang=t1 --grace-period=0 --force > /dev/null 2>&1
stop_component "$SCHED"

# ---- 6. the Volcano and KAI dialects apply as is on their engines' CRDs (run before 5,
# which may end the scenario)
. "$E2E_DIR/lib/gang_dialects.sh"

# ---- 5. the real Kueue: without the admission check rack x, with it rack y
. "$E2E_DIR/lib/kueue.sh"
. "$E2E_DIR/lib/extender.sh"
. "$E2E_DIR/lib/gang_kueue.sh"

K delete namespace "$NS" --wait=false > /dev/null 2>&1
