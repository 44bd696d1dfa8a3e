#!/usr/bin/env bash
# Scenario podresources: `topoalign agent` against the kubelet's own pod-resources server.
#
# The stand-in e2e/go/cmd/podresources serves k8s.io/kubernetes/pkg/kubelet/apis/podresources
# (NewV1PodResourcesServer, set up as the kubelet sets it up) on a unix socket, its
# providers fed fixed allocations (lib/podresources.py alloc: devices with NUMA topology,
# exclusive CPUs, memory; GPUs by PCI address on AMD, by UUID on NVIDIA). For mi300x-8
# (GPUs + SR-IOV VFs) and dgx-h100 (GPU UUIDs + RDMA PFs):
#   1. `topoalign agent --once` reports exactly the complement of the allocations;
#   2. the agent running against the API server publishes a NodeResourceTopology object
#      (CRD from deploy/extender/helm) whose NUMA zones and annotations equal that
#      complement, and the node labels;
#   2b. the node's domain labels written only where the level is free; rails in the NRT;
#   3. a pod leaves (the server restarts with new allocations): the agent reconnects and
#      the published object follows.
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"
. "$E2E_DIR/lib/cluster.sh"

need_topoalign_cmd agent
D=$SCEN_DIR
PY=$E2E_DIR/lib/podresources.py
PR_BIN=$TOOLS_BIN/podresources
[ -x "$PR_BIN" ] || { fail "podresources: stand-in $PR_BIN missing (build.sh builds e2e/go/cmd/...)"; exit 1; }

# The NodeResourceTopology CRD the agent writes (the Helm template without its condition).
grep -v '^{{' "$REPO_DIR/deploy/extender/helm/topoalign-extender/templates/nrt-crd.yaml" > "$D/nrt-crd.yaml"
if K apply -f "$D/nrt-crd.yaml" > "$D/crd.out" 2>&1 &&
  K wait --for condition=established --timeout=30s crd/noderesourcetopologies.topology.node.k8s.io > /dev/null 2>&1; then
  pass "podresources: NodeResourceTopology CRD established"
else
  fail "podresources: NodeResourceTopology CRD not established: $(head -c 500 "$D/crd.out")"
  exit 1
fi

# start_server NAME ALLOC SOCKET : the stand-in, registered by PID; waits for its socket.
start_server() {
  rm -f "$3"
  "$PR_BIN" --socket "$3" --allocations "$2" >> "$RUN/logs/$1.log" 2>&1 &
  register_pid "$1" $!
  wait_until 20 "$1 socket" test -S "$3"
}

# published_nrt NODE OUT : the node's NRT object as JSON
published_nrt() { K get noderesourcetopologies.topology.node.k8s.io "$1" -o json > "$2" 2> /dev/null; }

for p in mi300x-8 dgx-h100; do
  node=pr-$p
  sock=$D/$p/kubelet.sock
  mkdir -p "$D/$p"
  "$TOPOALIGN" discover --profile "$p" -o json > "$D/$p.discover.json" || { fail "podresources: topoalign discover --profile $p"; continue; }
  python3 "$PY" alloc --discover "$D/$p.discover.json" --seed 11 > "$D/$p.alloc.json" &&
    python3 "$PY" expect --discover "$D/$p.discover.json" --alloc "$D/$p.alloc.json" > "$D/$p.expect.json" &&
    python3 "$PY" alloc --discover "$D/$p.discover.json" --seed 11 --drop small > "$D/$p.alloc2.json" &&
    python3 "$PY" expect --discover "$D/$p.discover.json" --alloc "$D/$p.alloc2.json" > "$D/$p.expect2.json" ||
    { fail "podresources: building fixed allocations for $p"; continue; }
  if ! start_server "podresources-$p" "$D/$p.alloc.json" "$sock"; then
    fail "podresources: the stand-in did not serve $sock (log: $RUN/logs/podresources-$p.log)"
    continue
  fi

  # 1. one read
  t=$(now)
  if "$TOPOALIGN" agent --once --profile "$p" --node "$node" --socket "$sock" -o json > "$D/$p.once.json" 2> "$D/$p.once.err"; then
    ms=$(ms_since "$t")
    if out=$(python3 "$PY" check-once --expect "$D/$p.expect.json" --once "$D/$p.once.json"); then
      pass "podresources $p: agent --once through the kubelet's pod-resources server (${ms} ms): $out"
    else
      fail "podresources $p: agent --once differs from the fixed allocations: $out"
    fi
  else
    fail "podresources $p: topoalign agent --once: $(head -c 600 "$D/$p.once.err")"
  fi

  # 2. the agent publishing to the API server, with the node's fabric facts: a saved
  #    `nvidia-smi -q` naming one NVLink clique, an operator domain file (leaf), and the
  #    rails of deploy/gang/rails.yaml. dgx-h100's node already carries Topograph's
  #    NVLink-domain label (written by kubectl, another field manager): the clique must
  #    not be written there, the leaf must; mi300x-8's node gets both, its leaf read off
  #    the wiring (a saved `lldpctl -f json`: one leaf per rail, the scalable unit), which
  #    wins over the file's, and its rails by switch name (deploy/gang/rails-switch.yaml).
  make_node "$node" || { fail "podresources: node $node"; continue; }
  [ "$p" = dgx-h100 ] && K label node "$node" accelerator.topograph.run/domain=rack-a > /dev/null
  printf 'Attached GPUs : 1\nGPU 00000000:1B:00.0\n    Fabric\n        State : Completed\n        CliqueId : 4\n        ClusterUUID : e2e-cluster\n' > "$D/$p.query.txt"
  printf 'nodes:\n  %s: {fabric.topograph.run/tier-0: leaf-7}\n' "$node" > "$D/$p.domains.yaml"
  if [ "$p" = mi300x-8 ]; then
    wiring=(--lldp-from "$REPO_DIR/deploy/gang/lldp-mi300x.json")
    railfile=$REPO_DIR/deploy/gang/rails-switch.yaml
    want_leaf=$("$TOPOALIGN" rails --profile "$p" "${wiring[@]}" --rails "$railfile" -o json | jq -r '.leaf.value // ""')
    leaf_src="read off the NICs' LLDP neighbours (over the domain file's leaf-7), rails by switch name"
  else
    wiring=()
    railfile=$REPO_DIR/deploy/gang/rails.yaml
    want_leaf=leaf-7
    leaf_src="from the domain file"
  fi
  mport=$(free_ports 1)
  "$TOPOALIGN" agent --profile "$p" --node "$node" --socket "$sock" --kubeconfig "$KUBECONFIG" \
    --policy restricted --interval 1 --heartbeat 5 --label-hold 0 --metrics-addr "127.0.0.1:$mport" \
    --fabric-from "$D/$p.query.txt" --domains "$D/$p.domains.yaml" --rails "$railfile" "${wiring[@]}" > "$RUN/logs/agent-$p.log" 2>&1 &
  register_pid "agent-$p" $!
  t=$(now)
  if wait_until 30 "NRT $node" published_nrt "$node" "$D/$p.nrt.json"; then
    published_nrt "$node" "$D/$p.nrt.json"
    figure "podresources $p: the agent's NodeResourceTopology object published $(since "$t") s after start"
    if out=$(python3 "$PY" check-nrt --expect "$D/$p.expect.json" --nrt "$D/$p.nrt.json"); then
      pass "podresources $p: NodeResourceTopology $node: $out"
    else
      fail "podresources $p: NodeResourceTopology $node differs: $out"
    fi
    agent_ready() { [ "$(curl -s --max-time 2 "http://127.0.0.1:$mport/readyz")" = ok ]; }
    if wait_until 10 "agent /readyz" agent_ready &&
      curl -s --max-time 2 "http://127.0.0.1:$mport/metrics" > "$D/$p.metrics.txt" &&
      grep -q '^topoalign_agent_writes_total{object="nrt",outcome="ok"} [1-9]' "$D/$p.metrics.txt" &&
      grep -q '^topoalign_agent_devices_in_use{kind="gpu"} 3$' "$D/$p.metrics.txt"; then
      pass "podresources $p: the agent's /readyz is ok and /metrics counts its NRT writes and the 3 GPUs in use"
    else
      fail "podresources $p: agent /readyz or /metrics wrong: $(curl -s --max-time 2 "http://127.0.0.1:$mport/readyz"; head -c 600 "$D/$p.metrics.txt" 2> /dev/null)"
    fi
    pol=$(jq -r '[.attributes[]? | select(.name == "topologyManagerPolicy") | .value][0] // ""' "$D/$p.nrt.json")
    [ "$pol" = restricted ] && pass "podresources $p: NRT attribute topologyManagerPolicy=restricted" ||
      fail "podresources $p: NRT attribute topologyManagerPolicy is '$pol', expected restricted"
  else
    fail "podresources $p: no NodeResourceTopology $node within 30 s (log: $RUN/logs/agent-$p.log)"
  fi
  want_best=$(jq -r '.labels["topoalign.dev/best-pair-class"]' "$D/$p.once.json")
  want_fab=$(jq -r '.labels["topoalign.dev/gpu-fabric"]' "$D/$p.once.json")
  labels_ok() {
    [ "$(K get node "$node" -o jsonpath='{.metadata.labels.topoalign\.dev/best-pair-class}')" = "$want_best" ] &&
      [ "$(K get node "$node" -o jsonpath='{.metadata.labels.topoalign\.dev/gpu-fabric}')" = "$want_fab" ]
  }
  if wait_until 20 "labels on $node" labels_ok; then
    pass "podresources $p: node labels best-pair-class=$want_best gpu-fabric=$want_fab"
  else
    fail "podresources $p: node $node labels $(K get node "$node" -o json | jq -c '.metadata.labels'), expected best-pair-class=$want_best gpu-fabric=$want_fab"
  fi

  # the domain labels, only where the level is free, and the rails in the NRT object
  node_label() { K get node "$node" -o json | jq -r --arg k "$1" '.metadata.labels[$k] // ""'; }
  leaf_ok() { [ -n "$want_leaf" ] && [ "$(node_label fabric.topograph.run/tier-0)" = "$want_leaf" ]; }
  if [ "$p" = dgx-h100 ]; then
    want_clique=""; want_domain=rack-a; why="not written: Topograph's accelerator.topograph.run/domain=rack-a holds the NVLink level and is left alone"
  else
    want_clique=e2e-cluster.4; want_domain=""; why="written from the saved nvidia-smi -q"
  fi
  if wait_until 20 "domain labels on $node" leaf_ok &&
    [ "$(node_label nvidia.com/gpu.clique)" = "$want_clique" ] &&
    [ "$(node_label accelerator.topograph.run/domain)" = "$want_domain" ]; then
    pass "podresources $p: domain labels: tier-0=$want_leaf $leaf_src; gpu.clique '$want_clique' $why"
  else
    fail "podresources $p: domain labels on $node: $(K get node "$node" -o json | jq -c '.metadata.labels'); expected tier-0='$want_leaf' ($leaf_src), gpu.clique='$want_clique', accelerator domain '$want_domain'"
  fi
  published_nrt "$node" "$D/$p.nrt-rails.json"
  rails=$(jq -r '.metadata.annotations["topoalign.dev/rails"] // "{}" | fromjson | [.nics[]] | sort | map(tostring) | join(",")' "$D/$p.nrt-rails.json" 2> /dev/null)
  [ "$rails" = "0,1,2,3,4,5,6,7" ] && pass "podresources $p: NRT annotation topoalign.dev/rails: one NIC on each rail 0-7" ||
    fail "podresources $p: NRT rails annotation '$rails', expected one NIC on each of rails 0-7"

  # 3. a pod leaves: the kubelet restarts its server with the new allocations
  stop_component "podresources-$p"
  start_server "podresources-$p" "$D/$p.alloc2.json" "$sock" || { fail "podresources: restarting the stand-in"; continue; }
  t=$(now)
  follows() { published_nrt "$node" "$D/$p.nrt2.json" && python3 "$PY" check-nrt --expect "$D/$p.expect2.json" --nrt "$D/$p.nrt2.json" > /dev/null; }
  if wait_until 30 "NRT $node follows" follows; then
    pass "podresources $p: after the pod train/small left and the server restarted, the agent reconnected and published the new complement in $(since "$t") s"
  else
    published_nrt "$node" "$D/$p.nrt2.json"
    fail "podresources $p: NRT did not follow within 30 s: $(python3 "$PY" check-nrt --expect "$D/$p.expect2.json" --nrt "$D/$p.nrt2.json" | cut -c1-400)"
  fi
  stop_component "agent-$p"
  stop_component "podresources-$p"
done
