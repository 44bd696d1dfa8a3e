#!/usr/bin/env bash
# Scenario extended (issue 33): pods that ask `limits: {topoalign.dev/gpu-nic-pair: N}` and
# carry no claim (DRAExtendedResource, GA in 1.37: the DeviceClass names the resource, the
# scheduler makes the claim, the kubelet has the driver prepare it).
#
# 1. Every profile on two twin nodes publishing the same ResourceSlices (`topoalign driver
#    --dry-run`, DeviceClasses with extendedResourceName), empty and then fragmented alike
#    (the same GPUs held by real allocated claims on both): a pod with the extended resource
#    on one twin and a pod with the equivalent claim (`topoalign claims --pairs N`) on the
#    other get exactly the same pair devices, N = 1, 2, 4 and every free GPU.
# 2. On an mi300x-8 node served by the real `topoalign driver`, the kubelet's own DRA manager
#    (kubeletdra) prepares such a pod: the container's CDI devices come from the driver, whose
#    spec holds exactly the allocated devices and the pairing variables.
# 3. Unsatisfiable (more pairs than any node has): Unschedulable as fast as the same claim.
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$E2E_DIR/lib/cluster.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"

need_topoalign_cmd driver
need_topoalign_cmd claims
NS=extended
D=$SCEN_DIR
RES=topoalign.dev/gpu-nic-pair
PROFILES=(${E2E_PROFILES:-mi300x-8 gb300-4 dgx-h100 pcie-2socket dgx-a100-mig})
make_namespace "$NS"
T0=$(now)

# a_pod POD NODE N KIND : a pod asking N pairs, as the extended resource (KIND ext) or with a
# claim template from `topoalign claims --pairs N` (KIND claim); NODE empty: any node.
a_pod() {
  local sel="" res
  [ -n "$2" ] && sel="nodeSelector: {kubernetes.io/hostname: $2}"
  if [ "$4" = ext ]; then
    res="resources: {limits: {$RES: \"$3\"}}"
    printf '%s\n' "apiVersion: v1" "kind: Pod" "metadata: {name: $1, namespace: $NS}" "spec:" \
      "  $sel" "  terminationGracePeriodSeconds: 0" \
      "  containers: [{name: c, image: registry.k8s.io/pause:3.10, $res}]" | K apply -f - > /dev/null
  else
    K -n "$NS" get resourceclaimtemplate "pairs-$3" > /dev/null 2>&1 ||
      "$TOPOALIGN" claims --pairs "$3" --name "pairs-$3" | K -n "$NS" apply -f - > /dev/null
    printf '%s\n' "apiVersion: v1" "kind: Pod" "metadata: {name: $1, namespace: $NS}" "spec:" \
      "  $sel" "  terminationGracePeriodSeconds: 0" \
      "  resourceClaims: [{name: devs, resourceClaimTemplateName: pairs-$3}]" \
      "  containers: [{name: c, image: registry.k8s.io/pause:3.10, resources: {claims: [{name: devs}]}}]" |
      K apply -f - > /dev/null
  fi
}
# pod_claim POD : the claim the scheduler made (extended) or the template's (claim)
pod_claim() {
  K -n "$NS" get pod "$1" -o json |
    jq -r '.status.extendedResourceClaimStatus.resourceClaimName // (.status.resourceClaimStatuses // [] | map(.resourceClaimName) | first) // empty'
}
devices_of_pod() { local c; c=$(pod_claim "$1"); [ -n "$c" ] && claim_devices "$NS" "$c" | sort | tr '\n' ' '; }
drop_pods() { K -n "$NS" delete pod "$@" --grace-period=0 --force --wait=false > /dev/null 2>&1; }
wait_no_claims() {
  wait_until 60 "claims of $NS deleted" bash -c "[ -z \"\$('$K8S_BIN/kubectl' -n $NS get resourceclaims -l '!e2e-held' -o name)\" ]"
}

# hold NODE GPU... : one allocated claim holding these GPUs (by PCI address) of NODE
hold() {
  local node=$1; shift
  local reqs='[]' i=0 b
  for b in "$@"; do
    reqs=$(jq -c --arg n "g$i" --arg e "device.attributes[\"resource.kubernetes.io\"].pciBusID == \"$b\"" \
      '. + [{name: $n, exactly: {deviceClassName: "gpu.topoalign.dev", selectors: [{cel: {expression: $e}}]}}]' <<< "$reqs")
    i=$((i + 1))
  done
  jq -n --arg name "held-$node" --argjson r "$reqs" \
    '{apiVersion: "resource.k8s.io/v1", kind: "ResourceClaim", metadata: {name: $name, labels: {"e2e-held": "1"}}, spec: {devices: {requests: $r}}}' |
    K -n "$NS" apply -f - > /dev/null || return 1
  pod_with_claim "$NS" "held-$node" "held-$node" "$node"
  wait_pod_bound "$NS" "held-$node" 30
}

# outcome POD : bound, unschedulable (the scheduler tried every node) or undecided, within 30 s
outcome() {
  local end=$((SECONDS + 30)) r
  while [ $SECONDS -lt $end ]; do
    [ -n "$(pod_node "$NS" "$1")" ] && { echo bound; return; }
    r=$(pod_scheduled_reason "$NS" "$1")
    [ "$r" = Unschedulable ] && pod_scheduled_message "$NS" "$1" | grep -q '^0/' && { echo unschedulable; return; }
    sleep 0.3
  done
  echo undecided
}

ok=0; bad=0; both_refused=0; worse=()
for profile in "${PROFILES[@]}"; do
  ext=ext-$profile; cla=cla-$profile
  for n in $ext $cla; do
    make_node "$n" || { fail "extended: node $n"; continue 2; }
    "$TOPOALIGN" driver --profile "$profile" --node-name "$n" --dry-run -o yaml > "$D/$n.yaml" 2> "$D/$n.err" &&
      K apply --server-side --field-manager=e2e -f "$D/$n.yaml" > /dev/null 2> "$D/$n.apply.err" ||
      { fail "extended: publishing $profile for $n: $(head -c 600 "$D/$n.err" "$D/$n.apply.err")"; continue 2; }
  done
  mapfile -t gpus < <(slices_of "$ext" | jq -r '[.[].spec.devices // [] | .[] | select(.attributes.type.string == "gpu") | .attributes["resource.kubernetes.io/pciBusID"].string] | sort | .[]')
  total=${#gpus[@]}
  for state in empty fragmented; do
    free=$total
    if [ "$state" = fragmented ]; then
      # the same GPUs held on both twins: every other one from the second on
      held=()
      for ((i = 1; i < total; i += 2)); do held+=("${gpus[$i]}"); done
      [ ${#held[@]} -gt 0 ] || continue
      hold "$ext" "${held[@]}" && hold "$cla" "${held[@]}" || { fail "extended: holding GPUs on $profile's twins"; continue; }
      free=$((total - ${#held[@]}))
    fi
    for n in $(printf '%s\n' 1 2 4 "$free" | sort -nu); do
      [ "$n" -le "$free" ] || continue
      pe=e-$profile-$state-$n pc=c-$profile-$state-$n
      a_pod "$pe" "$ext" "$n" ext
      a_pod "$pc" "$cla" "$n" claim
      oe=$(outcome "$pe"); oc=$(outcome "$pc")
      if [ "$oe" = bound ] && [ "$oc" = bound ]; then
        de=$(devices_of_pod "$pe"); dc=$(devices_of_pod "$pc")
        if [ -n "$de" ] && [ "$(wc -w <<< "$de")" = "$n" ] && [ "$de" = "$dc" ]; then
          ok=$((ok + 1))
        else
          bad=$((bad + 1)); worse+=("$profile $state $n: extended [$de] vs claim [$dc];")
        fi
      elif [ "$oe" = unschedulable ] && [ "$oc" = unschedulable ]; then
        ok=$((ok + 1)); both_refused=$((both_refused + 1)) # fewer NICs than pairs, say: the same verdict
      else
        bad=$((bad + 1)); worse+=("$profile $state $n: extended $oe, claim $oc ($(pod_scheduled_message "$NS" "$pe") / $(pod_scheduled_message "$NS" "$pc"));")
      fi
      drop_pods "$pe" "$pc"
      wait_no_claims
    done
  done
  drop_pods "held-$ext" "held-$cla"
  K -n "$NS" delete resourceclaim "held-$ext" "held-$cla" --ignore-not-found > /dev/null
done
if [ "$bad" = 0 ] && [ "$ok" -gt 0 ]; then
  pass "extended: $ok pods asking $RES without a claim got exactly what the equivalent 'topoalign claims --pairs N' claim got, on empty and fragmented nodes of ${#PROFILES[@]} profiles ($((ok - both_refused)) the same pair devices, $both_refused refused alike)"
else
  fail "extended: $bad of $((ok + bad)) extended-resource pods differ from their claim twins: ${worse[*]:0:3}"
fi

# 2. the kubelet's DRA manager prepares an extended-resource pod through the real driver
NODE=ext-kubelet
mkdir -p "$D/registry" "$D/watch" "$D/plugins" "$D/cdi" "$D/state" "$D/kubelet-state"
make_node "$NODE" || fail "extended: node $NODE"
DRIVER_CMD="'$TOPOALIGN' driver --profile mi300x-8 --node-name $NODE --kubeconfig '$KUBECONFIG' \
--plugin-registry-dir '$D/registry' --plugin-dir '$D/plugins' --cdi-dir '$D/cdi' --state-dir '$D/state' --metrics-addr 127.0.0.1:$(free_ports 1)"
coproc KD { "$TOOLS_BIN/kubeletdra" --node "$NODE" --driver "$DRIVER_NAME" \
  --plugin-registry-dir "$D/registry" --watch-dir "$D/watch" --state-dir "$D/kubelet-state" \
  --cdi-dir "$D/cdi" --driver-cmd "$DRIVER_CMD" --driver-log "$RUN/logs/driver-extended.log" \
  --driver-pid-file "$RUN/pid/driver-extended" 2> "$RUN/logs/kubeletdra-extended.log"; }
register_pid kubeletdra-extended "$KD_PID"
grep -qx driver-extended "$RUN/pid.order" 2> /dev/null || echo driver-extended >> "$RUN/pid.order"
step() {
  echo "$*" >&"${KD[1]}"
  local line
  while IFS= read -r -t 120 line <&"${KD[0]}"; do
    case "$line" in
      "STEP-DONE ok") return 0 ;;
      "STEP-DONE fail") return 1 ;;
      *) printf '%s\n' "$line" ;;
    esac
  done
  fail "kubeletdra: no answer to '$*'"
  return 1
}
registered() {
  step start && step register &&
    wait_until 30 "slices of $NODE" bash -c "[ \"\$('$K8S_BIN/kubectl' get resourceslices -o json | jq --arg n $NODE '[.items[] | select(.spec.nodeName == \$n)] | length')\" -gt 0 ]"
}
if registered; then
  a_pod ext4 "$NODE" 4 ext
  if wait_pod_bound "$NS" ext4 30; then
    claim=$(pod_claim ext4)
    uid=$(K -n "$NS" get resourceclaim "$claim" -o jsonpath='{.metadata.uid}')
    step prepare-pod "$NS/ext4" > "$D/prepare.out"
    cat "$D/prepare.out"
    step cdi "$NS/$claim" present
    spec=$(grep -l "$uid" "$D"/cdi/* 2> /dev/null | head -1)
    if grep -q "^PASS: kubelet DRA manager prepared pod" "$D/prepare.out" && grep -q "gets CDI devices \[topoalign.dev" "$D/prepare.out" &&
      [ -n "$spec" ] && grep -q 'TOPOALIGN_GPU_NIC_MAP\|NCCL_IB_HCA' "$spec"; then
      pass "extended: the kubelet's DRA manager prepared pod ext4 ($RES: 4, claim $claim made by the scheduler): the container's CDI devices come from topoalign driver, its spec holds the pairing variables"
    else
      fail "extended: preparing ext4: CDI devices or pairing variables missing (spec ${spec:-none}; $(head -c 400 "$D/prepare.out"))"
    fi
    step unprepare-pod "$NS/ext4"
    drop_pods ext4
  else
    fail "extended: ext4 not scheduled on $NODE: $(pod_scheduled_message "$NS" ext4)"
  fi
else
  fail "extended: topoalign driver did not register with the kubelet's code (log: $RUN/logs/kubeletdra-extended.log)"
fi
step stop > /dev/null
exec {KD[1]}>&-
wait "$KD_PID" 2> /dev/null
rm -f "$RUN/pid/kubeletdra-extended"

# 3. unsatisfiable: 9 pairs, more than any node has
unsched() { # POD : seconds until PodScheduled=False/Unschedulable, empty when never
  local t; t=$(now)
  wait_until 30 "$1 unschedulable" bash -c "[ \"\$('$K8S_BIN/kubectl' -n $NS get pod $1 -o jsonpath='{.status.conditions[?(@.type==\"PodScheduled\")].reason}')\" = Unschedulable ]" && since "$t"
}
a_pod too-many-ext "" 9 ext
te=$(unsched too-many-ext)
a_pod too-many-claim "" 9 claim
tc=$(unsched too-many-claim)
if [ -n "$te" ] && [ -n "$tc" ] && awk -v e="$te" -v c="$tc" 'BEGIN{exit !(e <= c + 2)}'; then
  pass "extended: $RES: 9 is Unschedulable in $te s, the equivalent claim in $tc s ($(pod_scheduled_message "$NS" too-many-ext | head -c 160))"
else
  fail "extended: unsatisfiable: the extended resource Unschedulable after ${te:-never} s, the claim after ${tc:-never} s"
fi
drop_pods too-many-ext too-many-claim
for p in "${PROFILES[@]}" kubelet; do
  for n in ext-$p cla-$p; do
    K delete resourceslices --field-selector "spec.nodeName=$n" > /dev/null 2>&1
    K delete node "$n" --ignore-not-found > /dev/null 2>&1
  done
done
info "extended: took $(since "$T0") s"
