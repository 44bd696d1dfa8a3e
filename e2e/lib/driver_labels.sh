# shellcheck shell=bash
# The DRA driver's domain labels (issue 24), a part of the objects scenario run once both
# charts are installed for real. Sourced by scenarios/objects.sh, which defines D, DEPLOY,
# HNS, HELM and can (and sources common.sh, cluster.sh, cluster.env and k8s.sh).
#
# driver_domain_labels:
#  1. `driver --write-domain-labels --dry-run` prints the Node patch with the clique of a
#     saved `nvidia-smi -q` and the leaf and spine of a domain file;
#  2. the topoalign release upgraded with driver.domainLabels on: the driver's ClusterRole
#     gets patch on nodes and the ValidatingAdmissionPolicy topoalign-driver-domain-labels
#     is installed;
#  3. as the driver's ServiceAccount with the node-name claim of a pod-bound token
#     (impersonated): its own node's domain label may be set and removed; another node, a
#     label that is no domain label, an annotation, a finalizer, the spec, a request without the claim
#     are refused by the policy with its message;
#  4. the driver binary itself, with a real token bound to a pod on its node: it publishes
#     its slices (with the rails of deploy/gang/rails.yaml) and writes the clique and the spine, not the leaf that another field
#     manager labelled already; run again with another spine, it changes its own label;
#  5. the value off again: no patch on nodes, no policy.

DL_NODE=obj-labels
DL_OTHER=obj-labels-other
DL_POLICY=topoalign-driver-domain-labels

dl_label() { K get node "$1" -o json | jq -r --arg k "$2" '.metadata.labels[$k] // ""'; }
dl_clique_written() { [ "$(dl_label "$DL_NODE" nvidia.com/gpu.clique)" = e2e-cluster.5 ]; }
dl_slices_up() { [ "$(slices_of "$DL_NODE" | jq length)" -gt 0 ]; }
dl_spine2() { [ "$(dl_label "$DL_NODE" fabric.topograph.run/tier-1)" = spine-2 ]; }
# dl_refused_other: the policy is in effect (a foreign node refused; a dry run, nothing written).
dl_refused_other() {
  local out
  out=$(K patch node "$DL_OTHER" --as="system:serviceaccount:$HNS:topoalign-driver" --as-group=system:serviceaccounts \
    --as-user-extra=authentication.kubernetes.io/node-name="$DL_NODE" --type=merge --dry-run=server \
    -p '{"metadata":{"labels":{"fabric.topograph.run/tier-0":"leaf-1"}}}' 2>&1)
  [[ "$out" == *"$DL_POLICY"* ]]
}

# dl_patch EXTRA_ARGS_ARRAY_NAME NODE PATCH : a merge patch as the driver; prints kubectl's answer.
dl_patch() {
  local -n who=$1
  K patch node "$2" "${who[@]}" --type=merge -p "$3" 2>&1
}

# dl_start_driver KUBECONFIG DOMAINS LOG : the driver on $DL_NODE with the node's facts, in
# the background (registered as driver-labels).
dl_start_driver() {
  TOPOALIGN_LOG=info "$TOPOALIGN" driver --profile dgx-h100 --node-name "$DL_NODE" --kubeconfig "$1" --no-plugin \
    --metrics-addr "127.0.0.1:$(free_ports 1)" --rescan-interval 1h --rails "$REPO_DIR/deploy/gang/rails.yaml" \
    --write-domain-labels --fabric-from "$D/labels-query.txt" --domains "$2" >> "$3" 2>&1 &
  register_pid driver-labels $!
}

driver_domain_labels() {
  local q=$D/labels-query.txt dom=$D/labels-domains.yaml dom2=$D/labels-domains-2.yaml
  local log=$RUN/logs/driver-labels.log out want got
  printf 'Attached GPUs : 1\nGPU 00000000:1B:00.0\n    Fabric\n        State : Completed\n        CliqueId : 5\n        ClusterUUID : e2e-cluster\n' > "$q"
  printf 'labels: {fabric.topograph.run/tier-1: spine-1}\nnodes:\n  %s: {fabric.topograph.run/tier-0: leaf-7}\n' "$DL_NODE" > "$dom"
  printf 'labels: {fabric.topograph.run/tier-1: spine-2}\nnodes:\n  %s: {fabric.topograph.run/tier-0: leaf-7}\n' "$DL_NODE" > "$dom2"

  # 1. the dry run: the Node patch as on a node without domain labels, after the slices.
  if "$TOPOALIGN" driver --profile dgx-h100 --node-name "$DL_NODE" --write-domain-labels \
    --fabric-from "$q" --domains "$dom" --dry-run -o json > "$D/labels-dry.json" 2> "$D/labels-dry.err"; then
    want='{"fabric.topograph.run/tier-0":"leaf-7","fabric.topograph.run/tier-1":"spine-1","nvidia.com/gpu.clique":"e2e-cluster.5"}'
    got=$(jq -c '[.items[] | select(.kind == "Node")] | map({name: .metadata.name, labels: .metadata.labels})' "$D/labels-dry.json")
    if [ "$got" = "[{\"name\":\"$DL_NODE\",\"labels\":$want}]" ] &&
      [ "$(jq '[.items[] | select(.kind == "ResourceSlice")] | length' "$D/labels-dry.json")" -gt 0 ]; then
      pass "objects: driver --write-domain-labels --dry-run -o json: the slices, then one Node patch with the clique (saved nvidia-smi -q), leaf and spine (domain file)"
    else
      fail "objects: driver --write-domain-labels --dry-run: Node patches $got, expected one for $DL_NODE with $want"
    fi
  else
    fail "objects: driver --write-domain-labels --dry-run failed: $(head -c 800 "$D/labels-dry.err")"
  fi

  # 2. the value on.
  make_node "$DL_NODE" network.topology.nvidia.com/leaf=sw-3 > /dev/null || fail "objects: node $DL_NODE"
  make_node "$DL_OTHER" > /dev/null || fail "objects: node $DL_OTHER"
  if ! HELM upgrade topoalign "$DEPLOY/helm/topoalign" -n "$HNS" --reuse-values \
    --set driver.domainLabels.enabled=true --set driver.domainLabels.fabricFrom=nvidia-smi \
    --set-file driver.domainLabels.domains="$dom" > "$D/helm-labels-on.out" 2>&1; then
    fail "objects: helm upgrade topoalign --set driver.domainLabels.enabled=true: $(grep -v '^Warning' "$D/helm-labels-on.out" | head -c 1500)"
    return
  fi
  local mism=() m args dsargs
  for m in "yes get nodes" "yes patch nodes" "no create nodes" "no delete nodes" "no update nodes" \
    "no patch nodes --subresource=status" "no list secrets -A"; do
    read -ra args <<< "$m"
    out=$(can topoalign-driver "${args[@]}") || mism+=("$out")
  done
  dsargs=$(K get -n "$HNS" daemonset topoalign-driver -o json | jq -r '.spec.template.spec.containers[0].args | join(" ")')
  case " $dsargs " in
    *" --write-domain-labels "*"--fabric-from=nvidia-smi"*"--domains=/etc/topoalign/domains/domains.yaml"*) ;;
    *) mism+=("the DaemonSet's args lack --write-domain-labels, --fabric-from or --domains: $dsargs") ;;
  esac
  K get validatingadmissionpolicy "$DL_POLICY" > /dev/null 2>&1 || mism+=("no ValidatingAdmissionPolicy $DL_POLICY")
  K get validatingadmissionpolicybinding "$DL_POLICY" > /dev/null 2>&1 || mism+=("no ValidatingAdmissionPolicyBinding $DL_POLICY")
  K get -n "$HNS" configmap topoalign-domains > /dev/null 2>&1 || mism+=("no ConfigMap topoalign-domains")
  if [ ${#mism[@]} -eq 0 ]; then
    pass "objects: chart with driver.domainLabels.enabled: the driver may get and patch nodes (not create, delete, update, or patch their status), its DaemonSet runs --write-domain-labels --fabric-from --domains, policy $DL_POLICY installed"
  else
    fail "objects: chart with driver.domainLabels.enabled: $(printf '%s; ' "${mism[@]}")"
  fi
  # The policy takes effect once the API server has loaded it.
  wait_until 30 "policy $DL_POLICY in effect" dl_refused_other
  # shellcheck disable=SC2034 # both used through dl_patch's name reference
  local as_driver=(--as="system:serviceaccount:$HNS:topoalign-driver" --as-group=system:serviceaccounts
    --as-user-extra=authentication.kubernetes.io/node-name="$DL_NODE")
  # shellcheck disable=SC2034
  local no_claim=(--as="system:serviceaccount:$HNS:topoalign-driver" --as-group=system:serviceaccounts)

  # 3. the policy, with the driver's identity.
  local own own_gone other plain anno fin spec claim
  own=$(dl_patch as_driver "$DL_NODE" '{"metadata":{"labels":{"accelerator.topograph.run/sub-domain":"sub-1"}}}')
  got=$(dl_label "$DL_NODE" accelerator.topograph.run/sub-domain)
  own_gone=$(dl_patch as_driver "$DL_NODE" '{"metadata":{"labels":{"accelerator.topograph.run/sub-domain":null}}}')
  other=$(dl_patch as_driver "$DL_OTHER" '{"metadata":{"labels":{"fabric.topograph.run/tier-0":"leaf-1"}}}')
  plain=$(dl_patch as_driver "$DL_NODE" '{"metadata":{"labels":{"example.com/team":"a","fabric.topograph.run/tier-3":"t3"}}}')
  anno=$(dl_patch as_driver "$DL_NODE" '{"metadata":{"annotations":{"example.com/note":"x"}}}')
  fin=$(K patch node "$DL_NODE" "${as_driver[@]}" --type=json -p '[{"op":"add","path":"/metadata/finalizers","value":["example.com/keep"]}]' 2>&1)
  spec=$(dl_patch as_driver "$DL_NODE" '{"spec":{"unschedulable":true}}')
  claim=$(dl_patch no_claim "$DL_NODE" '{"metadata":{"labels":{"fabric.topograph.run/tier-0":"leaf-1"}}}')
  if [[ "$own" == *patched* ]] && [ "$got" = sub-1 ] && [[ "$own_gone" == *patched* ]] &&
    [ -z "$(dl_label "$DL_NODE" accelerator.topograph.run/sub-domain)" ] &&
    [[ "$other" == *"$DL_POLICY"*"this driver runs on node $DL_NODE and may not change node $DL_OTHER"* ]] &&
    [[ "$plain" == *"$DL_POLICY"*"may change only its node's domain labels, not example.com/team"* ]] &&
    [[ "$plain" != *"tier-3"* ]] &&
    [[ "$anno" == *"$DL_POLICY"*"may not change a Node's annotations"* ]] &&
    [[ "$fin" == *"$DL_POLICY"*"may not change a Node's finalizers or owner references"* ]] &&
    [[ "$spec" == *"$DL_POLICY"*"may not change a Node's spec"* ]] &&
    [[ "$claim" == *"$DL_POLICY"*"no node name in the service account token"* ]] &&
    [ -z "$(dl_label "$DL_OTHER" fabric.topograph.run/tier-0)" ] && [ -z "$(dl_label "$DL_NODE" example.com/team)" ]; then
    pass "objects: the driver on node $DL_NODE may set and remove its node's domain label; another node, a non-domain label, an annotation, a finalizer, the spec and a token without a node name are refused by $DL_POLICY (kube-apiserver, impersonated pod-bound token)"
  else
    fail "objects: admission of the driver's node writes: own label set: $own (value '$got'); removed: $own_gone; other node: $other; non-domain label: $plain; annotation: $anno; finalizer: $fin; spec: $spec; no node name: $claim"
  fi

  # 4. the driver binary, with a token bound to a pod on its node.
  local pod=obj-labels-driver uid token kc=$D/driver-token.kubeconfig
  K apply -f - > /dev/null 2>&1 << EOF
apiVersion: v1
kind: Pod
metadata: {name: $pod, namespace: $HNS}
spec:
  nodeName: $DL_NODE
  serviceAccountName: topoalign-driver
  automountServiceAccountToken: false
  containers: [{name: c, image: registry.k8s.io/pause:3.10}]
EOF
  uid=$(K get pod -n "$HNS" "$pod" -o jsonpath='{.metadata.uid}' 2> /dev/null)
  token=$(K create token topoalign-driver -n "$HNS" --bound-object-kind=Pod --bound-object-name="$pod" \
    --bound-object-uid="$uid" --duration=30m 2> "$D/labels-token.err")
  if [ -z "$uid" ] || [ -z "$token" ]; then
    fail "objects: no token bound to pod $HNS/$pod: $(head -c 600 "$D/labels-token.err")"
  else
    cat > "$kc" << EOF
apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: "https://127.0.0.1:$P_API", certificate-authority: "$RUN/pki/ca.crt"}}]
users: [{name: driver, user: {token: "$token"}}]
contexts: [{name: driver, context: {cluster: e2e, user: driver}}]
current-context: driver
EOF
    got=$("$K8S_BIN/kubectl" --kubeconfig "$kc" auth whoami -o json 2>&1 |
      jq -r '.status.userInfo | "\(.username) \(.extra["authentication.kubernetes.io/node-name"][0] // "")"' 2>&1)
    if [ "$got" != "system:serviceaccount:$HNS:topoalign-driver $DL_NODE" ]; then
      fail "objects: the pod-bound token says '$got', expected the driver's ServiceAccount on node $DL_NODE"
    else
      local t; t=$(now)
      dl_start_driver "$kc" "$dom" "$log"
      if wait_until 30 "clique label on $DL_NODE" dl_clique_written && wait_until 30 "slices of $DL_NODE" dl_slices_up; then
        figure "objects: the driver's domain labels on its node $(since "$t") s after start"
        K get node "$DL_NODE" -o json --show-managed-fields > "$D/labels-node.json"
        local labels owned
        local rails
        rails=$(slices_of "$DL_NODE" | jq -c '[.[].spec.devices[]? | .attributes.rail.int // empty] | unique')
        labels=$(jq -c '.metadata.labels | with_entries(select(.key | test("topograph|topology[.]nvidia|gpu[.]clique")))' "$D/labels-node.json")
        owned=$(jq -c '[.metadata.managedFields[] | select(.manager == "topoalign.dev") | .fieldsV1["f:metadata"]["f:labels"] // {} | keys[]] | sort' "$D/labels-node.json")
        want='{"fabric.topograph.run/tier-1":"spine-1","network.topology.nvidia.com/leaf":"sw-3","nvidia.com/gpu.clique":"e2e-cluster.5"}'
        if [ "$labels" = "$want" ] && [ "$rails" = '[0,1,2,3,4,5,6,7]' ] && [ "$owned" = '["f:fabric.topograph.run/tier-1","f:nvidia.com/gpu.clique"]' ] &&
          grep -q 'not written: the node already has network.topology.nvidia.com/leaf=sw-3' "$log"; then
          pass "objects: driver --write-domain-labels with its pod-bound token published its slices (each NIC on its rail, rails 0-7 of --rails) and wrote the clique and the spine (field manager topoalign.dev), not the leaf another manager labelled (sw-3 kept, said in its log)"
        else
          fail "objects: the driver's domain labels on $DL_NODE: $labels owned by topoalign.dev: $owned; rails on its slices $rails; expected $want, owned clique and tier-1 (log: $log)"
        fi
      else
        fail "objects: the driver wrote no clique label or published no slice on $DL_NODE within 30 s: labels $(K get node "$DL_NODE" -o json | jq -c .metadata.labels); log: $(tail -c 1200 "$log")"
      fi
      stop_component driver-labels
      # Its own labels are its own to change: another spine in the file, the label follows.
      dl_start_driver "$kc" "$dom2" "$log"
      if wait_until 30 "spine-2 on $DL_NODE" dl_spine2 && [ "$(dl_label "$DL_NODE" network.topology.nvidia.com/leaf)" = sw-3 ] &&
        [ -z "$(dl_label "$DL_NODE" fabric.topograph.run/tier-0)" ]; then
        pass "objects: run again with another spine, the driver changes its own label (spine-1 to spine-2) and still leaves the leaf alone"
      else
        fail "objects: the driver's second run: labels $(K get node "$DL_NODE" -o json | jq -c .metadata.labels), expected tier-1 spine-2 (log: $log)"
      fi
      stop_component driver-labels
    fi
  fi
  K delete pod -n "$HNS" "$pod" --grace-period=0 --force > /dev/null 2>&1

  # 5. the value off again: back to the chart's default.
  if HELM upgrade topoalign "$DEPLOY/helm/topoalign" -n "$HNS" --reuse-values \
    --set driver.domainLabels.enabled=false > "$D/helm-labels-off.out" 2>&1 &&
    out=$(can topoalign-driver no patch nodes) && ! K get validatingadmissionpolicy "$DL_POLICY" > /dev/null 2>&1; then
    pass "objects: driver.domainLabels off again: no patch on nodes, no policy $DL_POLICY"
  else
    fail "objects: driver.domainLabels off again: $out $(grep -v '^Warning' "$D/helm-labels-off.out" | head -c 800) $(K get validatingadmissionpolicy "$DL_POLICY" -o name 2>&1)"
  fi
  K delete node "$DL_NODE" "$DL_OTHER" --wait=false > /dev/null 2>&1
}
