#!/usr/bin/env bash
# Scenario placement-dra (issue 11, DRA clusters): the real kube-scheduler with and without
# `topoalign extender` on DRA nodes, the same seeded stream of pair-claim pods both times.
#
# Nodes: E2E_PLACEMENT_DRA_NODES Node objects cycling mi300x-8, gb300-4, dgx-h100, each with
# the ResourceSlices `topoalign driver --dry-run` publishes for it (and the driver's
# DeviceClasses). Pre-occupancy, seeded per node and the same in both passes: up to half
# the GPUs and up to two NICs held by one real allocated claim (plain gpu/nic devices by
# PCI address, its pod scheduled by default-scheduler). Pods: 1/2/4/8-pair claims from
# `topoalign claims` templates (one in six 1-2 pair pods with `--max-class PXB`, rank <= 1),
# in batches, each pod leaving after a few batches (lib/placement_dra.py).
#
# Run 1: the stock kube-scheduler (default-scheduler). Run 2: a second kube-scheduler whose
# profile `topoalign-dra-scheduler` is wired to the extender
# (deploy/extender/scheduler-config-dra.yaml: no managedResources, since DRA pods request no
# extended resource). Each over several seeds in one run, at two loads: the scenario's
# (E2E_PLACEMENT_DRA_SEEDS, pods stay E2E_PLACEMENT_DRA_LIFETIME batches: the cluster runs
# full) and a lighter one (E2E_PLACEMENT_DRA_LIGHT_SEEDS, pods stay
# E2E_PLACEMENT_DRA_LIGHT_LIFETIME batches). The pod stream and the pre-occupancy differ per
# seed, the nodes are the same; they are drawn with the replay's generator, so a seed here
# is the same seed in crates/extender/tests/it/replay.rs (`placement_dra.py selftest`).
# Per load, per seed and summed: pods unschedulable, the pair classes of the allocated pair
# devices (status.allocation.devices.results → the device's rank), mean rank. PASS when
# the extender costs no pod: no more unschedulable pods than stock summed, never more than
# stock's + 1 on any seed, pooled mean rank better; otherwise TARGET MISSED with the
# numbers. More seeds run offline in the replay (seeds 11 … 20 at both loads), which the real
# scheduler's counts here check.
#
# Mixed-driver variant (issue 21, seed 001's cluster): E2E_PLACEMENT_DRA_MIXED_NODES nodes
# whose GPUs are published by NVIDIA's DRA driver (gpu.nvidia.com, newest format with the
# standard numaNode) and NICs by dranet (dra.net), written by the scenario; pods with seed
# 001's claim for 1 or 2 GPUs and as many NICs without its matchAttribute (the stock
# allocator may pick a NIC on the other NUMA node); seeded pre-occupancy of GPUs and NICs.
# Seeds E2E_PLACEMENT_DRA_MIXED_SEEDS, both schedulers: pods that got a cross-NUMA (SYS)
# GPU-NIC pair and pods left unschedulable, per seed and summed; PASS when the extender's
# sums are no worse on either. Its pods stay one batch (E2E_PLACEMENT_DRA_MIXED_LIFETIME):
# with two, 1-GPU pods fill every GPU that has a free NIC, the count then says which pods
# are turned away, not how many.
#
# Environment: E2E_PLACEMENT_DRA_NODES (24), E2E_PLACEMENT_DRA_PODS (120 per seed),
# E2E_PLACEMENT_DRA_SEEDS ("11 12 13"), E2E_PLACEMENT_DRA_LIFETIME (2),
# E2E_PLACEMENT_DRA_LIGHT_SEEDS ("14 15"; empty skips the lighter load),
# E2E_PLACEMENT_DRA_LIGHT_LIFETIME (1), E2E_PLACEMENT_DRA_BATCH (20),
# E2E_PLACEMENT_DRA_MIXED_NODES (16, 0 skips the variant), E2E_PLACEMENT_DRA_MIXED_PODS (60
# per seed), E2E_PLACEMENT_DRA_MIXED_SEEDS ("11 12 13"), E2E_PLACEMENT_DRA_MIXED_LIFETIME (1).
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"
. "$E2E_DIR/lib/cluster.sh"
. "$E2E_DIR/lib/extender.sh"

need_topoalign_cmd extender
need_topoalign_cmd driver
need_topoalign_cmd claims
D=$SCEN_DIR
NS=placement-dra
NODES=${E2E_PLACEMENT_DRA_NODES:-24}
PODS=${E2E_PLACEMENT_DRA_PODS:-120}
SEEDS=(${E2E_PLACEMENT_DRA_SEEDS-11 12 13})
LSEEDS=(${E2E_PLACEMENT_DRA_LIGHT_SEEDS-14 15})
BATCH=${E2E_PLACEMENT_DRA_BATCH:-20}
LIFETIME=${E2E_PLACEMENT_DRA_LIFETIME:-2}
LLIFETIME=${E2E_PLACEMENT_DRA_LIGHT_LIFETIME:-1}
MNODES=${E2E_PLACEMENT_DRA_MIXED_NODES:-16}
MPODS=${E2E_PLACEMENT_DRA_MIXED_PODS:-60}
MSEEDS=(${E2E_PLACEMENT_DRA_MIXED_SEEDS-11 12 13})
MLIFETIME=${E2E_PLACEMENT_DRA_MIXED_LIFETIME:-1}
PY=$E2E_DIR/lib/placement_dra.py
API=(--server "https://127.0.0.1:$P_API" --ca "$RUN/pki/ca.crt" --cert "$RUN/pki/admin.crt" --key "$RUN/pki/admin.key")
export TOPOALIGN
make_namespace "$NS"

cleanup() { python3 "$PY" cleanup "${API[@]}" > "$D/cleanup.out" 2>&1 || fail "placement-dra: cleanup: $(tail -2 "$D/cleanup.out")"; }

if ! python3 "$PY" selftest > "$D/selftest.out" 2>&1; then
  fail "placement-dra: $(tail -1 "$D/selftest.out" | head -c 800)"
  exit 1
fi
if ! python3 "$PY" setup --count "$NODES" --ns "$NS" --out "$D/nodes.json" "${API[@]}" > "$D/setup.out" 2>&1; then
  fail "placement-dra: setting up $NODES DRA nodes: $(tail -3 "$D/setup.out" | head -c 800)"
  cleanup
  exit 1
fi
if [ "$MNODES" -gt 0 ] && ! python3 "$PY" setup-mixed --count "$MNODES" --ns "$NS" --out "$D/mixed-nodes.json" "${API[@]}" > "$D/setup-mixed.out" 2>&1; then
  fail "placement-dra: setting up $MNODES mixed-driver nodes: $(tail -3 "$D/setup-mixed.out" | head -c 800)"
  cleanup
  exit 1
fi
for seed in $(printf '%s\n' "${SEEDS[@]}" "${LSEEDS[@]}" "${MSEEDS[@]}" | sort -un); do
  python3 "$PY" stream --count "$PODS" --seed "$seed" > "$D/stream-$seed.json" &&
    python3 "$PY" stream-mixed --count "$MPODS" --seed "$seed" > "$D/mixed-stream-$seed.json" ||
    { fail "placement-dra: the pod streams of seed $seed"; cleanup; exit 1; }
done
s0=$D/stream-${SEEDS[0]:-${LSEEDS[0]}}.json
info "placement-dra: $NODES nodes ($(jq -r 'group_by(.profile) | map("\(length)×\(.[0].profile)") | join(" ")' "$D/nodes.json")), seeds ${SEEDS[*]} (pods stay $LIFETIME batches) and ${LSEEDS[*]:-none} (lighter: $LLIFETIME), $PODS pods per seed (first seed: $(jq -r 'group_by(.pairs) | map("\(length)×\(.[0].pairs)-pair") | join(" ")' "$s0"), $(jq '[.[] | select(.pxb)] | length' "$s0") of them PXB-or-better)"
[ "$MNODES" -gt 0 ] && info "placement-dra mixed-driver: $MNODES nodes ($(jq -r 'group_by(.profile) | map("\(length)×\(.[0].profile)") | join(" ")' "$D/mixed-nodes.json"), gpu.nvidia.com + dra.net slices), seeds ${MSEEDS[*]}, $MPODS pods per seed of 1 or 2 GPUs with as many NICs"

# run_pass TAG SCHEDULER SEED LIFETIME [--mixed] : one pass of seed SEED's stream, pods
# staying LIFETIME batches; result in $D/TAG.json
run_pass() {
  local t tag=$1 sched=$2 seed=$3 lifetime=$4 nodes=$D/nodes.json stream=$D/stream-$3.json
  shift 4
  if [ "${1:-}" = --mixed ]; then nodes=$D/mixed-nodes.json; stream=$D/mixed-stream-$seed.json; fi
  t=$(now)
  if ! python3 "$PY" run --nodes "$nodes" --stream "$stream" --scheduler "$sched" --tag "$tag" --ns "$NS" \
    --seed "$seed" --out "$D/$tag.json" --batch "$BATCH" --lifetime "$lifetime" "$@" "${API[@]}" > "$D/$tag.out" 2> "$D/$tag.log"; then
    fail "placement-dra: the $tag pass failed: $(tail -3 "$D/$tag.log" | head -c 800)"
    return 1
  fi
  info "placement-dra: $tag pass ($sched) took $(since "$t") s"
}

# run_all PREFIX SCHEDULER : every seed's pass at both loads, and the mixed variant's
run_all() {
  local seed
  for seed in "${SEEDS[@]}"; do run_pass "$1-$seed" "$2" "$seed" "$LIFETIME" || return 1; done
  for seed in "${LSEEDS[@]}"; do run_pass "$1-light-$seed" "$2" "$seed" "$LLIFETIME" || return 1; done
  if [ "$MNODES" -gt 0 ]; then
    for seed in "${MSEEDS[@]}"; do run_pass "m$1-$seed" "$2" "$seed" "$MLIFETIME" --mixed || return 1; done
  fi
}

run_all stock default-scheduler || { cleanup; exit 1; }

# the extender and a second scheduler wired to it
P_EXT=$(free_ports 1)
if ! start_extender extender-dra "$P_EXT"; then
  fail "placement-dra: topoalign extender not ready in 30 s (log: $RUN/logs/extender-dra.log)"
  cleanup
  exit 1
fi
if ! wire_scheduler topoalign-dra-scheduler scheduler-config-dra.yaml "$P_EXT" "$D/scheduler-config.yaml"; then
  fail "placement-dra: the second kube-scheduler (profile topoalign-dra-scheduler, deploy/extender/scheduler-config-dra.yaml) did not start (log: $RUN/logs/topoalign-dra-scheduler.log)"
  cleanup
  exit 1
fi
pass "placement-dra: a second kube-scheduler with profile topoalign-dra-scheduler wired to topoalign extender (deploy/extender/scheduler-config-dra.yaml, no managedResources) is up"

run_all extender topoalign-dra-scheduler || { cleanup; exit 1; }

M=$D/extender-metrics.txt
curl -s "http://127.0.0.1:$P_EXT/metrics" > "$M"
nfilter=$(metric_total "$M" topoalign_extender_requests_total 'verb="filter"')
errs=$(http_errors "$M")
figure "placement-dra extender calls: filter $nfilter, HTTP 4xx/5xx $errs; DRA verdicts $(metric_samples "$M" topoalign_extender_dra_verdicts_total)"
judged=$(metric_total "$M" topoalign_extender_dra_verdicts_total 'outcome="fit"')
bound_ext=$(jq -s 'map(.stats.bound // 0) | add' "$D"/extender-*.json "$D"/mextender-*.json 2> /dev/null || echo 0)
if [ "$nfilter" -ge "$bound_ext" ] && [ "$judged" -gt 0 ] && [ "$errs" = 0 ]; then
  pass "placement-dra: the scheduler consulted the extender's DRA path ($nfilter filter calls for $bound_ext bound pods, $judged node verdicts 'fit', no HTTP errors)"
else
  fail "placement-dra: the scheduler consulted the extender $nfilter times for $bound_ext bound pods, $judged DRA 'fit' verdicts, $errs HTTP errors (see $RUN/logs/extender-dra.log)"
fi
stop_component topoalign-dra-scheduler
stop_component extender-dra
cleanup

list() { local p=$1 s out=(); shift; for s in "$@"; do out+=("$D/$p-$s.json"); done; (IFS=,; echo "${out[*]}"); }
if [ "${#SEEDS[@]}" -gt 0 ]; then
  python3 "$PY" compare --load "pods stay $LIFETIME batches" --stock "$(list stock "${SEEDS[@]}")" --extender "$(list extender "${SEEDS[@]}")" > "$D/compare.out" || { fail "placement-dra: comparing the passes"; exit 1; }
  report_compare placement-dra "$D/compare.out"
fi
if [ "${#LSEEDS[@]}" -gt 0 ]; then
  python3 "$PY" compare --load "lighter, pods stay $LLIFETIME batch(es)" --stock "$(list stock-light "${LSEEDS[@]}")" --extender "$(list extender-light "${LSEEDS[@]}")" > "$D/compare-light.out" || { fail "placement-dra: comparing the lighter passes"; exit 1; }
  report_compare "placement-dra lighter load" "$D/compare-light.out"
fi
if [ "$MNODES" -gt 0 ]; then
  python3 "$PY" compare --mixed --stock "$(list mstock "${MSEEDS[@]}")" --extender "$(list mextender "${MSEEDS[@]}")" > "$D/compare-mixed.out" || { fail "placement-dra: comparing the mixed-driver passes"; exit 1; }
  report_compare "placement-dra mixed-driver" "$D/compare-mixed.out"
fi
