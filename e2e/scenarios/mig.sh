#!/usr/bin/env bash
# Issue 23, MIG on the real control plane. `topoalign driver` for a dgx-h100 node with a
# mixed geometry (--mig-want 1g.10gb=14,4g.40gb=1,3g.40gb=1: one GPU as 4g+3g, two as
# 7×1g, five whole) publishes into the real kube-apiserver; claims from `topoalign claims
# --mig` are allocated by the real kube-scheduler's DRA allocator.
#   1. the slices are accepted as published: MIG devices and MIG×NIC pairs with their
#      memory-slice counters, per-GPU counter sets stored;
#   2. MIG pair claims get the best pair classes the free devices allow (exhaustive check);
#   3. 7 one-slice claims, one pod each, land on one GPU, not seven;
#   4. a seeded random stream of MIG claim bursts (1-3 at once, with and without NICs) and
#      deletions; claims refused for want of room are withdrawn: after every step no
#      counter (memory slice, SM slices, NIC function) is held beyond its amount;
#   5. a claim for a profile no node has (7g.80gb) is refused in under 1 s while an
#      unrelated pod still binds;
#   6. dynamic MIG (`driver --mig-dynamic`: every placement published, no whole GPU):
#      7 one-slice claims on one GPU, then 4g@0 and 3g@4 together on the next.
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$E2E_DIR/lib/cluster.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"

need_topoalign_cmd driver
need_topoalign_cmd claims

D=$SCEN_DIR
P=dgx-h100
NODE=mig-$P
NS=mig
WANT=1g.10gb=14,4g.40gb=1,3g.40gb=1
LOG=$RUN/logs/driver-mig.log
SEED=${MIG_SEED:-$RANDOM}
STEPS=${MIG_STEPS:-40}
mkdir -p "$D/registry" "$D/plugins" "$D/cdi" "$D/state"
MIGPY=$E2E_DIR/lib/mig.py

make_namespace "$NS"
make_node "$NODE" || { fail "mig: node $NODE"; exit 1; }

# ---- 1. the driver publishes; the API server keeps every MIG device and counter
"$TOPOALIGN" driver --profile "$P" --node-name "$NODE" --mig-want "$WANT" --dry-run -o yaml > "$D/dry.yaml" 2> "$D/dry.err" ||
  { fail "mig: dry-run: $(cat "$D/dry.err")"; exit 1; }
yaml_to_json "$D/dry.yaml" > "$D/dry.json"
jq '{apiVersion: "v1", kind: "List", items: [.[] | select(.kind == "DeviceClass")]}' "$D/dry.json" > "$D/classes.json"
K apply -f "$D/classes.json" > /dev/null || { fail "mig: applying the DeviceClasses"; exit 1; }
jq '[.[] | select(.kind == "ResourceSlice")]' "$D/dry.json" > "$D/dry-slices.json"
python3 "$MIGPY" slices --slices "$D/dry-slices.json" > "$D/dry-summary.json"
WANT_MIG=$(jq '.devices.mig // 0' "$D/dry-summary.json")
WANT_MIGPAIR=$(jq '.devices["mig-pair"] // 0' "$D/dry-summary.json")
WANT_SETS=$(jq -c '.counterSets' "$D/dry-summary.json")

MPORT=$(free_ports 1)
t=$(now)
"$TOPOALIGN" driver --profile "$P" --node-name "$NODE" --mig-want "$WANT" --kubeconfig "$KUBECONFIG" \
  --plugin-registry-dir "$D/registry" --plugin-dir "$D/plugins" --cdi-dir "$D/cdi" --state-dir "$D/state" \
  --metrics-addr "127.0.0.1:$MPORT" >> "$LOG" 2>&1 &
register_pid driver-mig $!
stored() {
  slices_of "$NODE" > "$D/slices.json"
  python3 "$MIGPY" slices --slices "$D/slices.json" > "$D/summary.json"
  [ "$(jq '.devices.mig // 0' "$D/summary.json")" = "$WANT_MIG" ] &&
    [ "$(jq '.devices["mig-pair"] // 0' "$D/summary.json")" = "$WANT_MIGPAIR" ] &&
    [ "$(jq -c '.counterSets' "$D/summary.json")" = "$WANT_SETS" ]
}
if [ "$WANT_MIG" -gt 0 ] && wait_until 60 "MIG slices stored" stored; then
  figure "mig: driver start to its MIG slices stored: $(since "$t") s"
  pass "mig: kube-apiserver accepted the mixed-geometry node: $(jq -c '.devices' "$D/summary.json"), $(jq '.migWithCounters' "$D/summary.json") MIG devices consuming memory slices, counter sets $(jq -c '.counterSets' "$D/summary.json")"
else
  fail "mig: the stored slices of $NODE are not the published ones: want $WANT_MIG mig, $WANT_MIGPAIR mig-pair, sets $WANT_SETS; got $(cat "$D/summary.json" 2> /dev/null) (log: $LOG)"
  exit 1
fi
whole=$(jq '.devices.gpu // 0' "$D/summary.json")
mig_gpus=$(jq -r '[.[] | (.spec.devices // [])[] | select(.attributes.type.string == "mig") | .attributes.gpu.string] | unique | length' "$D/slices.json")
overlap=$(jq -r '[.[] | (.spec.devices // [])[] | select(.attributes.type.string == "mig") | .attributes.gpu.string] as $m
  | [.[] | (.spec.devices // [])[] | select(.attributes.type.string == "gpu") | .name | select(IN($m[]))] | length' "$D/slices.json")
if [ "$overlap" = 0 ] && [ $((whole + mig_gpus)) = 8 ]; then
  pass "mig: $mig_gpus GPUs in MIG mode published through their instances only, $whole whole GPUs"
else
  fail "mig: $mig_gpus MIG GPUs, $whole whole GPUs, $overlap MIG GPUs also published whole"
fi

# claims_now : the namespace's claims as stored, into $D/claims.json
claims_now() { K -n "$NS" get resourceclaims -o json > "$D/claims.json"; }
# mig_claim NAME PROFILE COUNT [--with-nic] : a ResourceClaim from `topoalign claims --mig`
mig_claim() {
  local name=$1 profile=$2 count=$3; shift 3
  "$TOPOALIGN" claims --mig "$profile" --count "$count" "$@" --claim --name "$name" -o yaml > "$D/$name.yaml" 2> "$D/$name.err" ||
    { fail "mig: topoalign claims --mig $profile --count $count $*: $(cat "$D/$name.err")"; return 1; }
  K -n "$NS" apply -f "$D/$name.yaml" > /dev/null
}
no_slice_twice() {
  claims_now
  python3 "$MIGPY" twice --slices "$D/slices.json" --claims "$D/claims.json" > "$D/twice.json"
}

# ---- 2. MIG pair claims at the best class
# pair_claim NAME PROFILE COUNT : the best classes on what is free now, then the claim
pair_claim() {
  local name=$1 profile=$2 n=$3 want got t ms
  claims_now
  want=$(python3 "$MIGPY" best --slices "$D/slices.json" --claims "$D/claims.json" --profile "$profile" --count "$n")
  mig_claim "$name" "$profile" "$n" --with-nic || return 1
  t=$(now)
  pod_with_claim "$NS" "$name" "$name" "$NODE"
  if ! wait_pod_bound "$NS" "$name" 30; then
    fail "mig: $name ($n × $profile with NIC) not scheduled: $(pod_scheduled_message "$NS" "$name"); best possible: $want"
    return 1
  fi
  ms=$(ms_since "$t")
  claims_now
  python3 "$MIGPY" alloc --slices "$D/slices.json" --claims "$D/claims.json" | awk -v c="$name" '$1 == c' > "$D/$name.alloc"
  got=$(awk '$3 == "mig-pair" && $4 == "'"$profile"'" {print $6}' "$D/$name.alloc" | awk 'BEGIN{r["PIX"]=0;r["PXB"]=1;r["PHB"]=2;r["NODE"]=3;r["SYS"]=4} {print r[$1], $1}' | sort -n | awk '{print $2}' | tr '\n' ' ' | sed 's/ $//')
  if [ "$(wc -l < "$D/$name.alloc")" = "$n" ] && [ "$got" = "$want" ]; then
    pass "mig: $name: $n × $profile MIG pair(s) bound in ${ms} ms at [$got] = the best the free devices allow ($(awk '{printf "%s ", $2}' "$D/$name.alloc"))"
  else
    fail "mig: $name: allocated [$got] ($(awk '{printf "%s ", $2}' "$D/$name.alloc")), best possible [$want]"
  fi
}
pair_claim pair-4g 4g.40gb 1
pair_claim pair-1g 1g.10gb 2
# the 3g instance's PIX NIC is the one pair-4g holds: the best left is a NODE pair
pair_claim pair-3g 3g.40gb 1
if no_slice_twice; then
  pass "mig: the pair claims hold no counter twice ($(jq -c '.memorySlicesHeld' "$D/twice.json") memory slices held)"
else
  fail "mig: a counter held beyond its amount: $(jq -c '.over' "$D/twice.json")"
fi
release_claims "$NS" pair-4g pair-1g pair-3g

# ---- 3. seven one-slice claims, one pod each: one GPU, not seven
ones=()
t=$(now)
for i in 1 2 3 4 5 6 7; do
  mig_claim "one-$i" 1g.10gb 1 && pod_with_claim "$NS" "one-$i" "one-$i" "$NODE" && ones+=("one-$i")
done
bound=0
for c in "${ones[@]}"; do wait_pod_bound "$NS" "$c" 30 && bound=$((bound + 1)); done
ms=$(ms_since "$t")
claims_now
python3 "$MIGPY" alloc --slices "$D/slices.json" --claims "$D/claims.json" | awk '$1 ~ /^one-/' > "$D/ones.alloc"
gpus=$(awk '{print $5}' "$D/ones.alloc" | sort -u | tr '\n' ' ' | sed 's/ $//')
ngpus=$(awk '{print $5}' "$D/ones.alloc" | sort -u | wc -l)
figure "mig: 7 one-slice (1g.10gb) pods created and bound in ${ms} ms"
if [ "$bound" = 7 ] && [ "$(wc -l < "$D/ones.alloc")" = 7 ] && [ "$ngpus" = 1 ]; then
  pass "mig: 7 one-slice claims landed on one GPU ($gpus), not seven"
else
  fail "mig: $bound of 7 one-slice pods bound, their instances on $ngpus GPU(s): $gpus"
fi
no_slice_twice || fail "mig: the one-slice claims hold a counter twice: $(jq -c '.over' "$D/twice.json")"
release_claims "$NS" "${ones[@]}"

# ---- 4. a random stream of MIG claims and deletions
info "mig: random stream of $STEPS steps, seed $SEED (MIG_SEED=$SEED reruns it)"
RANDOM=$SEED
live=()
made=0 bound=0 refused=0 deleted=0 worst=0 checks=0 twice=0
refused_now=()
SHAPES=("1g.10gb 1" "1g.10gb 2" "1g.10gb 3" "4g.40gb 1" "3g.40gb 1" "1g.10gb 1 --with-nic" "1g.10gb 2 --with-nic" "4g.40gb 1 --with-nic" "3g.40gb 1 --with-nic")
t=$(now)
for ((s = 0; s < STEPS; s++)); do
  if [ ${#live[@]} -gt 0 ] && [ $((RANDOM % 2)) = 0 ]; then
    k=$((RANDOM % ${#live[@]}))
    release_claims "$NS" "${live[$k]}"
    live=("${live[@]:0:$k}" "${live[@]:$((k + 1))}")
    deleted=$((deleted + 1))
  else
    # a burst of 1 to 3 claims at once: the scheduler allocates them while the others are in flight
    burst=()
    nb=$((1 + RANDOM % 3))
    for ((b = 0; b < nb; b++)); do
      name=rs-$s-$b
      read -r prof cnt nic <<< "${SHAPES[$((RANDOM % ${#SHAPES[@]}))]}"
      # shellcheck disable=SC2086
      mig_claim "$name" "$prof" "$cnt" $nic || continue
      pod_with_claim "$NS" "$name" "$name" "$NODE"
      made=$((made + 1))
      live+=("$name")
      burst+=("$name")
    done
    # a refused claim is withdrawn (after the check below), so the stream keeps turning over
    refused_now=()
    for name in "${burst[@]}"; do
      if wait_pod_decided "$NS" "$name" 20; then bound=$((bound + 1)); else refused=$((refused + 1)) refused_now+=("$name"); fi
    done
  fi
  checks=$((checks + 1))
  if no_slice_twice; then
    held=$(jq '.memorySlicesHeld' "$D/twice.json")
    [ "$held" -gt "$worst" ] && worst=$held
  else
    twice=$((twice + 1))
    cp "$D/twice.json" "$D/twice-step-$s.json"
  fi
  if [ ${#refused_now[@]} -gt 0 ]; then
    release_claims "$NS" "${refused_now[@]}"
    for name in "${refused_now[@]}"; do
      for k in "${!live[@]}"; do [ "${live[$k]}" = "$name" ] && unset 'live[k]'; done
    done
    live=("${live[@]}")
    refused_now=()
  fi
done
figure "mig: random stream (seed $SEED): $made claims ($bound bound, $refused unschedulable and withdrawn), $deleted deleted, most memory slices held at once $worst of 24, in $(since "$t") s"
if [ "$twice" = 0 ] && [ "$bound" -gt 0 ]; then
  pass "mig: $checks checks over a random stream of MIG claims and deletions: no memory slice, SM slice or NIC function ever allocated twice"
else
  fail "mig: $twice of $checks checks found a counter held twice (files: $D/twice-step-*.json), $bound claims bound"
fi
release_claims "$NS" "${live[@]}"

# ---- 5. a MIG claim no node can hold, and an unrelated pod
mig_claim nowhere 7g.80gb 1 || exit 1
t=$(now)
K apply -f - > /dev/null << EOF
apiVersion: v1
kind: Pod
metadata: {name: nowhere, namespace: $NS}
spec:
  resourceClaims: [{name: devs, resourceClaimName: nowhere}]
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources: {claims: [{name: devs}]}
---
apiVersion: v1
kind: Pod
metadata: {name: plain, namespace: $NS}
spec:
  containers: [{name: c, image: registry.k8s.io/pause:3.10}]
EOF
if wait_pod_unschedulable "$NS" nowhere 10; then
  ms=$(ms_since "$t")
  figure "mig: a 7g.80gb claim (no such instance anywhere) refused in $ms ms"
  if [ "$ms" -lt 1000 ]; then
    pass "mig: the 7g.80gb claim was refused in $ms ms: $(pod_scheduled_message "$NS" nowhere | head -c 300)"
  else
    fail "mig: the 7g.80gb claim was refused in $ms ms (want under 1000)"
  fi
else
  fail "mig: the 7g.80gb pod not marked Unschedulable in 10 s: $(pod_scheduled_reason "$NS" nowhere)"
fi
if wait_pod_bound "$NS" plain 10; then
  pass "mig: an unrelated pod still bound (to $(pod_node "$NS" plain)) next to the refused MIG pod"
else
  fail "mig: the unrelated pod was not scheduled: $(pod_scheduled_message "$NS" plain)"
fi
if [ -z "$(claim_devices "$NS" nowhere)" ]; then
  pass "mig: the refused claim holds no device"
else
  fail "mig: the refused claim got $(claim_devices "$NS" nowhere | tr '\n' ' ')"
fi
K -n "$NS" delete pod nowhere plain --grace-period=0 --force > /dev/null 2>&1
K -n "$NS" delete resourceclaim nowhere --wait=false > /dev/null 2>&1
stop_component driver-mig

# ---- 6. dynamic MIG: `driver --mig-dynamic` publishes every placement of each GPU (no
#         instance exists yet; the kubelet plugin creates one at prepare). The real
#         scheduler must pack: 7 one-slice claims on one GPU, then a 4g and a 3g together
#         on the next GPU at 4g@0 and 3g@4; no memory slice twice; no whole GPU offered.
DYN=mig-dyn
make_node "$DYN" || { fail "mig: node $DYN"; exit 1; }
"$TOPOALIGN" driver --profile "$P" --node-name "$DYN" --mig-dynamic --dry-run -o json > "$D/dyn.json" 2> "$D/dyn.err" ||
  { fail "mig: driver --mig-dynamic --dry-run: $(cat "$D/dyn.err")"; exit 1; }
jq '{apiVersion: "v1", kind: "List", items: [.items[] | select(.kind == "ResourceSlice")]}' "$D/dyn.json" > "$D/dyn-list.json"
K apply -f "$D/dyn-list.json" > /dev/null || { fail "mig: applying the dynamic-MIG slices of $DYN"; exit 1; }
dyn_stored() {
  slices_of "$DYN" > "$D/dyn-slices.json"
  [ "$(jq '[.[] | (.spec.devices // [])[]] | length' "$D/dyn-slices.json")" = "$(jq '[.items[] | (.spec.devices // [])[]] | length' "$D/dyn-list.json")" ]
}
if wait_until 30 "dynamic-MIG slices stored" dyn_stored; then
  python3 "$MIGPY" slices --slices "$D/dyn-slices.json" > "$D/dyn-summary.json"
  whole=$(jq '.devices.gpu // 0' "$D/dyn-summary.json")
  if [ "$whole" = 0 ]; then
    pass "mig: dynamic MIG accepted by the API server: $(jq -c '.devices' "$D/dyn-summary.json") (placements, no whole GPU), counter sets $(jq -c '.counterSets' "$D/dyn-summary.json")"
  else
    fail "mig: dynamic MIG publishes $whole whole GPUs (a GPU in MIG mode is unusable whole)"
  fi
else
  fail "mig: the dynamic-MIG slices of $DYN were not stored as published"
fi
# dyn_alloc : the namespace's allocations on $DYN's devices: claim device type profile gpu start
dyn_alloc() {
  claims_now
  python3 "$MIGPY" alloc --slices "$D/dyn-slices.json" --claims "$D/claims.json" |
    awk '{n = split($2, p, "-"); print $1, $2, $3, $4, $5, p[n]}'
}
dyn=()
t=$(now)
for i in 1 2 3 4 5 6 7; do
  mig_claim "dyn-one-$i" 1g.10gb 1 && pod_with_claim "$NS" "dyn-one-$i" "dyn-one-$i" "$DYN" && dyn+=("dyn-one-$i")
done
bound=0
for c in "${dyn[@]}"; do wait_pod_bound "$NS" "$c" 30 && bound=$((bound + 1)); done
for pair in "dyn-4g 4g.40gb" "dyn-3g 3g.40gb"; do
  read -r c prof <<< "$pair"
  mig_claim "$c" "$prof" 1 && pod_with_claim "$NS" "$c" "$c" "$DYN" && dyn+=("$c") && wait_pod_bound "$NS" "$c" 30 && bound=$((bound + 1))
done
figure "mig: dynamic MIG: 7 one-slice pods, then a 4g and a 3g pod, bound in $(ms_since "$t") ms"
dyn_alloc > "$D/dyn.alloc"
one_gpus=$(awk '$1 ~ /^dyn-one-/ {print $5}' "$D/dyn.alloc" | sort -u)
big=$(awk '$1 == "dyn-4g" || $1 == "dyn-3g" {print $4 "@" $6 " " $5}' "$D/dyn.alloc" | sort)
big_gpus=$(awk '$1 == "dyn-4g" || $1 == "dyn-3g" {print $5}' "$D/dyn.alloc" | sort -u)
if [ "$bound" = 9 ] && [ "$(echo "$one_gpus" | wc -l)" = 1 ] && [ "$(echo "$big_gpus" | wc -l)" = 1 ] &&
  [ "$one_gpus" != "$big_gpus" ] && [ "$(echo "$big" | awk '{print $1}' | tr '\n' ' ')" = "3g.40gb@4 4g.40gb@0 " ]; then
  pass "mig: dynamic MIG: 7 one-slice claims on one GPU ($one_gpus), then 4g@0 and 3g@4 together on the next ($big_gpus)"
else
  fail "mig: dynamic MIG: $bound of 9 bound; 1g on [$(echo $one_gpus)], 4g/3g: [$(echo $big)]"
fi
claims_now
if python3 "$MIGPY" twice --slices "$D/dyn-slices.json" --claims "$D/claims.json" > "$D/dyn-twice.json"; then
  pass "mig: dynamic MIG: no memory slice held twice ($(jq '.memorySlicesHeld' "$D/dyn-twice.json") of 64 held)"
else
  fail "mig: dynamic MIG: a counter held twice: $(jq -c '.over' "$D/dyn-twice.json")"
fi
release_claims "$NS" "${dyn[@]}"
