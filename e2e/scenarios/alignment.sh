#!/usr/bin/env bash
# Scenario 2: alignment. Pair claims from `topoalign claims` (1, 2, 4, 8 pairs) scheduled by
# the real kube-scheduler on empty and fragmented nodes of every profile; every allocation's
# pair classes must equal those `topoalign plan` finds optimal for the same free devices.
# Then a node is filled pod by pod with 1-pair claims: the pair-class distribution against
# the optimum for the same number of GPUs.
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"

need_topoalign_cmd driver
need_topoalign_cmd claims
D=$SCEN_DIR
NS=alignment
PROFILES=(${E2E_PROFILES:-mi300x-8 gb300-4 dgx-h100 pcie-2socket})
make_namespace "$NS"

# publish NODE PROFILE : a Ready node with the driver's objects for it
publish() {
  make_node "$1" || { fail "alignment: node $1"; return 1; }
  "$TOPOALIGN" driver --profile "$2" --node-name "$1" --dry-run -o yaml > "$D/$1.yaml" 2> "$D/$1.err" &&
    K apply --server-side --field-manager=e2e -f "$D/$1.yaml" > /dev/null 2> "$D/$1.apply.err" ||
    { fail "alignment: publishing $2 for $1: $(head -c 800 "$D/$1.err" "$D/$1.apply.err")"; return 1; }
}

# run_claim NODE PROFILE NAME PAIRS : claim NAME with PAIRS pairs and a pod pinned to NODE;
# when bound, compare its pair classes with `topoalign plan` on the same free devices.
# Sets LAST_CLASSES (allocated, sorted) and returns 1 when unschedulable.
run_claim() {
  local node=$1 profile=$2 name=$3 n=$4
  "$TOPOALIGN" claims --pairs "$n" --claim --name "$name" -o yaml > "$D/$name.yaml" 2> "$D/$name.err" ||
    { fail "topoalign claims --pairs $n: $(cat "$D/$name.err")"; return 1; }
  # free devices = what the claims already allocated on this node leave
  slices_of "$node" > "$D/$node.slices.json"
  K get resourceclaims -A -o json > "$D/claims.json"
  python3 "$E2E_DIR/lib/alignment.py" used --slices "$D/$node.slices.json" --claims "$D/claims.json" \
    --discover "$D/$profile.discover.json" > "$D/$name.used.json" || { fail "alignment.py used"; return 1; }
  K -n "$NS" apply -f "$D/$name.yaml" > /dev/null || { fail "applying claim $name"; return 1; }
  local t; t=$(now)
  pod_with_claim "$NS" "$name" "$name" "$node"
  local plan_rc=0
  "$TOPOALIGN" plan --profile "$profile" --gpus "$n" --nics-per-gpu 1 --used "$D/$name.used.json" -o json > "$D/$name.plan.json" 2> "$D/$name.plan.err" || plan_rc=$?
  if ! wait_pod_decided "$NS" "$name" 30; then
    LAST_CLASSES=""
    if [ "$plan_rc" != 0 ]; then
      pass "$profile $name: $n pairs unschedulable and topoalign plan agrees ($(head -c 200 "$D/$name.plan.err"))"
    else
      fail "$profile $name: $n pairs not scheduled ($(pod_scheduled_message "$NS" "$name")) but topoalign plan finds $(jq -c '[.pairs[].class]' "$D/$name.plan.json")"
    fi
    return 1
  fi
  local ms; ms=$(ms_since "$t")
  K -n "$NS" get resourceclaim "$name" -o json > "$D/$name.claim.json"
  python3 "$E2E_DIR/lib/alignment.py" pairs --slices "$D/$node.slices.json" --claim "$D/$name.claim.json" > "$D/$name.pairs"
  LAST_CLASSES=$(awk '$1 == "pair" {print $3}' "$D/$name.pairs" | sort | tr '\n' ' ')
  local got_n; got_n=$(awk '$1 == "pair"' "$D/$name.pairs" | wc -l)
  if [ "$plan_rc" != 0 ]; then
    fail "$profile $name: scheduled [$LAST_CLASSES] but topoalign plan says unsatisfiable: $(head -c 300 "$D/$name.plan.err")"
    return 0
  fi
  local want; want=$(jq -r '.pairs[].class' "$D/$name.plan.json" | sort | tr '\n' ' ')
  # distinct GPUs and NIC functions: the allocator never double-uses a GPU
  local gpus_distinct; gpus_distinct=$(awk '$1 == "pair" {print $5}' "$D/$name.pairs" | sort -u | wc -l)
  if [ "$got_n" = "$n" ] && [ "$gpus_distinct" = "$n" ] && [ "$LAST_CLASSES" = "$want" ]; then
    pass "$profile $name: $n pairs bound in ${ms} ms at [$LAST_CLASSES] = topoalign plan's optimum"
  else
    fail "$profile $name: allocated $got_n pairs ($gpus_distinct distinct GPUs) at [$LAST_CLASSES], topoalign plan's optimum [$want] (files: $D/$name.*)"
  fi
  return 0
}


# block NODE NAME BDF CLASS : a pod holding the plain device with this PCI address
block() {
  K -n "$NS" apply -f - > /dev/null << EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $2}
spec:
  devices:
    requests:
    - name: dev
      exactly:
        deviceClassName: $4
        selectors: [{cel: {expression: 'device.attributes["resource.kubernetes.io"].pciBusID == "$3"'}}]
EOF
  pod_with_claim "$NS" "$2" "$2" "$1"
  wait_pod_bound "$NS" "$2" 20 || { fail "blocker $2 ($3) not scheduled: $(pod_scheduled_message "$NS" "$2")"; return 1; }
}

for p in "${PROFILES[@]}"; do
  "$TOPOALIGN" discover --profile "$p" -o json > "$D/$p.discover.json" || { fail "topoalign discover --profile $p"; continue; }
  ngpu=$(jq '.gpus | length' "$D/$p.discover.json")
  mapfile -t gpu_bdfs < <(jq -r '.pci as $pci | .gpus[] | $pci[.pci].bdf' "$D/$p.discover.json" | sort)
  mapfile -t nic_bdfs < <(jq -r '.pci as $pci | .nics[] | select((.sriov.role // "none") != "vf") | $pci[.pci].bdf' "$D/$p.discover.json" | sort)

  # empty node: each size alone
  node=al-$p
  publish "$node" "$p" || continue
  for n in 1 2 4 8; do
    [ "$n" -le "$ngpu" ] || continue
    run_claim "$node" "$p" "e-$p-$n" "$n"
    release_claims "$NS" "e-$p-$n"
  done

  # fragmented node: every third GPU (from the second) and the first physical NIC's PF held by pods
  node=fr-$p
  publish "$node" "$p" || continue
  blockers=()
  for ((i = 1; i < ngpu; i += 3)); do
    block "$node" "b-$p-g$i" "${gpu_bdfs[$i]}" gpu.$DRIVER_NAME && blockers+=("b-$p-g$i")
  done
  block "$node" "b-$p-n0" "${nic_bdfs[0]}" nic.$DRIVER_NAME && blockers+=("b-$p-n0")
  free=$((ngpu - (ngpu + 1) / 3))
  info "$p fragmented: ${#blockers[@]} blocker pods, $free GPUs free"
  for n in 1 2 4 8; do
    [ "$n" -le "$free" ] || continue
    run_claim "$node" "$p" "f-$p-$n" "$n"
    release_claims "$NS" "f-$p-$n"
  done
  release_claims "$NS" "${blockers[@]}"

  # fill pod by pod with 1-pair claims until unschedulable
  node=fill-$p
  publish "$node" "$p" || continue
  all=""
  filled=()
  for ((i = 0; i <= ngpu; i++)); do
    run_claim "$node" "$p" "fill-$p-$i" 1 || break
    filled+=("fill-$p-$i")
    all="$all$LAST_CLASSES"
  done
  release_claims "$NS" "fill-$p-${#filled[@]}" > /dev/null 2>&1
  got=$(tr ' ' '\n' <<< "$all" | grep . | sort | uniq -c | awk '{printf "%s×%s ", $1, $2}')
  want=$("$TOPOALIGN" plan --profile "$p" --gpus "${#filled[@]}" --nics-per-gpu 1 -o json 2> /dev/null | jq -r '.pairs[].class' | sort | uniq -c | awk '{printf "%s×%s ", $1, $2}')
  figure "fill $p pod by pod: ${#filled[@]} one-pair pods; pair classes ${got:-none}| optimum for ${#filled[@]} GPUs at once: ${want:-none}"
  # as many pods as pairs exist at once: the most GPUs topoalign plan pairs on the empty node
  most=0
  for ((k = ngpu; k > 0; k--)); do
    "$TOPOALIGN" plan --profile "$p" --gpus "$k" --nics-per-gpu 1 -o json > /dev/null 2>&1 && { most=$k; break; }
  done
  if [ "${#filled[@]}" = "$most" ]; then pass "fill $p: ${#filled[@]} one-pair pods placed, as many as topoalign plan can pair at once ($most of $ngpu GPUs)"
  else fail "fill $p: ${#filled[@]} one-pair pods placed, topoalign plan pairs $most of $ngpu GPUs at once"; fi
  release_claims "$NS" "${filled[@]}"
done
