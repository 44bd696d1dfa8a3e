#!/usr/bin/env bash
# Scenario 1: every object topoalign ships is accepted by the real API server.
#
# - every profile's DeviceClasses and ResourceSlices from `topoalign driver --dry-run`
#   are applied (server-side validation: device, counter, attribute and slice limits);
# - the manifests under deploy/ (RBAC, DaemonSet, ...) and, with helm built from e2e/helm, the
#   rendered Helm chart pass a server-side dry run.
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"

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
  mapfile -t files < <(find "$DEPLOY" -name '*.yaml' -not -path '*/templates/*' -not -name 'Chart.yaml' \
    -not -name 'values*.yaml' -not -name 'kustomization.yaml' | sort)
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
elif [ "${E2E_ALLOW_MISSING:-0}" = 1 ]; then
  skip "objects: no deploy/ directory yet"
else
  fail "objects: no deploy/ directory (DaemonSet, RBAC, Helm chart expected)"
fi
