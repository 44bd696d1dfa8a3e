#!/usr/bin/env bash
# Issue 20, "never a device twice": kube-apiserver with DRAPartitionableDevices off (as on
# Kubernetes 1.34/1.35 by default) silently drops sharedCounters/consumesCounters, the
# only thing that makes a pair device and a plain GPU exclude each other.
#   1. the API server is restarted with --feature-gates=DRAPartitionableDevices=false and a
#      hand-written slice shows it drops the counters;
#   2. `topoalign driver` reads its slices back, publishes plain GPUs and NICs only (no
#      pair device is ever seen by a watch on the slices), says why in one warning, and
#      /readyz and /metrics name the mode;
#   3. a claim for every GPU of the node and a claim for one pair, both scheduled by the
#      real kube-scheduler: no GPU address is allocated twice (the pair stays pending);
#   4. the gate back on (plain restart): the driver sees the counters survive and the pairs
#      come back with their counters; the pending pair still cannot take a held GPU, and
#      gets one once the GPUs are released.
# The API server is restarted with its defaults on exit, whatever happened.
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$E2E_DIR/lib/cluster.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"

need_topoalign_cmd driver
need_topoalign_cmd claims

D=$SCEN_DIR
P=dgx-h100
NODE=gateoff-$P
NS=gate-off
GATE_OFF=--feature-gates=DRAPartitionableDevices=false
LOG=$RUN/logs/driver-gate-off.log
mkdir -p "$D/registry" "$D/plugins" "$D/cdi" "$D/state"

GATE_IS_OFF=0
restore_apiserver() {
  if [ "$GATE_IS_OFF" = 1 ]; then
    stop_component kube-apiserver
    start_apiserver && GATE_IS_OFF=0 && restart_clients
  fi
}
trap restore_apiserver EXIT

# ---- 1. the API server with the gate off, and proof that it drops the counters
t=$(now)
stop_component kube-apiserver
GATE_IS_OFF=1
start_apiserver "$GATE_OFF" || { fail "gate-off: kube-apiserver $GATE_OFF did not start (log: $RUN/logs/kube-apiserver.log)"; exit 1; }
info "kube-apiserver restarted with $GATE_OFF in $(since "$t") s"
restart_clients || { fail "gate-off: kube-scheduler or the controller manager did not restart"; exit 1; }
K apply -f - > /dev/null << EOF || { fail "gate-off: writing the control slice"; exit 1; }
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: gate-off-control}
spec:
  driver: control.example.com
  nodeName: gate-off-control
  pool: {name: control, generation: 1, resourceSliceCount: 1}
  sharedCounters: [{name: gpus, counters: {g0: {value: "1"}}}]
EOF
control=$(K get resourceslice gate-off-control -o json | jq -c '.spec.sharedCounters')
K delete resourceslice gate-off-control > /dev/null
if [ "$control" = null ]; then
  pass "gate-off: kube-apiserver with $GATE_OFF accepted a slice with sharedCounters and stored it without them"
else
  fail "gate-off: the API server kept sharedCounters ($control): the gate is not off, the scenario proves nothing"
  exit 1
fi

# ---- 2. the driver against it
make_namespace "$NS"
make_node "$NODE" || { fail "gate-off: node $NODE"; exit 1; }
"$TOPOALIGN" driver --profile "$P" --node-name "$NODE" --dry-run -o yaml > "$D/dry.yaml" 2> "$D/dry.err" ||
  { fail "gate-off: dry-run: $(cat "$D/dry.err")"; exit 1; }
yaml_to_json "$D/dry.yaml" > "$D/dry.json"
jq '{apiVersion: "v1", kind: "List", items: [.[] | select(.kind == "DeviceClass")]}' "$D/dry.json" > "$D/classes.json"
K apply -f "$D/classes.json" > /dev/null || { fail "gate-off: applying the DeviceClasses"; exit 1; }
GPUS=$(jq '[.[] | select(.kind == "ResourceSlice") | (.spec.devices // [])[] | select(.attributes.type.string == "gpu")] | length' "$D/dry.json")
NICS=$(jq '[.[] | select(.kind == "ResourceSlice") | (.spec.devices // [])[] | select(.attributes.type.string == "nic")] | length' "$D/dry.json")
PAIRS=$(jq '[.[] | select(.kind == "ResourceSlice") | (.spec.devices // [])[] | select(.attributes.type.string == "pair")] | length' "$D/dry.json")
info "$P publishes $GPUS GPUs, $NICS NICs and $PAIRS pairs where the counters survive"

# Every slice event from before the driver starts: a pair must never appear.
K get resourceslices --watch --output-watch-events -o json > "$D/watch.json" 2> "$D/watch.err" &
register_pid slice-watch-gate-off $!
sleep 0.5
MPORT=$(free_ports 1)
t=$(now)
"$TOPOALIGN" driver --profile "$P" --node-name "$NODE" --kubeconfig "$KUBECONFIG" \
  --plugin-registry-dir "$D/registry" --plugin-dir "$D/plugins" --cdi-dir "$D/cdi" --state-dir "$D/state" \
  --metrics-addr "127.0.0.1:$MPORT" >> "$LOG" 2>&1 &
register_pid driver-gate-off $!
readyz() { curl -s --max-time 2 "http://127.0.0.1:$MPORT/readyz"; }
metric() { curl -s --max-time 2 "http://127.0.0.1:$MPORT/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
devices_of_type() { slices_of "$NODE" | jq --arg t "$1" '[.[] | (.spec.devices // [])[] | select(.attributes.type.string == $t)] | length'; }
plain_mode() { readyz | grep -q '^publishing mode plain-only' && [ "$(metric topoalign_driver_pair_devices_enabled)" = 0 ]; }
ready_plain() { curl -sf --max-time 2 "http://127.0.0.1:$MPORT/readyz" > /dev/null && plain_mode; }
pairs_mode() { readyz | grep -q '^publishing mode pairs' && [ "$(metric topoalign_driver_pair_devices_enabled)" = 1 ]; }
ready_pairs() { curl -sf --max-time 2 "http://127.0.0.1:$MPORT/readyz" > /dev/null && pairs_mode; }

if wait_until 60 "driver ready in plain-only mode" ready_plain; then
  figure "gate-off: driver start to ready in plain-only mode: $(since "$t") s"
  pass "gate-off: /readyz is 200 and names the mode: $(readyz | tr '\n' '|' | head -c 400)"
  pass "gate-off: /metrics has topoalign_driver_pair_devices_enabled 0"
else
  fail "gate-off: driver not ready in plain-only mode: readyz '$(readyz | tr '\n' '|')', gauge '$(metric topoalign_driver_pair_devices_enabled)' (log: $LOG)"
fi
warned=$(grep -c 'ResourceSlice counters were dropped by the API server (DRAPartitionableDevices off?): publishing plain GPU and NIC devices only' "$LOG")
if [ "$warned" = 1 ] && grep 'ResourceSlice counters were dropped' "$LOG" | grep -q '"level":"WARN"'; then
  pass "gate-off: the driver said why in one warning: $(grep 'ResourceSlice counters were dropped' "$LOG" | jq -r '.fields | "\(.message) [\(.readback)]"' 2> /dev/null | head -c 400)"
else
  fail "gate-off: expected one WARN line on the dropped counters, found $warned (log: $LOG)"
fi
got_gpus=$(devices_of_type gpu) got_nics=$(devices_of_type nic) got_pairs=$(devices_of_type pair)
if [ "$got_gpus" = "$GPUS" ] && [ "$got_nics" = "$NICS" ] && [ "$got_pairs" = 0 ]; then
  pass "gate-off: the slices hold $got_gpus plain GPUs, $got_nics plain NICs and no pair device"
else
  fail "gate-off: slices hold $got_gpus GPUs, $got_nics NICs, $got_pairs pairs (want $GPUS, $NICS, 0)"
fi
kept=$(slices_of "$NODE" | jq '[.[] | select(.spec.sharedCounters != null)] | length')
[ "$kept" = 0 ] && info "as stored, none of the driver's slices has sharedCounters (the API server dropped them)"

# ---- 3. a claim for every GPU and a claim for one pair, scheduled by kube-scheduler
"$TOPOALIGN" claims --pairs 1 --claim --name one-pair -o yaml > "$D/one-pair.yaml" 2> "$D/one-pair.err" ||
  { fail "gate-off: topoalign claims --pairs 1: $(cat "$D/one-pair.err")"; exit 1; }
K -n "$NS" apply -f "$D/one-pair.yaml" > /dev/null || { fail "gate-off: applying the pair claim"; exit 1; }
K -n "$NS" apply -f - > /dev/null << EOF || { fail "gate-off: applying the all-GPU claim"; exit 1; }
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: all-gpus}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {deviceClassName: gpu.$DRIVER_NAME, allocationMode: ExactCount, count: $GPUS}
EOF
# The pair first: where pairs had no counters it would take a GPU the other claim also gets.
pod_with_claim "$NS" pair-pod one-pair "$NODE"
pod_with_claim "$NS" gpus-pod all-gpus "$NODE"

# gpu_of DEVICE : the GPU (device name) a device of the node's pool stands for
# no_gpu_twice : every allocated GPU of the namespace's claims appears once; prints them
no_gpu_twice() {
  local slices claims
  slices=$(slices_of "$NODE")
  claims=$(K -n "$NS" get resourceclaims -o json)
  jq -n --argjson s "$slices" --argjson c "$claims" '
    ([$s[] | (.spec.devices // [])[] | {key: .name, value: .attributes.gpu.string}] | from_entries) as $gpu
    | [$c.items[] | .metadata.name as $claim | (.status.allocation.devices.results // [])[]
        | {claim: $claim, device: .device, gpu: ($gpu[.device] // (.device | capture("^(pair-)?(?<g>gpu-[0-9a-f]{4}-[0-9a-f]{2}-[0-9a-f]{2}-[0-9a-f])").g))}
        | select(.gpu != null)]
    | {allocations: ., twice: (group_by(.gpu) | map(select(length > 1) | {gpu: .[0].gpu, claims: map(.claim)}))}' > "$D/allocations.json"
  [ "$(jq '.twice | length' "$D/allocations.json")" = 0 ]
}
summary() { jq -c '[.allocations | group_by(.claim)[] | {(.[0].claim): (map(.gpu) | length)}] | add // {}' "$D/allocations.json"; }

# After the API server's restart kube-scheduler's watches are refused until RBAC is loaded
# again, and its reflectors back off: give it the time that takes (seen up to ~40 s).
if wait_pod_bound "$NS" gpus-pod 90; then
  info "all-gpus allocated: $(claim_devices "$NS" all-gpus | tr '\n' ' ')"
else
  fail "gate-off: the all-GPU pod was not scheduled: $(pod_scheduled_message "$NS" gpus-pod)"
fi
if wait_pod_unschedulable "$NS" pair-pod 30; then
  info "pair-pod unschedulable: $(pod_scheduled_message "$NS" pair-pod | head -c 300)"
fi
if no_gpu_twice; then
  pair_alloc=$(claim_devices "$NS" one-pair | wc -l)
  pass "gate-off: no GPU address in two allocations (GPUs per claim $(summary)); the pair claim has $pair_alloc device(s), its pod $(pod_scheduled_reason "$NS" pair-pod)"
else
  fail "gate-off: a GPU was allocated twice: $(jq -c '.twice' "$D/allocations.json")"
fi

# The watch covered the whole gate-off phase, from before the driver started.
stop_component slice-watch-gate-off
bad=$(jq -s --arg n "$NODE" '[.[] | select(.object.spec.nodeName == $n and .type != "DELETED")
      | (.object.spec.devices // [])[] | select(.attributes.type.string == "pair")] | length' "$D/watch.json")
events=$(jq -s --arg n "$NODE" '[.[] | select(.object.spec.nodeName == $n)] | length' "$D/watch.json")
if [ "$bad" = 0 ] && [ "${events:-0}" -gt 0 ]; then
  pass "gate-off: a watch on the slices while the gate was off ($events events of $NODE) never saw a pair device"
else
  fail "gate-off: the watch saw $bad pair device(s) in $events events while the gate was off ($D/watch.json)"
fi

# ---- 4. the gate back on: the pairs come back, still never a GPU twice
t=$(now)
stop_component kube-apiserver
start_apiserver || { fail "gate-off: kube-apiserver did not restart with its defaults"; exit 1; }
GATE_IS_OFF=0
info "kube-apiserver restarted with its defaults (gate on) in $(since "$t") s"
restart_clients || { fail "gate-off: kube-scheduler or the controller manager did not restart"; exit 1; }
t=$(now)
if wait_until 120 "driver ready in pairs mode" ready_pairs; then
  figure "gate-off: kube-apiserver with the gate on ready to the driver ready with pairs again: $(since "$t") s"
  pass "gate-off: with the gate on the driver publishes pairs again: $(readyz | tr '\n' '|' | head -c 200), gauge 1"
else
  fail "gate-off: the driver did not return to pairs mode: readyz '$(readyz | tr '\n' '|')' (log: $LOG)"
fi
got_pairs=$(devices_of_type pair)
with_counters=$(slices_of "$NODE" | jq '[.[] | (.spec.devices // [])[] | select(.attributes.type.string == "pair") | select((.consumesCounters // []) | length == 2)] | length')
sets=$(slices_of "$NODE" | jq '[.[] | (.spec.sharedCounters // [])[]] | length')
if [ "$got_pairs" = "$PAIRS" ] && [ "$with_counters" = "$PAIRS" ] && [ "$sets" -gt 0 ]; then
  pass "gate-off: $got_pairs pair devices back, each consuming its GPU and NIC counters ($sets counter sets stored)"
else
  fail "gate-off: after the gate came on: $got_pairs pairs ($with_counters with counters, want $PAIRS), $sets counter sets"
fi
if grep 'ResourceSlice counters survive on the API server' "$LOG" | grep -q '"level":"INFO"'; then
  pass "gate-off: the driver logged the switch back to pairs"
else
  fail "gate-off: no log line on the switch back to pairs (log: $LOG)"
fi
# The held GPUs now consume their counters: the pending pair still cannot get one.
sleep 5
if no_gpu_twice && [ -z "$(claim_devices "$NS" one-pair)" ]; then
  pass "gate-off: with every GPU held by all-gpus the pair claim stays unallocated after the pairs return ($(summary))"
else
  fail "gate-off: after the pairs returned: twice $(jq -c '.twice' "$D/allocations.json"), pair claim $(claim_devices "$NS" one-pair | tr '\n' ' ')"
fi
# Released GPUs go to the pair (the pair devices work once their counters are kept).
K -n "$NS" delete pod gpus-pod --grace-period=0 --force > /dev/null 2>&1
K -n "$NS" delete resourceclaim all-gpus --wait=false > /dev/null
if wait_pod_bound "$NS" pair-pod 60 && no_gpu_twice; then
  pass "gate-off: once the GPUs are released the pair claim gets $(claim_devices "$NS" one-pair | tr '\n' ' ')"
else
  fail "gate-off: the pair pod was not scheduled after the GPUs were released: $(pod_scheduled_message "$NS" pair-pod)"
fi
K -n "$NS" delete pod pair-pod --grace-period=0 --force > /dev/null 2>&1
K -n "$NS" delete resourceclaim one-pair --wait=false > /dev/null 2>&1
stop_component driver-gate-off
