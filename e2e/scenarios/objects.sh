#!/usr/bin/env bash
# Scenario 1: every object topoalign ships is accepted by the real API server.
#
# - every profile's DeviceClasses and ResourceSlices from `topoalign driver --dry-run`
#   are applied (server-side validation: device, counter, attribute and slice limits);
# - the manifests under deploy/ (RBAC, DaemonSet, ...) and, with helm built from e2e/helm, the
#   rendered Helm chart pass a server-side dry run;
# - both Helm charts are installed for real (`helm install`), each ServiceAccount is checked
#   with `kubectl auth can-i --as=…` for what it must and must not do, the driver's
#   admission policy refuses another node's slices, and `helm uninstall` removes them;
# - the driver's domain labels (e2e/lib/driver_labels.sh): the chart with
#   driver.domainLabels on lets the driver patch its own node's domain labels and nothing
#   else (RBAC + ValidatingAdmissionPolicy, checked with the driver's identity), and the
#   driver binary with a pod-bound token writes the clique and spine only where absent.
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$E2E_DIR/lib/cluster.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"
. "$E2E_DIR/lib/driver_labels.sh"

need_topoalign_cmd driver
D=$SCEN_DIR
PROFILES=(mi300x-8 gb300-4 dgx-h100 pcie-2socket)

for p in "${PROFILES[@]}"; do
  node=obj-$p
  if ! "$TOPOALIGN" driver --profile "$p" --node-name "$node" --dry-run -o yaml > "$D/$p.yaml" 2> "$D/$p.err"; then
    fail "objects: topoalign driver --profile $p --dry-run failed: $(head -c 1000 "$D/$p.err")"
    continue
  fi
  yaml_to_json "$D/$p.yaml" > "$D/$p.json" 2> "$D/$p.convert.err" || { fail "objects: $p: the dry-run output is not a valid YAML stream of Kubernetes objects: $(head -c 500 "$D/$p.convert.err")"; continue; }
  kinds=$(jq -r 'group_by(.kind) | map("\(length) \(.[0].kind)") | join(", ")' "$D/$p.json")
  make_node "$node" > /dev/null || fail "objects: node $node"
  if K apply --server-side --field-manager=e2e -f "$D/$p.yaml" > "$D/$p.apply.out" 2>&1; then
    devices=$(jq '[.[] | select(.kind == "ResourceSlice") | (.spec.devices // []) | length] | add // 0' "$D/$p.json")
    counters=$(jq '[.[] | select(.kind == "ResourceSlice") | (.spec.sharedCounters // []) | .[].counters | length] | add // 0' "$D/$p.json")
    pairs=$(jq '[.[] | select(.kind == "ResourceSlice") | (.spec.devices // [])[] | select(.attributes["gpuPciBusID"] // .attributes["topoalign.dev/gpuPciBusID"])] | length' "$D/$p.json")
    stored=$(K get resourceslices -o json | jq --arg n "$node" '[.items[] | select(.spec.nodeName == $n)] | length')
    pass "objects: $p accepted by kube-apiserver: $kinds; $devices devices ($pairs pairs), $counters counters; $stored slices stored"
    figure "slices $p: $kinds, $devices devices, $pairs pair devices, $counters counters"
  else
    fail "objects: $p rejected: $(head -c 2000 "$D/$p.apply.out")"
  fi
done

# Every device that is one PCI function carries resource.kubernetes.io/pciBusID; pairs carry both bus IDs.
for p in "${PROFILES[@]}"; do
  [ -f "$D/$p.json" ] || continue
  bad=$(jq -r '[.[] | select(.kind == "ResourceSlice") | (.spec.devices // [])[]
      | select((.attributes["resource.kubernetes.io/pciBusID"] == null)
               and ((.attributes["gpuPciBusID"] // .attributes["topoalign.dev/gpuPciBusID"]) == null)) | .name] | join(" ")' "$D/$p.json")
  if [ -z "$bad" ]; then pass "objects: $p: every device carries a PCI bus ID attribute"
  else fail "objects: $p: devices without pciBusID or gpuPciBusID/nicPciBusID: $bad"; fi
done

# deploy/: the kustomization applied for real (namespace first, so namespaced objects
# validate), other manifests by server-side dry run, Helm charts rendered by helm (e2e/helm).
DEPLOY=$REPO_DIR/deploy
rel() { echo "${1#"$REPO_DIR"/}"; }
if [ -d "$DEPLOY" ]; then
  if [ -f "$DEPLOY/kustomization.yaml" ]; then
    if K kustomize "$DEPLOY" > "$D/deploy-kustomize.yaml" 2> "$D/deploy.err" &&
      K apply --server-side --field-manager=e2e -f "$D/deploy-kustomize.yaml" > "$D/deploy.out" 2>&1; then
      pass "objects: kubectl apply -k deploy/ accepted: $(yaml_to_json "$D/deploy-kustomize.yaml" | jq -r 'map(.kind) | join(", ")')"
    else fail "objects: kubectl apply -k deploy/: $(head -c 1500 "$D/deploy.err" "$D/deploy.out" 2> /dev/null)"; fi
  fi
  # deploy/gang holds topoalign's own inputs (a job description, a rail source), not
  # Kubernetes objects: `topoalign gang` and `driver --rails` read them (tested there).
  mapfile -t files < <(find "$DEPLOY" -name '*.yaml' -not -path '*/templates/*' -not -path "$DEPLOY/gang/*" \
    -not -name 'Chart.yaml' -not -name 'values*.yaml' -not -name 'kustomization.yaml' | sort)
  for f in "${files[@]}"; do
    if K apply --dry-run=server -f "$f" > "$D/deploy.out" 2>&1; then pass "objects: $(rel "$f") accepted (server-side dry run)"
    elif grep -q 'no matches for kind' "$D/deploy.out"; then
      info "objects: $(rel "$f") not validated here: $(grep -o 'no matches for kind "[^"]*" in version "[^"]*"' "$D/deploy.out" | head -1) (a config file or a CRD this cluster lacks)"
    else fail "objects: $(rel "$f") rejected: $(head -c 1500 "$D/deploy.out")"; fi
  done
  while IFS= read -r chart; do
    h=$D/helm-$(basename "$chart")
    if [ -x "$HELM_BIN/helm" ]; then
      if "$HELM_BIN/helm" template topoalign "$chart" --kube-version "$K8S_VERSION" --namespace topoalign-system > "$h.yaml" 2> "$h.err" && K apply --dry-run=server -f "$h.yaml" > "$h.out" 2>&1; then
        pass "objects: Helm chart $(rel "$chart") renders and is accepted (server-side dry run)"
      else fail "objects: Helm chart $(rel "$chart"): $(cat "$h.err" "$h.out" 2> /dev/null | grep -v -e '(server dry run)' -e '^Warning:' | head -c 1500)"; fi
    else
      fail "objects: no helm binary in $HELM_BIN; chart $(rel "$chart") not rendered"
    fi
  done < <(find "$DEPLOY" -name Chart.yaml -printf '%h\n' | sort)
  # The chart with a rail source: the ConfigMap, its mount and --rails.
  if [ -x "$HELM_BIN/helm" ] && [ -f "$DEPLOY/gang/rails.yaml" ]; then
    h=$D/helm-rails
    if "$HELM_BIN/helm" template topoalign "$DEPLOY/helm/topoalign" --kube-version "$K8S_VERSION" --namespace topoalign-system \
      --set-file rails="$DEPLOY/gang/rails.yaml" > "$h.yaml" 2> "$h.err" && grep -q -e '--rails=' "$h.yaml" &&
      K apply --dry-run=server -f "$h.yaml" > "$h.out" 2>&1; then
      pass "objects: Helm chart deploy/helm/topoalign with rails=deploy/gang/rails.yaml renders and is accepted (server-side dry run)"
    else fail "objects: Helm chart deploy/helm/topoalign with a rail source: $(cat "$h.err" "$h.out" 2> /dev/null | grep -v -e '(server dry run)' -e '^Warning:' | head -c 1500)"; fi
  fi
  # The extender chart's agent with the node's fabric facts: its ConfigMap, mount and flags.
  if [ -x "$HELM_BIN/helm" ] && [ -f "$DEPLOY/gang/rails.yaml" ]; then
    h=$D/helm-agent-facts
    printf 'labels: {fabric.topograph.run/tier-0: leaf-1}\n' > "$h.domains.yaml"
    if "$HELM_BIN/helm" template topoalign-extender "$DEPLOY/extender/helm/topoalign-extender" --kube-version "$K8S_VERSION" \
      --namespace topoalign-system --set agent.fabricFrom=nvidia-smi --set-file agent.domains="$h.domains.yaml" \
      --set-file agent.rails="$DEPLOY/gang/rails.yaml" > "$h.yaml" 2> "$h.err" &&
      grep -q -e '--domains=' "$h.yaml" && grep -q -e '--rails=' "$h.yaml" && grep -q -e '--fabric-from=nvidia-smi' "$h.yaml" &&
      K apply --dry-run=server -f "$h.yaml" > "$h.out" 2>&1; then
      pass "objects: Helm chart deploy/extender/helm/topoalign-extender with agent fabricFrom, domains and rails renders and is accepted (server-side dry run)"
    else fail "objects: extender chart with the agent's fabric facts: $(cat "$h.err" "$h.out" 2> /dev/null | grep -v -e '(server dry run)' -e '^Warning:' | head -c 1500)"; fi
  fi
elif [ "${E2E_ALLOW_MISSING:-0}" = 1 ]; then
  skip "objects: no deploy/ directory yet"
else
  fail "objects: no deploy/ directory (DaemonSet, RBAC, Helm chart expected)"
fi

# ---------------------------------------------------------------- Helm charts installed for real
# Both charts `helm install`ed into the control plane (not a dry run), then each
# ServiceAccount checked with `kubectl auth can-i --as=…` for what it must and must not do,
# and the driver's admission policy for another node's slices (impersonating the pod-bound
# token's node-name claim). The commands are the README's "Install on a cluster" ones, as
# written (into topoalign-system), then the extender release is upgraded with its
# device-plugin agent so that ServiceAccount is checked too. The kustomization above owns
# the same objects: removed first (its Namespace stays), applied again at the end.
HNS=topoalign-system
HELM() {
  HELM_CACHE_HOME=$D/helm-home/cache HELM_CONFIG_HOME=$D/helm-home/config HELM_DATA_HOME=$D/helm-home/data \
    "$HELM_BIN/helm" --kubeconfig "$KUBECONFIG" "$@"
}
# can SA EXPECT(yes|no) VERB RESOURCE [kubectl auth can-i flags…]: one expectation; prints
# the mismatch and returns 1 when the API server's RBAC answer differs.
can() {
  local sa=$1 want=$2; shift 2
  local got
  got=$(K auth can-i --as="system:serviceaccount:$HNS:$sa" "$@" 2> /dev/null | head -1)
  [ -n "$got" ] || got=no
  [ "$got" = "$want" ] && return 0
  echo "$sa can-i $*: $got, expected $want"
  return 1
}
if [ ! -x "$HELM_BIN/helm" ]; then
  fail "objects: no helm binary in $HELM_BIN; the charts are not installed"
elif [ ! -f "$DEPLOY/helm/topoalign/Chart.yaml" ] || [ ! -f "$DEPLOY/extender/helm/topoalign-extender/Chart.yaml" ]; then
  fail "objects: deploy/helm/topoalign or deploy/extender/helm/topoalign-extender is missing"
else
  KUSTOMIZE_FILES=(serviceaccount.yaml rbac.yaml admission-policy.yaml device-classes.yaml daemonset.yaml)
  for f in "${KUSTOMIZE_FILES[@]}"; do K delete -f "$DEPLOY/$f" --ignore-not-found --wait=true --timeout=60s > /dev/null 2>&1; done
  mapfile -t readme_helm < <(awk '/^## Install on a cluster/{on=1; next} /^## /{on=0} on' "$REPO_DIR/README.md" |
    sed -e ':a' -e '/\\$/N; s/\\\n[[:space:]]*/ /; ta' | grep '^helm install ')
  T=$(now)
  ok=1
  if [ ${#readme_helm[@]} -ne 2 ]; then
    ok=0
    fail "objects: README.md's 'Install on a cluster' should hold two 'helm install' commands (both charts), found ${#readme_helm[@]}"
  fi
  for line in "${readme_helm[@]}"; do
    eval "set -- ${line#helm }"
    name=$2
    # As written, from the repository root (relative chart paths).
    if (cd "$REPO_DIR" && HELM "$@") > "$D/helm-install-$name.out" 2>&1; then
      status=$(HELM status "$name" -n "$HNS" -o json | jq -r .info.status)
      [ "$status" = deployed ] || { ok=0; fail "objects: helm release $name is '$status', expected deployed"; }
    else
      ok=0
      fail "objects: README's '$line' fails: $(grep -v '^Warning' "$D/helm-install-$name.out" | head -c 1500)"
    fi
  done
  if [ "$ok" = 1 ]; then
    pass "objects: README's two 'helm install' commands, as written, install both charts for real in $(since "$T") s"
    if HELM upgrade topoalign-extender "$DEPLOY/extender/helm/topoalign-extender" -n "$HNS" --reuse-values \
      --set agent.enabled=true > "$D/helm-upgrade.out" 2>&1; then :; else
      ok=0
      fail "objects: helm upgrade topoalign-extender --set agent.enabled=true: $(head -c 1500 "$D/helm-upgrade.out")"
    fi
  fi
  if [ "$ok" = 1 ]; then
    objs=$(K get -n "$HNS" daemonset,deployment,serviceaccount,service -o json | jq -r '[.items[] | "\(.kind)/\(.metadata.name)"] | map(select(test("default$") | not)) | join(", ")')
    image=$(K get -n "$HNS" daemonset topoalign-driver -o jsonpath='{.spec.template.spec.containers[0].image}')
    pass "objects: installed for real (helm install, then upgrade with the agent): $objs (image $image)"
    mounts=$(K get -n "$HNS" daemonset topoalign-driver -o json | jq -r '[.spec.template.spec.volumes[] | select(.hostPath) | .hostPath.path] | join(" ")')
    missing=""
    for m in /sys /proc/driver /etc/cdi /var/run/cdi; do case " $mounts " in *" $m "*) ;; *) missing="$missing $m" ;; esac; done
    if [ -z "$missing" ]; then pass "objects: the driver's DaemonSet mounts what discovery and CDI need: $mounts"
    else fail "objects: the driver's DaemonSet lacks hostPath mounts:$missing (has: $mounts)"; fi

    # What each ServiceAccount must be able to do, and what it must not.
    mism=()
    nchk=0
    chk() { local m; nchk=$((nchk + 1)); m=$(can "$@") || mism+=("$m"); }
    RS=resourceslices.resource.k8s.io RC=resourceclaims.resource.k8s.io NRT=noderesourcetopologies.topology.node.k8s.io
    for v in create update patch delete list watch; do chk topoalign-driver yes "$v" "$RS"; done
    chk topoalign-driver yes get "$RC"
    chk topoalign-driver yes get nodes
    chk topoalign-driver no get secrets -n "$HNS"
    chk topoalign-driver no list secrets -A
    chk topoalign-driver no list pods -A
    chk topoalign-driver no get pods -n default
    chk topoalign-driver no update "$RC"
    chk topoalign-driver no create deviceclasses.resource.k8s.io
    chk topoalign-driver no patch nodes
    chk topoalign-driver no create pods -n "$HNS"
    chk topoalign-agent yes get nodes
    chk topoalign-agent yes patch nodes
    for v in get create patch; do chk topoalign-agent yes "$v" "$NRT"; done
    chk topoalign-agent no list secrets -A
    chk topoalign-agent no list pods -A
    chk topoalign-agent no delete nodes
    chk topoalign-agent no update nodes/status
    chk topoalign-agent no create "$RS"
    chk topoalign-agent no delete "$NRT"
    for r in pods nodes "$RS" "$RC" resourceclaimtemplates.resource.k8s.io deviceclasses.resource.k8s.io "$NRT"; do
      chk topoalign-extender yes list "$r" -A
      chk topoalign-extender yes watch "$r" -A
    done
    chk topoalign-extender no get secrets -n "$HNS"
    chk topoalign-extender no list secrets -A
    chk topoalign-extender no create pods --subresource=binding -n default
    chk topoalign-extender no patch nodes
    chk topoalign-extender no create "$RS"
    chk topoalign-extender no update "$RC"
    chk topoalign-extender no patch "$NRT"
    chk topoalign-extender no delete pods -n default
    chk topoalign-scheduler yes create pods --subresource=binding -n default
    chk topoalign-scheduler yes list "$RS"
    chk topoalign-scheduler yes create leases.coordination.k8s.io -n "$HNS"
    chk topoalign-scheduler no list secrets -A
    chk topoalign-scheduler no create "$RS"
    # The checker itself: a wrong expectation must be reported.
    can topoalign-driver yes list secrets -A > /dev/null && mism+=("the can-i check accepted 'driver may list secrets'")
    if [ ${#mism[@]} -eq 0 ]; then
      pass "objects: RBAC of the installed charts: driver, agent, extender and scheduler ServiceAccounts can do what they must and not read secrets, other pods, or write what they do not own (kubectl auth can-i, $nchk checks)"
    else
      fail "objects: RBAC of the installed charts: $(printf '%s; ' "${mism[@]}")"
    fi

    # Another node's slices: the admission policy refuses them, with the token's node name.
    slice() {
      cat << YAML
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: e2e-own-node-$1}
spec:
  driver: ${2:-topoalign.dev}
  nodeName: $1
  pool: {name: $1, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}]
YAML
    }
    as_driver=(--as="system:serviceaccount:$HNS:topoalign-driver" --as-group=system:serviceaccounts
      --as-user-extra=authentication.kubernetes.io/node-name=obj-dgx-h100)
    own=$(slice obj-dgx-h100 | K create --dry-run=server "${as_driver[@]}" -f - 2>&1)
    other=$(slice obj-mi300x-8 | K create --dry-run=server "${as_driver[@]}" -f - 2>&1)
    foreign=$(slice obj-dgx-h100 gpu.example.com | K create --dry-run=server "${as_driver[@]}" -f - 2>&1)
    if [[ "$own" == *created* ]] && [[ "$other" == *"may not write ResourceSlices of node obj-mi300x-8"* ]] &&
      [[ "$foreign" == *"only slices of the topoalign.dev driver"* ]]; then
      pass "objects: the driver on node obj-dgx-h100 may write its own node's slices, not obj-mi300x-8's nor another driver's (admission policy, server-side)"
    else
      fail "objects: admission of the driver's slices: own node: $own; other node: $other; other driver: $foreign"
    fi

    # The driver's domain labels (opt-in): RBAC, policy, and the binary with a real token.
    driver_domain_labels
  fi
  T=$(now)
  for name in topoalign-extender topoalign; do
    HELM uninstall "$name" -n "$HNS" --wait --timeout 60s > "$D/helm-uninstall-$name.out" 2>&1 ||
      fail "objects: helm uninstall $name: $(head -c 800 "$D/helm-uninstall-$name.out")"
  done
  # The NodeResourceTopology CRD is kept on purpose (helm.sh/resource-policy: keep: the
  # agents' objects outlive a reinstall); everything else of the releases must be gone.
  left=$(K get clusterroles,clusterrolebindings,deviceclasses,validatingadmissionpolicies,validatingadmissionpolicybindings -o json |
    jq -r '[.items[] | select(.metadata.name | test("^topoalign|topoalign\\.dev$")) | "\(.kind)/\(.metadata.name)"] | join(", ")')
  left_ns=$(K get -n "$HNS" daemonsets,deployments,serviceaccounts,services,roles,rolebindings -o name 2> /dev/null | grep -v '/default$' | tr '\n' ' ')
  if [ -z "$left$left_ns" ]; then pass "objects: helm uninstall removes both releases' objects, the NRT CRD kept by its resource policy ($(since "$T") s)"
  else fail "objects: after helm uninstall these remain: $left $left_ns"; fi
  # Back to what `kubectl apply -k deploy/` left for the scenarios after this one.
  for f in "${KUSTOMIZE_FILES[@]}"; do K apply -f "$DEPLOY/$f" > /dev/null 2>&1 || fail "objects: re-applying deploy/$f after helm uninstall"; done
fi
