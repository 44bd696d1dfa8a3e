#!/usr/bin/env bash
# Scenario explain (issue 20, day two): `topoalign explain pod NS/NAME` against the real
# control plane. On a dgx-h100 node publishing the driver's ResourceSlices, kube-scheduler
# allocates (1) a 1-pair claim from `topoalign claims` and (2) a claim whose selector asks
# for a NODE-class pair; for each bound pod the command must name exactly the devices of
# the claim's status.allocation, replay the stock allocator to the same devices, call the
# first as good as the best free choice and the second worse, naming a closer free NIC.
# Then the refusals: a pod not found, a pod not scheduled, a bad argument, an unreachable
# server; and a pod without claims (device plugins).
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"

need_topoalign_cmd driver
need_topoalign_cmd claims
need_topoalign_cmd explain pod
D=$SCEN_DIR
NS=explain
NODE=explain-dgx
make_namespace "$NS"

make_node "$NODE" || { fail "explain: node $NODE"; exit 1; }
"$TOPOALIGN" driver --profile dgx-h100 --node-name "$NODE" --dry-run -o yaml > "$D/node.yaml" 2> "$D/node.err" &&
  K apply --server-side --field-manager=e2e -f "$D/node.yaml" > /dev/null 2> "$D/node.apply.err" ||
  { fail "explain: publishing dgx-h100 for $NODE: $(head -c 800 "$D/node.err" "$D/node.apply.err")"; exit 1; }

# explain POD : runs the command; sets RC, output in $D/POD.json and $D/POD.err
explain() {
  RC=0
  "$TOPOALIGN" explain pod "$NS/$1" --kubeconfig "$KUBECONFIG" -o json > "$D/$1.json" 2> "$D/$1.err" || RC=$?
}

# check_devices POD : the devices the command names are exactly the claim's allocation
check_devices() {
  local want got
  want=$(claim_devices "$NS" "$1" | sort | tr '\n' ' ')
  got=$(jq -r '[.claims[].devices[].device] | sort | join(" ")' "$D/$1.json" 2> /dev/null)
  if [ -n "$want" ] && [ "$got " = "$want" ]; then
    pass "explain $1: names the claim's allocated devices ($want)"
  else
    fail "explain $1: names [$got], the claim's status.allocation holds [$want] (rc $RC: $(head -c 400 "$D/$1.err"))"
  fi
}

# 1. the stock allocator on topoalign's best-first pairs: as good as the best free choice
"$TOPOALIGN" claims --pairs 1 --claim --name best -o yaml > "$D/best.yaml" 2> "$D/best.claims.err" &&
  K -n "$NS" apply -f "$D/best.yaml" > /dev/null || { fail "explain: claim best: $(cat "$D/best.claims.err")"; exit 1; }
pod_with_claim "$NS" best best "$NODE"
if wait_pod_bound "$NS" best 30; then
  explain best
  check_devices best
  if [ "$RC" = 0 ] && jq -e '.asGood and .claims[0].firstFit == true and (.pairs.pairs | length) == 1 and .pairs.pairs[0].class != null' "$D/best.json" > /dev/null; then
    pass "explain best: exit 0, the replayed first fit equals kube-scheduler's allocation, pair $(jq -r '.pairs.pairs[0] | "\(.gpu)+\(.nicName) \(.class)"' "$D/best.json") as good as the best free choice"
  else
    fail "explain best: rc $RC, $(jq -c '{asGood, firstFit: .claims[0].firstFit, pairs: .pairs.pairs, reasons}' "$D/best.json" 2> /dev/null | head -c 600) $(head -c 300 "$D/best.err")"
  fi
else
  fail "explain: pod best not scheduled ($(pod_scheduled_message "$NS" best))"
fi

# 2. a claim that asks for a NODE-class pair (rank 3): worse than a free PIX pair
K -n "$NS" apply -f - > /dev/null << EOF || fail "explain: claim node-class"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: node-class}
spec:
  devices:
    requests:
    - name: pairs
      exactly:
        deviceClassName: gpu-nic-pair.topoalign.dev
        selectors: [{cel: {expression: 'device.attributes["topoalign.dev"]["rank"] == 3'}}]
EOF
pod_with_claim "$NS" node-class node-class "$NODE"
if wait_pod_bound "$NS" node-class 30; then
  explain node-class
  check_devices node-class
  "$TOPOALIGN" explain pod "$NS/node-class" --kubeconfig "$KUBECONFIG" > "$D/node-class.txt" 2>&1
  if grep -q "^verdict: WORSE than the best free choice" "$D/node-class.txt" && grep -q "although" "$D/node-class.txt"; then
    pass "explain node-class -o table: says WORSE and why"
  else
    fail "explain node-class -o table: $(head -c 800 "$D/node-class.txt")"
  fi
  if [ "$RC" = 1 ] && jq -e '(.asGood | not) and .claims[0].firstFit == true and .pairs.worst == "NODE" and .best.worst == "PIX" and any(.reasons[]; test("got NIC .* \\(NODE\\) although .* \\(PIX\\) was free"))' "$D/node-class.json" > /dev/null; then
    pass "explain node-class: exit 1, worse than the best free choice: $(jq -r '[.reasons[] | select(test("although"))][0]' "$D/node-class.json")"
  else
    fail "explain node-class: rc $RC, $(jq -c '{asGood, firstFit: .claims[0].firstFit, worst: .pairs.worst, best: .best.worst, reasons}' "$D/node-class.json" 2> /dev/null | head -c 800) $(head -c 300 "$D/node-class.err")"
  fi
else
  fail "explain: pod node-class not scheduled ($(pod_scheduled_message "$NS" node-class))"
fi

# 3. a pod without claims, bound by hand: device plugins
K -n "$NS" apply -f - > /dev/null << EOF || fail "explain: pod dp"
apiVersion: v1
kind: Pod
metadata: {name: dp}
spec:
  nodeName: $NODE
  containers:
  - {name: c, image: registry.k8s.io/pause:3.10, resources: {limits: {nvidia.com/gpu: "2"}}}
EOF
explain dp
if [ "$RC" = 0 ] && jq -e '.source == "device-plugin" and .devicePlugin.resources.c["nvidia.com/gpu"] == "2"' "$D/dp.json" > /dev/null; then
  pass "explain dp: a device-plugin pod is reported as such, with its nvidia.com/gpu: 2"
else
  fail "explain dp: rc $RC, $(head -c 400 "$D/dp.json") $(head -c 300 "$D/dp.err")"
fi

# 4. refusals: one clear line each, exit 2
K -n "$NS" apply -f - > /dev/null << EOF || fail "explain: pod waiting"
apiVersion: v1
kind: Pod
metadata: {name: waiting}
spec:
  nodeSelector: {kubernetes.io/hostname: no-such-node}
  containers: [{name: c, image: registry.k8s.io/pause:3.10}]
EOF
refused() { # NAME EXPECTED-TEXT ARGS...
  local name=$1 want=$2; shift 2
  local rc=0
  "$TOPOALIGN" explain pod "$@" > "$D/$name.out" 2> "$D/$name.err" || rc=$?
  if [ "$rc" = 2 ] && grep -q -- "$want" "$D/$name.err"; then
    pass "explain refuses $name: $(grep '^error:' "$D/$name.err" | head -c 300)"
  else
    fail "explain $name: rc $rc (expected 2), stderr: $(head -c 400 "$D/$name.err")"
  fi
}
refused not-found "pod $NS/nope not found" "$NS/nope" --kubeconfig "$KUBECONFIG"
refused not-scheduled "pod $NS/waiting is not scheduled yet" "$NS/waiting" --kubeconfig "$KUBECONFIG"
refused bad-argument "expected NAMESPACE/NAME" "just-a-name" --kubeconfig "$KUBECONFIG"
sed -E 's#(server: "?)https://127\.0\.0\.1:[0-9]+#\1https://127.0.0.1:1#' "$KUBECONFIG" > "$D/dead.kubeconfig"
refused unreachable "cannot reach the API server at https://127.0.0.1:1" "$NS/best" --kubeconfig "$D/dead.kubeconfig"

K delete namespace "$NS" --wait=false > /dev/null 2>&1 || true
K delete node "$NODE" > /dev/null 2>&1 || true
