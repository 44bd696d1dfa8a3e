#!/usr/bin/env bash
# Scenario cpus (issue 33): CPUs of kubernetes-sigs/dra-driver-cpu aligned with topoalign's
# pairs in one claim (`topoalign claims --cpus`), allocated by the real kube-scheduler.
#
# Nodes: every two-socket profile once per dra-driver-cpu device mode (grouped: one device per
# NUMA node with the consumable capacity dra.cpu/cpu; individual: one device per CPU), each
# with topoalign's slices and dra-driver-cpu's in the format its source publishes (v0.2.0's
# NUMA keys on half the nodes, main's on the others; lib/cpus.py names the commits). A seeded
# stream of pods (1/2/4/8 pairs, 2/4/8 CPUs per GPU, per-GPU and one-node shapes) pinned to
# one mode and key each: every allocated CPU must sit on its GPU's NUMA node (100%). The same
# stream without --cpus, the CPUs then from the kubelet's static CPU manager (which takes no
# hint from DRA devices; modelled, see lib/cpus.py): how many pods it would split, a FIGURE.
#
# Environment: E2E_CPUS_PODS (60 per pass), E2E_CPUS_SEED (7), E2E_CPUS_BATCH (10).
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"

need_topoalign_cmd claims
need_topoalign_cmd driver
D=$SCEN_DIR
NS=cpus
PODS=${E2E_CPUS_PODS:-60}
SEED=${E2E_CPUS_SEED:-7}
BATCH=${E2E_CPUS_BATCH:-10}
API=(--server "https://127.0.0.1:$P_API" --ca "$RUN/pki/ca.crt" --cert "$RUN/pki/admin.crt" --key "$RUN/pki/admin.key")
export TOPOALIGN
make_namespace "$NS"

cleanup() {
  local n
  for n in $(K get nodes -l e2e.topoalign.dev/cpus -o name 2> /dev/null); do
    K delete resourceslices --field-selector "spec.nodeName=${n#node/}" > /dev/null 2>&1
    K delete "$n" > /dev/null 2>&1
  done
}

T=$(now)
if ! python3 "$E2E_DIR/lib/cpus.py" run --ns "$NS" --seed "$SEED" --pods "$PODS" --batch "$BATCH" \
  --out "$D/result.json" "${API[@]}" > "$D/run.out" 2> "$D/run.log"; then
  fail "cpus: the run failed: $(tail -3 "$D/run.log" | head -c 900)"
  cleanup
  exit 1
fi
R=$D/result.json
info "cpus: $(jq -r '.nodes | to_entries | map("\(.key) (\(.value.release))") | join(", ")' "$R")"
a() { jq -r ".aligned.stats.$1 // 0" "$R"; }
b() { jq -r ".blind.stats.$1 // 0" "$R"; }
figure "cpus aligned pass: $(a bound) pods bound, $(a unschedulable) unschedulable, $(a undecided) undecided; $(a pairs) pairs, $(a cpus) CPUs, $(a cpus_aligned) on their GPU's NUMA node; $(a spanning_pods) pods with pairs on two NUMA nodes ($(a seconds) s)"
if [ "$(a bound)" -gt 0 ] && [ "$(a cpus)" -gt 0 ] && [ "$(a cpus)" = "$(a cpus_aligned)" ] && [ "$(jq '.aligned.failures | length' "$R")" = 0 ]; then
  pass "cpus: every allocated CPU sits on its GPU's NUMA node: $(a cpus_aligned)/$(a cpus) (100%) over $(a bound) pods, both device modes, both NUMA keys, $(a spanning_pods) of them split per GPU over two NUMA nodes by the real scheduler"
else
  fail "cpus: $(a cpus_aligned) of $(a cpus) allocated CPUs on their GPU's NUMA node over $(a bound) pods: $(jq -c '.aligned.failures[:3]' "$R" | head -c 900)"
fi
if [ "$(a spanning_pods)" -gt 0 ]; then
  pass "cpus: the per-GPU shape holds on the real scheduler for pods whose pairs span NUMA nodes ($(a spanning_pods) pods)"
else
  fail "cpus: no pod's pairs spanned two NUMA nodes: the per-GPU shape was not exercised"
fi
[ "$(a undecided)" = 0 ] || fail "cpus: $(a undecided) pods neither bound nor Unschedulable within 60 s"
if [ "$(b bound)" -gt 0 ]; then
  split=$(b split_pods)
  pct=$(awk -v s="$split" -v n="$(b bound)" 'BEGIN{printf "%.0f", 100*s/n}')
  figure "cpus blind pass (the same stream without --cpus, the static CPU manager's packed choice): $split of $(b bound) bound pods ($pct%) would get CPUs off their GPUs' NUMA node, $(b cpus_aligned) of $(b cpus) CPUs aligned"
  pass "cpus: the same stream without --cpus measured: $split of $(b bound) pods split by a CPU manager blind to DRA devices"
else
  fail "cpus: the blind pass bound no pod: $(jq -c '.blind' "$R" | head -c 600)"
fi
info "cpus: took $(since "$T") s"
cleanup
