#!/usr/bin/env bash
# Scenario 3: today's claim shapes, for contrast, on the same published devices:
#   independent  N GPUs and N NICs in two requests, no constraint
#   pcieRoot     the same with matchAttribute resource.kubernetes.io/pcieRoot
#   numa         the same with matchAttribute topoalign.dev/numaNode
# For each profile and N in 1, 2, 4, 8: what the stock allocator gives (the best pairing
# of the GPUs and NICs it picked, by published pair class) next to `topoalign plan`'s
# optimum, or why it cannot (the scheduler's message).
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"

need_topoalign_cmd driver
D=$SCEN_DIR
NS=shapes
PROFILES=(${E2E_PROFILES:-mi300x-8 gb300-4 dgx-h100 pcie-2socket})
make_namespace "$NS"

claim() { # NAME N CONSTRAINT-YAML
  cat << EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $1}
spec:
  devices:
    requests:
    - name: gpus
      exactly: {deviceClassName: gpu.$DRIVER_NAME, allocationMode: ExactCount, count: $2}
    - name: nics
      exactly: {deviceClassName: nic.$DRIVER_NAME, allocationMode: ExactCount, count: $2}
$3
EOF
}

declare -A CONSTRAINT=(
  [independent]=""
  [pcieRoot]="    constraints: [{requests: [gpus, nics], matchAttribute: resource.kubernetes.io/pcieRoot}]"
  [numa]="    constraints: [{requests: [gpus, nics], matchAttribute: $DRIVER_NAME/numaNode}]"
)

for p in "${PROFILES[@]}"; do
  node=sh-$p
  make_node "$node" || { fail "shapes: node $node"; continue; }
  "$TOPOALIGN" driver --profile "$p" --node-name "$node" --dry-run -o yaml > "$D/$p.yaml" 2> "$D/$p.err" &&
    K apply --server-side --field-manager=e2e -f "$D/$p.yaml" > /dev/null 2>> "$D/$p.err" ||
    { fail "shapes: publishing $p: $(head -c 800 "$D/$p.err")"; continue; }
  slices_of "$node" > "$D/$node.slices.json"
  ngpu=$("$TOPOALIGN" discover --profile "$p" -o json | jq '.gpus | length')
  for shape in independent pcieRoot numa; do
    row=""
    worse=0
    for n in 1 2 4 8; do
      [ "$n" -le "$ngpu" ] || continue
      name=$(tr '[:upper:]' '[:lower:]' <<< "$shape-$p-$n")
      claim "$name" "$n" "${CONSTRAINT[$shape]}" > "$D/$name.yaml"
      K -n "$NS" apply -f "$D/$name.yaml" > /dev/null 2> "$D/$name.err" || { fail "shapes: claim $name rejected: $(cat "$D/$name.err")"; continue; }
      t=$(now)
      pod_with_claim "$NS" "$name" "$name" "$node"
      want=$("$TOPOALIGN" plan --profile "$p" --gpus "$n" --nics-per-gpu 1 -o json 2> /dev/null | jq -r '[.pairs[].class] | sort_by({"PIX":0,"PXB":1,"PHB":2,"NODE":3,"SYS":4}[.]) | join(" ")')
      wait_pod_decided "$NS" "$name" 15
      if [ -n "$(pod_node "$NS" "$name")" ] || [ "$(pod_scheduled_reason "$NS" "$name")" = Unschedulable ]; then
        ms=$(ms_since "$t")
        if [ -n "$(pod_node "$NS" "$name")" ]; then
          K -n "$NS" get resourceclaim "$name" -o json > "$D/$name.claim.json"
          got=$(python3 "$E2E_DIR/lib/alignment.py" pairing --slices "$D/$node.slices.json" --claim "$D/$name.claim.json")
          [ "$got" = "$want" ] || worse=$((worse + 1))
          row="$row N=$n: [$got] vs optimum [$want];"
          pass "shapes $shape $p N=$n: bound in $ms ms, best pairing of its devices [$got], topoalign plan [$want]"
        else
          row="$row N=$n: unschedulable;"
          pass "shapes $shape $p N=$n: unschedulable after $ms ms: $(pod_scheduled_message "$NS" "$name" | head -c 200) (topoalign plan: [$want])"
        fi
      else
        row="$row N=$n: undecided after 15 s;"
        fail "shapes $shape $p N=$n: neither bound nor unschedulable after 15 s"
      fi
      K -n "$NS" delete pod "$name" --grace-period=0 --force > /dev/null 2>&1
      K -n "$NS" delete resourceclaim "$name" --wait=false > /dev/null 2>&1
      wait_until 30 "claim $name deleted" bash -c "! '$K8S_BIN/kubectl' -n $NS get resourceclaim $name > /dev/null 2>&1"
    done
    figure "shape $shape on $p:$row worse than optimum: $worse"
  done
done
