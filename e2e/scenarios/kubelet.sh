#!/usr/bin/env bash
# Scenario 4: the kubelet's own registration and DRA client code against `topoalign driver`.
#
# kubeletdra (e2e/go/cmd/kubeletdra) runs the kubelet's plugin watcher and DRA manager with a
# real API server client; this script drives it step by step: register, prepare and
# unprepare pair claims (1, 2, 4, 8 pairs) scheduled by the real scheduler, check the CDI
# specs, kill and restart the driver between calls, repeat calls, and hand-written
# allocations naming a taken or a foreign device, which the driver must refuse.
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$E2E_DIR/lib/cluster.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"

need_topoalign_cmd driver
need_topoalign_cmd claims

NS=kubelet
NODE=kubelet-mi300x
PROFILE=mi300x-8
D=$SCEN_DIR
mkdir -p "$D/registry" "$D/watch" "$D/plugins" "$D/cdi" "$D/state" "$D/kubelet-state"
make_namespace "$NS"
make_node "$NODE" topoalign.dev/profile=$PROFILE || { fail "kubelet: node $NODE not ready/untainted"; exit 1; }

# The DeviceClasses ship with the driver: apply them from its dry-run stream.
"$TOPOALIGN" driver --profile "$PROFILE" --node-name "$NODE" --dry-run -o yaml > "$D/dry-run.yaml" 2> "$D/dry-run.err" ||
  { fail "kubelet: topoalign driver --dry-run: $(head -c 1000 "$D/dry-run.err")"; exit 1; }
yaml_to_json "$D/dry-run.yaml" | jq '{apiVersion: "v1", kind: "List", items: [.[] | select(.kind == "DeviceClass")]}' > "$D/classes.json"
K apply -f "$D/classes.json" > /dev/null || { fail "kubelet: applying the driver's DeviceClasses"; exit 1; }

DRIVER_CMD="'$TOPOALIGN' driver --profile $PROFILE --node-name $NODE --kubeconfig '$KUBECONFIG' \
--plugin-registry-dir '$D/registry' --plugin-dir '$D/plugins' --cdi-dir '$D/cdi' --state-dir '$D/state' --metrics-addr 127.0.0.1:$(free_ports 1)"

coproc KD { "$TOOLS_BIN/kubeletdra" --node "$NODE" --driver "$DRIVER_NAME" \
  --plugin-registry-dir "$D/registry" --watch-dir "$D/watch" --state-dir "$D/kubelet-state" \
  --cdi-dir "$D/cdi" --driver-cmd "$DRIVER_CMD" --driver-log "$RUN/logs/driver-kubelet.log" \
  --driver-pid-file "$RUN/pid/driver-kubelet" 2> "$RUN/logs/kubeletdra.log"; }
register_pid kubeletdra "$KD_PID"
grep -qx driver-kubelet "$RUN/pid.order" 2> /dev/null || echo driver-kubelet >> "$RUN/pid.order"

# step WORDS... : send one step, echo its output, succeed when it ended "STEP-DONE ok".
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
  fail "kubeletdra: no answer to '$*' (log: $RUN/logs/kubeletdra.log)"
  return 1
}

step start || exit 1
step register || exit 1
if wait_until 30 "slices of $NODE" bash -c "[ \"\$('$K8S_BIN/kubectl' get resourceslices -o json | jq --arg n $NODE '[.items[] | select(.spec.nodeName == \$n)] | length')\" -gt 0 ]"; then
  pass "driver published $(slices_of "$NODE" | jq 'length') ResourceSlices for $NODE ($(slices_of "$NODE" | jq '[.[].spec.devices // [] | length] | add') devices)"
else
  fail "driver published no ResourceSlices for $NODE (log: $RUN/logs/driver-kubelet.log)"
fi

# claim_and_pod N [CLAIM POD] : claim CLAIM (default kN) with N pairs and pod POD (default
# pN) using it, scheduled onto NODE
claim_and_pod() {
  local n=$1 c=${2:-k$1} p=${3:-p$1}
  "$TOPOALIGN" claims --pairs "$n" --claim --name "$c" -o yaml > "$D/$c.yaml" 2> "$D/$c.err" ||
    { fail "topoalign claims --pairs $n: $(cat "$D/$c.err")"; return 1; }
  K -n "$NS" apply -f "$D/$c.yaml" > /dev/null || { fail "applying claim $c"; return 1; }
  pod_with_claim "$NS" "$p" "$c" "$NODE"
  if wait_pod_bound "$NS" "$p" 30; then
    info "pod $p bound; claim $c allocated: $(claim_devices "$NS" "$c" | tr '\n' ' ')"
  else
    fail "pod $p not scheduled: $(pod_scheduled_message "$NS" "$p")"
    return 1
  fi
}

# lifecycle N : prepare through the DRA manager, CDI check, driver killed and restarted,
# repeated prepare through the client (idempotent), unprepare, repeated unprepare.
lifecycle() {
  local n=$1
  step prepare-pod "$NS/p$n"
  step cdi "$NS/k$n" present
  step kill && step start && step register
  step prepare "$NS/k$n" ok
  step prepare "$NS/k$n" ok
  step cdi "$NS/k$n" present
}
finish_lifecycle() {
  local n=$1
  step unprepare-pod "$NS/p$n"
  step unprepare "$NS/k$n" ok # a repeat: idempotent
  step cdi "$NS/k$n" absent
  # no kubelet confirms a graceful deletion: force it
  K -n "$NS" delete pod "p$n" --grace-period=0 --force > /dev/null 2>&1
  K -n "$NS" delete resourceclaim "k$n" --wait=false > /dev/null
}

for n in 1 2 4; do claim_and_pod "$n" && lifecycle "$n"; done

# Hand-written allocations (the scheduler accepts them blindly): a device already prepared
# for k4, and a device of another node's pool. The driver must refuse both.
handmade_claim() { # NAME POOL DEVICE
  K -n "$NS" apply -f - > /dev/null << EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $1}
spec:
  devices:
    requests:
    - name: pairs
      exactly: {deviceClassName: gpu-nic-pair.$DRIVER_NAME, allocationMode: ExactCount, count: 1}
EOF
  K -n "$NS" patch resourceclaim "$1" --subresource=status --type=merge -p "$(jq -nc --arg pool "$2" --arg dev "$3" --arg node "$NODE" --arg drv "$DRIVER_NAME" \
    '{status: {allocation: {devices: {results: [{request: "pairs", driver: $drv, pool: $pool, device: $dev}]},
      nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: "metadata.name", operator: "In", values: [$node]}]}]}}}}')" > /dev/null
}
if [ -n "$(claim_devices "$NS" k4 2> /dev/null)" ]; then
  pool=$(K -n "$NS" get resourceclaim k4 -o jsonpath='{.status.allocation.devices.results[0].pool}')
  taken=$(K -n "$NS" get resourceclaim k4 -o jsonpath='{.status.allocation.devices.results[0].device}')
  if handmade_claim taken "$pool" "$taken"; then step prepare "$NS/taken" refused; else fail "could not write the hand-made allocation 'taken'"; fi
  if handmade_claim foreign "not-$NODE" "$taken"; then step prepare "$NS/foreign" refused; else fail "could not write the hand-made allocation 'foreign'"; fi
  if handmade_claim unknown "$pool" "no-such-device"; then step prepare "$NS/unknown" refused; else fail "could not write the hand-made allocation 'unknown'"; fi
fi

for n in 1 2 4; do finish_lifecycle "$n"; done
# the hand-made allocations hold devices in the scheduler's view: remove them before 8 pairs
K -n "$NS" delete resourceclaim taken foreign unknown --ignore-not-found > /dev/null
wait_until 30 "claims deleted" bash -c "[ -z \"\$('$K8S_BIN/kubectl' -n $NS get resourceclaims -o name)\" ]"
claim_and_pod 8 && lifecycle 8 && finish_lifecycle 8

# The driver crashes in the middle of a prepare (or unprepare), at each write step: the
# kubelet's call fails, the restarted driver reconciles, no temporary file or orphan spec
# is left, and the kubelet's retry gets the claim prepared (or unprepared) exactly once.
leftovers() { find "$D/cdi" "$D/state" -name '.tmp*' | wc -l; }
crash_case() { # OP POINT
  local op=$1 point=$2 c="crash-$1-$2" p="crash-pod-$1-$2"
  claim_and_pod 2 "$c" "$p" || return
  if [ "$op" = unprepare ]; then step prepare "$NS/$c" ok > /dev/null || { fail "crash $op $point: first prepare"; return; }; fi
  step kill > /dev/null && step start --crash-at "$point" > /dev/null && step register > /dev/null || { fail "crash $op $point: driver with --crash-at did not register"; return; }
  step "$op" "$NS/$c" refused > /dev/null
  if ! step crashed; then fail "crash $op $point: the driver did not crash at $point"; return; fi
  step start > /dev/null && step register > /dev/null || { fail "crash $op $point: restart after the crash"; return; }
  local left; left=$(leftovers)
  if [ "$op" = prepare ]; then
    if step prepare "$NS/$c" ok > /dev/null && step cdi "$NS/$c" present > /dev/null && [ "$left" = 0 ]; then
      pass "driver crashed mid-prepare at $point: restarted, no temporary files, the retried prepare holds exactly the allocated devices"
    else fail "driver crashed mid-prepare at $point: retry or CDI check failed ($left temporary files; log: $RUN/logs/driver-kubelet.log)"; fi
    step unprepare "$NS/$c" ok > /dev/null
  else
    if step unprepare "$NS/$c" ok > /dev/null && step cdi "$NS/$c" absent > /dev/null && [ "$left" = 0 ]; then
      pass "driver crashed mid-unprepare at $point: restarted, no temporary files, the retried unprepare removed the claim's spec"
    else fail "driver crashed mid-unprepare at $point: retry or CDI check failed ($left temporary files)"; fi
  fi
  K -n "$NS" delete pod "$p" --grace-period=0 --force > /dev/null 2>&1
  K -n "$NS" delete resourceclaim "$c" --wait=false > /dev/null
}
for point in checkpoint-written checkpoint-renamed cdi-written cdi-renamed; do crash_case prepare "$point"; done
for point in cdi-removed checkpoint-synced; do crash_case unprepare "$point"; done

# Clean removal: SIGTERM, then the node's slices must be gone.
step stop
if wait_until 30 "slices of $NODE removed" bash -c "[ \"\$('$K8S_BIN/kubectl' get resourceslices -o json | jq --arg n $NODE '[.items[] | select(.spec.nodeName == \$n)] | length')\" = 0 ]"; then
  pass "driver removed its ResourceSlices on SIGTERM"
else
  fail "driver left $(slices_of "$NODE" | jq length) ResourceSlices after SIGTERM"
fi
exec {KD[1]}>&-
wait "$KD_PID" 2> /dev/null
rm -f "$RUN/pid/kubeletdra"
