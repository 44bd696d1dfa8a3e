# shellcheck shell=bash
# kubectl helpers for scenarios (needs cluster.env sourced: KUBECONFIG).

DRIVER_NAME=topoalign.dev

K() { "$K8S_BIN/kubectl" "$@"; }

# make_node NAME [LABEL=VALUE...] : a Ready Node without the not-ready taint (no kubelet runs).
make_node() {
  local name=$1; shift
  local labels="kubernetes.io/hostname: $name, kubernetes.io/os: linux" l
  for l in "$@"; do labels="$labels, ${l%%=*}: \"${l#*=}\""; done
  local ts; ts=$(date -u +%FT%TZ)
  K apply -f - > /dev/null << EOF || return 1
apiVersion: v1
kind: Node
metadata:
  name: $name
  labels: {$labels}
status:
  capacity: {pods: "110", cpu: "64", memory: 512Gi}
  allocatable: {pods: "110", cpu: "64", memory: 512Gi}
  conditions:
  - {type: Ready, status: "True", reason: KubeletReady, message: "e2e node (no kubelet)", lastHeartbeatTime: "$ts", lastTransitionTime: "$ts"}
EOF
  # The TaintNodesByCondition admission plugin adds node.kubernetes.io/not-ready on create;
  # a kubelet would clear it. No node-lifecycle controller runs, so removing it once is enough.
  K taint node "$name" node.kubernetes.io/not-ready:NoSchedule- > /dev/null 2>&1 || true
  [ -z "$(K get node "$name" -o jsonpath='{.spec.taints}')" ]
}

# make_namespace NAME
make_namespace() {
  K create namespace "$1" > /dev/null 2>&1 || true
  K -n "$1" create serviceaccount default > /dev/null 2>&1 || true
}

# yaml_to_json FILE : the objects of a YAML stream as one JSON array (via kubectl, client side).
yaml_to_json() {
  K create --dry-run=client -o json -f "$1" | jq -s 'map(if .kind == "List" then .items[] else . end)'
}

# pod_with_claim NS POD CLAIM NODE : a pod using an existing ResourceClaim, pinned to NODE by label.
pod_with_claim() {
  K apply -f - > /dev/null << EOF
apiVersion: v1
kind: Pod
metadata: {name: $2, namespace: $1}
spec:
  nodeSelector: {kubernetes.io/hostname: $4}
  resourceClaims: [{name: devs, resourceClaimName: $3}]
  containers:
  - name: c
    image: registry.k8s.io/pause:3.10
    resources: {claims: [{name: devs}]}
EOF
}

pod_node() { K -n "$1" get pod "$2" -o jsonpath='{.spec.nodeName}' 2> /dev/null; }
pod_scheduled_reason() { K -n "$1" get pod "$2" -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}' 2> /dev/null; }
pod_scheduled_message() { K -n "$1" get pod "$2" -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}' 2> /dev/null; }

# wait_pod_bound NS POD TIMEOUT : true when the pod got a node
wait_pod_bound() {
  wait_until "$3" "pod $1/$2 bound" bash -c "[ -n \"\$('$K8S_BIN/kubectl' -n $1 get pod $2 -o jsonpath='{.spec.nodeName}')\" ]"
}

# wait_pod_unschedulable NS POD TIMEOUT
wait_pod_unschedulable() {
  wait_until "$3" "pod $1/$2 unschedulable" bash -c "[ \"\$('$K8S_BIN/kubectl' -n $1 get pod $2 -o jsonpath='{.status.conditions[?(@.type==\"PodScheduled\")].reason}')\" = Unschedulable ]"
}

# wait_pod_decided NS POD TIMEOUT : until the pod is bound or Unschedulable; true when bound
wait_pod_decided() {
  wait_until "$3" "pod $1/$2 bound or unschedulable" bash -c "[ -n \"\$('$K8S_BIN/kubectl' -n $1 get pod $2 -o jsonpath='{.spec.nodeName}')\" ] || [ \"\$('$K8S_BIN/kubectl' -n $1 get pod $2 -o jsonpath='{.status.conditions[?(@.type==\"PodScheduled\")].reason}')\" = Unschedulable ]"
  [ -n "$(pod_node "$1" "$2")" ]
}

# release_claims NS NAME... : deletes the pods and claims of these names (pods forced) and
# waits until each claim is gone, so its devices are free for the next step
release_claims() {
  local ns=$1 c
  shift
  for c in "$@"; do
    K -n "$ns" delete pod "$c" --grace-period=0 --force > /dev/null 2>&1
    K -n "$ns" delete resourceclaim "$c" --wait=false > /dev/null 2>&1
  done
  for c in "$@"; do
    wait_until 30 "claim $c deleted" bash -c "! '$K8S_BIN/kubectl' -n $ns get resourceclaim $c > /dev/null 2>&1"
  done
}

# claim_devices NS CLAIM : allocated device names of the claim, one per line
claim_devices() {
  K -n "$1" get resourceclaim "$2" -o json | jq -r '.status.allocation.devices.results[]?.device'
}

# slices_of NODE : the ResourceSlices of NODE as a JSON array
slices_of() {
  K get resourceslices -o json | jq --arg n "$1" '[.items[] | select(.spec.nodeName == $n)]'
}
