#!/usr/bin/env bash
# Scenario vendor (issue 34): GPUs of NVIDIA's DRA driver v0.5 (gpu.nvidia.com) and NICs of
# dranet (dra.net) or the SR-IOV DRA driver, in their own formats, on nodes shaped like the
# built-in dgx-h100 (layouts full, half and sriov: lib/vendor.py), claimed through the
# node-independent templates of `topoalign claims --gpu-class gpu.nvidia.com --nic-class …`
# (no device or node named; a seeded stream of 1/2/4-pair pods, 3 in 4 on dranet's NICs,
# 1 in 4 on SR-IOV VFs). Per seed: the stock kube-scheduler, then a second scheduler wired to
# `topoalign extender` (deploy/extender/scheduler-config-dra.yaml), then the same stream of
# sizes on topoalign's own driver on dgx-h100 nodes (pair claims, with the extender); seeded
# pre-occupancy of whole GPU+NIC pairs, and on dranet nodes up to two NICs without their GPU. Counted per seed and summed: pods with GPUDirect
# RDMA on every GPU (the truth: `topoalign matrix --profile dgx-h100`, PIX/PXB), pods with a
# cross-NUMA pair and of those the ones whose node had an aligned choice, unschedulable pods.
# Targets: with the extender no pod gets a cross-NUMA pair where its node had an aligned
# choice; pods with GDR on every GPU extender >= stock on every seed; the gap to the own
# driver is a FIGURE. Then, with the extender's last batch bound, `topoalign explain --all
# --profile dgx-h100 -o json` must name exactly the devices of every pod's status.allocation,
# with the classes `topoalign matrix`/`plan` give (VFs, which the profile lacks, by the
# slices), and the extender's alignment gauges are read.
#
# Environment: E2E_VENDOR_NODES (12), E2E_VENDOR_OWN_NODES (12: as many GPUs), E2E_VENDOR_PODS (40
# per seed), E2E_VENDOR_SEEDS ("21 22 23"), E2E_VENDOR_BATCH (10), E2E_VENDOR_LIFETIME (1).
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"
. "$E2E_DIR/lib/cluster.sh"
. "$E2E_DIR/lib/extender.sh"

need_topoalign_cmd extender
need_topoalign_cmd driver
need_topoalign_cmd claims
need_topoalign_cmd explain
D=$SCEN_DIR
NS=vendor
NODES=${E2E_VENDOR_NODES:-12}
OWN=${E2E_VENDOR_OWN_NODES:-12}
PODS=${E2E_VENDOR_PODS:-40}
SEEDS=(${E2E_VENDOR_SEEDS:-21 22 23})
BATCH=${E2E_VENDOR_BATCH:-10}
LIFETIME=${E2E_VENDOR_LIFETIME:-1}
PY=$E2E_DIR/lib/vendor.py
API=(--server "https://127.0.0.1:$P_API" --ca "$RUN/pki/ca.crt" --cert "$RUN/pki/admin.crt" --key "$RUN/pki/admin.key")
export TOPOALIGN KUBECONFIG
make_namespace "$NS"

cleanup() { python3 "$PY" cleanup "${API[@]}" > "$D/cleanup.out" 2>&1 || fail "vendor: cleanup: $(tail -2 "$D/cleanup.out")"; }

T=$(now)
if ! python3 "$PY" setup --count "$NODES" --own "$OWN" --ns "$NS" --out "$D/nodes.json" "${API[@]}" > "$D/setup.out" 2>&1; then
  fail "vendor: setting up $NODES vendor nodes and $OWN own-driver nodes: $(tail -3 "$D/setup.out" | head -c 800)"
  cleanup
  exit 1
fi
for seed in "${SEEDS[@]}"; do
  python3 "$PY" stream --count "$PODS" --seed "$seed" > "$D/stream-$seed.json" || { fail "vendor: the stream of seed $seed"; cleanup; exit 1; }
done
info "vendor: $NODES nodes of NVIDIA v0.5 GPU slices with dranet or SR-IOV NIC slices ($(jq -r '.vendor | group_by(.layout) | map("\(length)×\(.[0].layout)") | join(" ")' "$D/nodes.json")), $OWN dgx-h100 nodes of topoalign's driver; seeds ${SEEDS[*]}, $PODS pods each; setup $(since "$T") s"

# pass TAG MODE SCHEDULER SEED [ARGS] : one pass; result in $D/TAG.json
pass_run() {
  local tag=$1 mode=$2 sched=$3 seed=$4 t
  shift 4
  t=$(now)
  if ! python3 "$PY" run --nodes "$D/nodes.json" --stream "$D/stream-$seed.json" --mode "$mode" --scheduler "$sched" \
    --tag "$tag" --ns "$NS" --seed "$seed" --out "$D/$tag.json" --batch "$BATCH" --lifetime "$LIFETIME" "$@" "${API[@]}" \
    > "$D/$tag.out" 2> "$D/$tag.log"; then
    fail "vendor: the $tag pass failed: $(tail -3 "$D/$tag.log" | head -c 800)"
    return 1
  fi
  info "vendor: $tag pass ($sched) took $(since "$t") s"
}

for seed in "${SEEDS[@]}"; do pass_run "stock-$seed" vendor default-scheduler "$seed" || { cleanup; exit 1; }; done

P_EXT=$(free_ports 1)
if ! start_extender extender-vendor "$P_EXT"; then
  fail "vendor: topoalign extender not ready in 30 s (log: $RUN/logs/extender-vendor.log)"
  cleanup
  exit 1
fi
if ! wire_scheduler topoalign-dra-scheduler scheduler-config-dra.yaml "$P_EXT" "$D/scheduler-config.yaml"; then
  fail "vendor: the second kube-scheduler (deploy/extender/scheduler-config-dra.yaml) did not start (log: $RUN/logs/topoalign-dra-scheduler.log)"
  cleanup
  exit 1
fi
last=${SEEDS[${#SEEDS[@]}-1]}
for seed in "${SEEDS[@]}"; do
  extra=()
  [ "$seed" = "$last" ] && extra=(--explain "$D/explain.json")
  pass_run "extender-$seed" vendor topoalign-dra-scheduler "$seed" "${extra[@]}" || { cleanup; exit 1; }
done
for seed in "${SEEDS[@]}"; do pass_run "own-$seed" own topoalign-dra-scheduler "$seed" || { cleanup; exit 1; }; done

M=$D/extender-metrics.txt
curl -s "http://127.0.0.1:$P_EXT/metrics" > "$M"
if grep -q '^topoalign_extender_alignment_pods{gdr="every_gpu"}' "$M" && grep -q '^topoalign_extender_alignment_pairs{class="PIX"}' "$M"; then
  pass "vendor: the extender exports the alignment gauges ($(metric_samples "$M" topoalign_extender_alignment_pods))"
else
  fail "vendor: the extender's /metrics lacks topoalign_extender_alignment_pods / _pairs"
fi
errs=$(http_errors "$M")
nfilter=$(metric_total "$M" topoalign_extender_requests_total 'verb="filter"')
if [ "$nfilter" -gt 0 ] && [ "$errs" = 0 ]; then
  pass "vendor: the scheduler consulted the extender ($nfilter filter calls, no HTTP errors; DRA verdicts $(metric_samples "$M" topoalign_extender_dra_verdicts_total))"
else
  fail "vendor: $nfilter filter calls, $errs HTTP errors (see $RUN/logs/extender-vendor.log)"
fi
stop_component topoalign-dra-scheduler
stop_component extender-vendor
cleanup

if [ -f "$D/explain.json" ] && jq -e '.checked > 0 and .badCount == 0' "$D/explain.json" > /dev/null; then
  pass "vendor: explain --all names exactly the claims' status.allocation of $(jq .checked "$D/explain.json") pods with the classes plan gives; its summary: $(jq -c .summary "$D/explain.json")"
else
  fail "vendor: explain --all disagrees with the claims: $(jq -c '{checked, badCount, bad}' "$D/explain.json" 2> /dev/null | head -c 800)"
fi
list() { local p=$1 s out=(); for s in "${SEEDS[@]}"; do out+=("$D/$p-$s.json"); done; (IFS=,; echo "${out[*]}"); }
python3 "$PY" compare --stock "$(list stock)" --extender "$(list extender)" --own "$(list own)" > "$D/compare.out" || { fail "vendor: comparing the passes"; exit 1; }
report_compare vendor "$D/compare.out"
