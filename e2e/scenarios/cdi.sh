#!/usr/bin/env bash
# Scenario cdi (issue 20): devices that work in the container, proven with the library the
# runtimes use.
#
# For an NVIDIA node (dgx-h100) and an AMD node (mi300x-8): `topoalign driver` publishes,
# the real scheduler allocates claims, kubeletdra (the kubelet's own DRA manager, as in the
# kubelet scenario) prepares the pod and reports the CDI ids the kubelet got from
# NodePrepareResources; cdiinject (e2e/cdi, tags.cncf.io/container-device-interface, what
# containerd and CRI-O call) loads the CDI directories (a vendor spec in the format
# `nvidia-ctk cdi generate` / `amd-ctk cdi generate` write, with index order NOT bus order,
# plus what topoalign wrote), resolves exactly those ids and injects them into an OCI spec
# whose image environment says NVIDIA_VISIBLE_DEVICES=all. Checked in that OCI spec: the
# allocated GPUs' nodes and the vendor's mounts and hooks are there, no other GPU's node is,
# the allocated NIC functions' uverbs/umad/rdma_cm are there (the functions the driver
# reserved in its checkpoint), the pairing variables name them, and NVIDIA_VISIBLE_DEVICES
# is void. Cases: pairs, GPUs only, NICs only; a stale vendor spec refused; an NVIDIA node
# without a vendor spec reported once in the log and in /metrics; AMD with and without the
# amd.com/gpu spec.
#
# The library reads each device node's type and numbers from the host's /dev, so
# cdiinject runs in a private mount namespace whose /dev is a tmpfs holding the nodes the
# specs name (unshare -m, as root).
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$E2E_DIR/lib/cluster.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"

need_topoalign_cmd driver
need_topoalign_cmd claims
CDI=${CDI_BIN:-}/cdiinject
[ -x "$CDI" ] || { fail "cdi: $CDI not built (e2e/lib/build.sh builds it into CDI_BIN)"; exit 1; }
if ! unshare -m --propagation private true 2> /dev/null; then
  skip "cdi: 'unshare -m' is refused (uid $(id -u)): cdiinject needs a private /dev with the specs' nodes, which needs root"
  exit 0
fi

NS=cdi
make_namespace "$NS"

# step WORDS... : one kubeletdra step (as in the kubelet scenario).
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
  fail "kubeletdra: no answer to '$*' (log: $RUN/logs/kubeletdra-cdi.log)"
  return 1
}

# session_start NODE PROFILE : node object, DeviceClasses, driver and kubeletdra running.
session_start() {
  NODE=$1 PROFILE=$2 D=$SCEN_DIR/$1
  mkdir -p "$D/registry" "$D/watch" "$D/plugins" "$D/cdi" "$D/etc-cdi" "$D/state" "$D/kubelet-state"
  SPEC_DIRS=(--spec-dir "$D/etc-cdi" --spec-dir "$D/cdi")
  "$TOPOALIGN" discover --profile "$PROFILE" -o json > "$D/topology.json" || { fail "cdi: topoalign discover --profile $PROFILE"; return 1; }
  make_node "$NODE" topoalign.dev/profile="$PROFILE" || { fail "cdi: node $NODE not ready"; return 1; }
  "$TOPOALIGN" driver --profile "$PROFILE" --node-name "$NODE" --dry-run -o yaml > "$D/dry-run.yaml" 2> "$D/dry-run.err" ||
    { fail "cdi: topoalign driver --dry-run: $(head -c 500 "$D/dry-run.err")"; return 1; }
  yaml_to_json "$D/dry-run.yaml" | jq '{apiVersion: "v1", kind: "List", items: [.[] | select(.kind == "DeviceClass")]}' > "$D/classes.json"
  K apply -f "$D/classes.json" > /dev/null || { fail "cdi: applying the DeviceClasses"; return 1; }
  METRICS=127.0.0.1:$(free_ports 1)
  DLOG=$RUN/logs/driver-$NODE.log
  local cmd="'$TOPOALIGN' driver --profile $PROFILE --node-name $NODE --kubeconfig '$KUBECONFIG' \
--plugin-registry-dir '$D/registry' --plugin-dir '$D/plugins' --cdi-dir '$D/cdi' --state-dir '$D/state' \
--cdi-spec-dir '$D/etc-cdi' --cdi-spec-dir '$D/cdi' --metrics-addr $METRICS"
  coproc KD { "$TOOLS_BIN/kubeletdra" --node "$NODE" --driver "$DRIVER_NAME" \
    --plugin-registry-dir "$D/registry" --watch-dir "$D/watch" --state-dir "$D/kubelet-state" \
    --cdi-dir "$D/cdi" --driver-cmd "$cmd" --driver-log "$DLOG" \
    --driver-pid-file "$RUN/pid/driver-$NODE" 2>> "$RUN/logs/kubeletdra-cdi.log"; }
  KD_RUNNING=$KD_PID
  register_pid "kubeletdra-$NODE" "$KD_PID"
  grep -qx "driver-$NODE" "$RUN/pid.order" 2> /dev/null || echo "driver-$NODE" >> "$RUN/pid.order"
  step start && step register || { fail "cdi: driver on $NODE did not register (log: $DLOG)"; return 1; }
  wait_until 30 "slices of $NODE" bash -c "[ \"\$('$K8S_BIN/kubectl' get resourceslices -o json | jq --arg n $NODE '[.items[] | select(.spec.nodeName == \$n)] | length')\" -gt 0 ]" ||
    { fail "cdi: no ResourceSlices for $NODE"; return 1; }
}

session_end() {
  step stop > /dev/null
  exec {KD[1]}>&-
  wait "$KD_RUNNING" 2> /dev/null
  rm -f "$RUN/pid/kubeletdra-$NODE"
}

# claim_for NAME KIND COUNT : a claim (pairs through `topoalign claims`, gpu/nic by class) and
# a pod using it, scheduled onto NODE by the real scheduler.
claim_for() {
  local c=$1 kind=$2 n=$3
  if [ "$kind" = pair ]; then
    "$TOPOALIGN" claims --pairs "$n" --claim --name "$c" -o yaml > "$D/$c.yaml" 2> "$D/$c.err" ||
      { fail "topoalign claims --pairs $n: $(cat "$D/$c.err")"; return 1; }
  else
    cat > "$D/$c.yaml" << EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $c}
spec:
  devices:
    requests:
    - name: devs
      exactly: {deviceClassName: $kind.$DRIVER_NAME, allocationMode: ExactCount, count: $n}
EOF
  fi
  K -n "$NS" apply -f "$D/$c.yaml" > /dev/null || { fail "applying claim $c"; return 1; }
  pod_with_claim "$NS" "pod-$c" "$c" "$NODE"
  wait_pod_bound "$NS" "pod-$c" 30 || { fail "pod-$c not scheduled: $(pod_scheduled_message "$NS" "pod-$c")"; return 1; }
}

drop_claim() {
  step unprepare-pod "$NS/pod-$1" > /dev/null
  K -n "$NS" delete pod "pod-$1" --grace-period=0 --force > /dev/null 2>&1
  K -n "$NS" delete resourceclaim "$1" --wait=false > /dev/null
  wait_until 30 "claim $1 deleted" bash -c "! '$K8S_BIN/kubectl' -n $NS get resourceclaim $1 > /dev/null 2>&1"
}

# prepare_ids CLAIM : prepares pod-CLAIM through the kubelet's DRA manager; IDS = the CDI ids
# the kubelet got for its container.
prepare_ids() {
  local out
  out=$(step prepare-pod "$NS/pod-$1") || { printf '%s\n' "$out"; fail "cdi: prepare of pod-$1"; return 1; }
  printf '%s\n' "$out"
  IDS=$(sed -n 's/^INFO: container c gets CDI devices \[\(.*\)\]$/\1/p' <<< "$out")
  [ -n "$IDS" ] || { fail "cdi: no CDI ids reported for pod-$1"; return 1; }
}

# inject OUT ID... : cdiinject in a private /dev holding every node the specs name.
inject() {
  local out=$1; shift
  local nodes
  nodes=$("$CDI" "${SPEC_DIRS[@]}" --list-nodes 2> "$out.err") || { fail "cdi: cdiinject --list-nodes: $(cat "$out.err")"; return 1; }
  # shellcheck disable=SC2016
  unshare -m --propagation private bash -c '
    set -e
    mount -t tmpfs -o mode=755 tmpfs /dev
    k=0
    while IFS= read -r n; do
      [ -n "$n" ] || continue
      mkdir -p "$(dirname "$n")"
      k=$((k + 1))
      mknod "$n" c 240 "$k"
    done <<< "$1"
    shift
    exec "$@"' _ "$nodes" "$CDI" "${SPEC_DIRS[@]}" --env PATH=/usr/local/nvidia/bin:/usr/bin \
    --env NVIDIA_VISIBLE_DEVICES=all "$@" > "$out" 2> "$out.err" ||
    { fail "cdi: the CDI library refused to inject $*: $(cat "$out.err")"; return 1; }
}

# gpu_nodes BDF / fn_nodes BDF / fn_rdma BDF : from the profile's topology (not from any CDI).
gpu_nodes() {
  jq -r --arg b "$1" '. as $t | .gpus[] | select($t.pci[.pci].bdf == $b) |
    (if .nvidiaMinor != null then "/dev/nvidia\(.nvidiaMinor)" else empty end),
    (if .renderMinor != null then "/dev/dri/renderD\(.renderMinor)" else empty end),
    (if .cardMinor != null then "/dev/dri/card\(.cardMinor)" else empty end),
    (if .vendor == "amd" then "/dev/kfd" else empty end)' "$D/topology.json"
}
fn_nodes() {
  jq -r --arg b "$1" '. as $t | .nics[] | select($t.pci[.pci].bdf == $b) |
    "/dev/infiniband/\(.uverbs)", (.ports[] | "/dev/infiniband/\(.umad)"), "/dev/infiniband/rdma_cm"' "$D/topology.json"
}
fn_rdma() { jq -r --arg b "$1" '. as $t | .nics[] | select($t.pci[.pci].bdf == $b) | .rdma' "$D/topology.json"; }
all_gpu_nodes() {
  jq -r '.gpus[] | (if .nvidiaMinor != null then "/dev/nvidia\(.nvidiaMinor)" else empty end),
    (if .renderMinor != null then "/dev/dri/renderD\(.renderMinor)" else empty end),
    (if .cardMinor != null then "/dev/dri/card\(.cardMinor)" else empty end)' "$D/topology.json"
}

# check_case CLAIM VENDOR_KIND : the OCI spec cdiinject made from the kubelet's ids for
# CLAIM holds exactly the claim's GPUs and NIC functions, the vendor's edits, the pairing
# variables, NVIDIA_VISIBLE_DEVICES=void on NVIDIA.
check_case() {
  local c=$1 vendor=$2 what=$3
  local uid; uid=$(K -n "$NS" get resourceclaim "$c" -o jsonpath='{.metadata.uid}')
  prepare_ids "$c" || return 1
  local oci=$D/$c.oci.json
  # shellcheck disable=SC2086
  inject "$oci" $IDS || return 1
  local gpus fns errs=()
  gpus=$(jq -r --arg u "$uid" '.claims[$u].devices[] | .gpu // empty' "$D/state/checkpoint.json")
  fns=$(jq -r --arg u "$uid" '.claims[$u].devices[] | .nicFunction // empty' "$D/state/checkpoint.json")
  local devs env mounts hooks
  devs=$(jq -r '.linux.devices[]?.path' "$oci")
  env=$(jq -r '.process.env[]' "$oci")
  mounts=$(jq -r '.mounts[]?.destination' "$oci")
  hooks=$(jq -r '.hooks.createContainer[]?.args | join(" ")' "$oci")
  local want=() g f n
  for g in $gpus; do
    mapfile -t -O "${#want[@]}" want < <(gpu_nodes "$g")
    if [ -n "$vendor" ] && ! grep -q "^$vendor=" <<< "$(tr ' ' '\n' <<< "$IDS")"; then errs+=("no $vendor id among $IDS"); fi
  done
  local ngpu; ngpu=$(wc -w <<< "$gpus")
  if [ -n "$vendor" ]; then
    local nv; nv=$(tr ' ' '\n' <<< "$IDS" | grep -c "^$vendor=")
    [ "$nv" = "$ngpu" ] || errs+=("$nv $vendor ids for $ngpu GPUs: $IDS")
  fi
  for f in $fns; do mapfile -t -O "${#want[@]}" want < <(fn_nodes "$f"); done
  for n in "${want[@]}"; do grep -qx "$n" <<< "$devs" || errs+=("missing $n"); done
  # No other GPU's node, no other NIC function's node.
  for n in $(all_gpu_nodes); do
    printf '%s\n' "${want[@]}" | grep -qx "$n" || ! grep -qx "$n" <<< "$devs" || errs+=("another GPU's $n is in the container")
  done
  for n in $(grep '^/dev/infiniband/\(uverbs\|umad\)' <<< "$devs"); do
    printf '%s\n' "${want[@]}" | grep -qx "$n" || errs+=("another NIC function's $n is in the container")
  done
  if [ "$vendor" = nvidia.com/gpu ] && [ "$ngpu" -gt 0 ]; then
    grep -qx /dev/nvidiactl <<< "$devs" || errs+=("no /dev/nvidiactl from the vendor spec")
    grep -qx "$LIBCUDA" <<< "$mounts" || errs+=("no $LIBCUDA mount from the vendor spec")
    grep -q 'nvidia-cdi-hook update-ldcache' <<< "$hooks" || errs+=("no update-ldcache hook from the vendor spec")
  fi
  # The library appends CDI env after the image's (runtime-tools keys its cache by the
  # whole NAME=value, so the image's entry stays); the NVIDIA hook reads the env into a
  # map, so the last entry is what it sees: it must be void (the fixture sets none).
  if [ "$PROFILE" = dgx-h100 ]; then
    local nvd; nvd=$(grep '^NVIDIA_VISIBLE_DEVICES=' <<< "$env" | tail -1)
    [ "$nvd" = NVIDIA_VISIBLE_DEVICES=void ] || errs+=("the last NVIDIA_VISIBLE_DEVICES is '$nvd', not void")
  fi
  local hca map; hca=$(sed -n 's/^NCCL_IB_HCA=//p' <<< "$env"); map=$(sed -n 's/^TOPOALIGN_GPU_NIC_MAP=//p' <<< "$env")
  for f in $fns; do
    local r; r=$(fn_rdma "$f")
    grep -q "[=,]$r:" <<< "$hca" || errs+=("NCCL_IB_HCA=$hca does not name $r")
  done
  [ -n "$fns" ] || [ -z "$hca" ] || errs+=("NCCL_IB_HCA=$hca without NICs")
  # pairs: each GPU mapped to its own function's RDMA device
  jq -r --arg u "$uid" '.claims[$u].devices[] | select(.gpu and .nicFunction) | "\(.gpu) \(.nicFunction)"' "$D/state/checkpoint.json" |
    while read -r g f; do
      grep -q "$g=$(fn_rdma "$f")" <<< "$map" || echo "TOPOALIGN_GPU_NIC_MAP=$map does not map $g to $(fn_rdma "$f")"
    done > "$D/$c.maperr"
  [ -s "$D/$c.maperr" ] && errs+=("$(cat "$D/$c.maperr")")
  if [ ${#errs[@]} -eq 0 ]; then
    pass "cdi $NODE $what: the CDI library injected exactly $ngpu GPU(s) and $(wc -w <<< "$fns") NIC function(s) from ids [$IDS] (${#want[@]} nodes$([ -n "$vendor" ] && [ "$ngpu" -gt 0 ] && echo ", the vendor's mounts and hooks"))"
  else
    fail "cdi $NODE $what: $(printf '%s; ' "${errs[@]}") (OCI spec: $oci)"
  fi
}

metric() { curl -fsS "http://$METRICS/metrics" 2> /dev/null | sed -n "s/^$1 //p"; }

# ------------------------------------------------------------------ NVIDIA (dgx-h100)
LIBCUDA=/usr/lib/x86_64-linux-gnu/libcuda.so.570.86.15
# nvidia_spec FILE STRATEGY [MINOR->NODE override] : the nvidia-ctk shape; index i is the GPU
# with minor SHUF[i] (not bus order). STRATEGY: both (default of nvidia-ctk) or index.
SHUF=(5 2 7 0 3 6 1 4)
nvidia_spec() {
  local file=$1 strategy=$2 gone=${3:-}
  {
    echo "---"
    echo "cdiVersion: 0.5.0"
    echo "kind: nvidia.com/gpu"
    echo "devices:"
    local i m uuid node
    for i in "${!SHUF[@]}"; do
      m=${SHUF[$i]}
      uuid=$(jq -r --argjson m "$m" '.gpus[] | select(.nvidiaMinor == $m) | .uuid' "$D/topology.json")
      node=/dev/nvidia$m
      [ -n "$gone" ] && [ "$i" = 0 ] && node=$gone
      printf '    - name: "%s"\n      containerEdits:\n        deviceNodes:\n            - path: %s\n              hostPath: %s\n' "$i" "$node" "$node"
      [ "$strategy" = both ] && printf '    - name: %s\n      containerEdits:\n        deviceNodes:\n            - path: %s\n              hostPath: %s\n' "$uuid" "$node" "$node"
    done
    echo "    - name: all"
    echo "      containerEdits:"
    echo "        deviceNodes:"
    for m in "${SHUF[@]}"; do printf '            - path: /dev/nvidia%s\n              hostPath: /dev/nvidia%s\n' "$m" "$m"; done
    cat << EOF
containerEdits:
    env:
        - NVIDIA_CTK_LIBCUDA_DIR=/usr/lib/x86_64-linux-gnu
    deviceNodes:
        - path: /dev/nvidiactl
          hostPath: /dev/nvidiactl
        - path: /dev/nvidia-uvm
          hostPath: /dev/nvidia-uvm
    hooks:
        - hookName: createContainer
          path: /usr/bin/nvidia-cdi-hook
          args:
            - nvidia-cdi-hook
            - create-symlinks
            - --link
            - libcuda.so.1::/usr/lib/x86_64-linux-gnu/libcuda.so
        - hookName: createContainer
          path: /usr/bin/nvidia-cdi-hook
          args:
            - nvidia-cdi-hook
            - update-ldcache
            - --folder
            - /usr/lib/x86_64-linux-gnu
    mounts:
        - hostPath: $LIBCUDA
          containerPath: $LIBCUDA
          options:
            - ro
            - nosuid
            - nodev
            - rbind
            - rprivate
EOF
  } > "$file"
}

if session_start cdi-dgx dgx-h100; then
  # No vendor spec yet: said once, with the command, and in /metrics.
  n=$(grep -c 'no nvidia.com/gpu CDI spec' "$DLOG")
  if [ "$n" = 1 ] && grep -q 'nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml' "$DLOG" && [ "$(metric topoalign_plugin_nvidia_cdi_spec_missing)" = 1 ]; then
    pass "cdi: an NVIDIA node without the toolkit's CDI spec is reported once in the log with the command, and topoalign_plugin_nvidia_cdi_spec_missing is 1"
  else
    fail "cdi: missing NVIDIA CDI spec: $n warnings, gauge '$(metric topoalign_plugin_nvidia_cdi_spec_missing)' (log: $DLOG)"
  fi
  nvidia_spec "$D/cdi/nvidia.yaml" both
  if claim_for pairs2 pair 2; then
    check_case pairs2 nvidia.com/gpu "2 pairs, vendor spec with index order != bus order"
    [ "$(metric topoalign_plugin_nvidia_cdi_spec_missing)" = 0 ] && pass "cdi: the gauge clears once the spec is there" || fail "cdi: gauge still '$(metric topoalign_plugin_nvidia_cdi_spec_missing)' with the spec present"
    drop_claim pairs2
  fi
  if claim_for gpus2 gpu 2; then
    # A stale spec (index 0 names a GPU that is gone): the kubelet gets a clear error.
    nvidia_spec "$D/cdi/nvidia.yaml" both /dev/nvidia9
    if out=$(step prepare "$NS/gpus2" refused) && grep -q 'nvidia.yaml.*device "0".*/dev/nvidia9.*stale' <<< "$out" && [ ! -e "$D/cdi/topoalign.dev-claim_$(K -n "$NS" get resourceclaim gpus2 -o jsonpath='{.metadata.uid}').json" ]; then
      pass "cdi: a stale vendor spec fails the claim naming the file and device, nothing written"
    else
      fail "cdi: stale vendor spec: $out"
    fi
    # Index names only (nvidia-ctk --device-name-strategy=index): found by node, not index.
    nvidia_spec "$D/cdi/nvidia.yaml" index
    check_case gpus2 nvidia.com/gpu "2 GPUs only, index-named vendor devices"
    drop_claim gpus2
  fi
  nvidia_spec "$D/cdi/nvidia.yaml" both
  if claim_for nics2 nic 2; then
    check_case nics2 "" "2 NICs only"
    drop_claim nics2
  fi
  session_end
fi

# ------------------------------------------------------------------ AMD (mi300x-8)
amd_spec() { # FILE : the amd-ctk shape (JSON, full node info), GPUs in reverse bus order
  jq '. as $t | {cdiVersion: "0.6.0", kind: "amd.com/gpu", devices: ([.gpus | reverse | to_entries[] | {name: "\(.key)", containerEdits: {deviceNodes: [
      {path: "/dev/dri/card\(.value.cardMinor)", type: "c", major: 226, minor: .value.cardMinor},
      {path: "/dev/dri/renderD\(.value.renderMinor)", type: "c", major: 226, minor: .value.renderMinor},
      {path: "/dev/kfd", type: "c", major: 235, minor: 0}]}}])}' "$D/topology.json" > "$1"
}
if session_start cdi-mi300x mi300x-8; then
  if claim_for rocm2 pair 2; then
    check_case rocm2 "" "2 pairs without the amd.com/gpu spec (ROCm nodes)"
    drop_claim rocm2
  fi
  amd_spec "$D/etc-cdi/amd.json"
  if claim_for amdpairs2 pair 2; then
    check_case amdpairs2 amd.com/gpu "2 pairs with the amd.com/gpu spec (reverse order)"
    drop_claim amdpairs2
  fi
  if claim_for amdgpus2 gpu 2; then
    check_case amdgpus2 amd.com/gpu "2 GPUs only with the amd.com/gpu spec"
    drop_claim amdgpus2
  fi
  if claim_for amdnics2 nic 2; then
    check_case amdnics2 "" "2 NICs only"
    drop_claim amdnics2
  fi
  session_end
fi
