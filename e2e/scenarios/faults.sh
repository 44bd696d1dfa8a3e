#!/usr/bin/env bash
# Scenario 7: faults around the publishing driver.
#   - kube-apiserver restarted while `topoalign driver` publishes: the slices converge to
#     exactly the dry-run's set (no duplicates, one pool generation);
#   - etcd stopped for a few seconds: nothing lost once it is back;
#   - a slice deleted behind the driver's back is repaired.
set -uo pipefail
. "$E2E_DIR/lib/common.sh"
. "$E2E_DIR/lib/cluster.sh"
. "$RUN/cluster.env"
. "$E2E_DIR/lib/k8s.sh"

need_topoalign_cmd driver
D=$SCEN_DIR
P=mi300x-8
NODE=ft-$P
mkdir -p "$D/registry" "$D/plugins" "$D/cdi" "$D/state"
make_node "$NODE" || { fail "faults: node $NODE"; exit 1; }
"$TOPOALIGN" driver --profile "$P" --node-name "$NODE" --dry-run -o yaml > "$D/dry.yaml" 2> "$D/dry.err" || { fail "faults: dry-run: $(cat "$D/dry.err")"; exit 1; }
yaml_to_json "$D/dry.yaml" > "$D/dry.json"
want_slices=$(jq '[.[] | select(.kind == "ResourceSlice")] | length' "$D/dry.json")
want_devices=$(jq '[.[] | select(.kind == "ResourceSlice") | (.spec.devices // [])[].name] | sort | join(",")' "$D/dry.json")

# converged : the node's slices hold exactly the dry-run's devices once, one generation, complete
converged() {
  slices_of "$NODE" | jq -e --argjson n "$want_slices" --argjson dev "$want_devices" '
    (length == $n)
    and ([.[] | (.spec.devices // [])[].name] | sort | join(",")) == $dev
    and ([.[].spec.pool.generation] | unique | length) == 1
    and ([.[].spec.pool.resourceSliceCount] | unique) == [$n]' > /dev/null
}
state() { slices_of "$NODE" | jq -c '{slices: length, devices: ([.[] | (.spec.devices // []) | length] | add), generations: ([.[].spec.pool.generation] | unique)}'; }

start_driver() {
  "$TOPOALIGN" driver --profile "$P" --node-name "$NODE" --kubeconfig "$KUBECONFIG" \
    --plugin-registry-dir "$D/registry" --plugin-dir "$D/plugins" --cdi-dir "$D/cdi" --state-dir "$D/state" \
    --metrics-addr "127.0.0.1:$(free_ports 1)" \
    >> "$RUN/logs/driver-faults.log" 2>&1 &
  register_pid driver-faults $!
}

# 1. apiserver restarted while the driver starts publishing
start_driver
sleep 0.2
t=$(now)
stop_component kube-apiserver
sleep 2
start_apiserver || { fail "faults: kube-apiserver did not come back"; exit 1; }
info "kube-apiserver restarted ($(since "$t") s down and up) while the driver was publishing"
if wait_until 60 "slices converge after apiserver restart" converged; then
  pass "faults: after an apiserver restart during publishing the slices converged in $(since "$t") s: $(state)"
else
  fail "faults: slices did not converge after the apiserver restart: $(state), expected $want_slices slices (driver log: $RUN/logs/driver-faults.log)"
fi

# 2. a slice deleted behind the driver's back is repaired
victim=$(slices_of "$NODE" | jq -r '.[0].metadata.name // empty')
if [ -n "$victim" ]; then
  t=$(now)
  K delete resourceslice "$victim" > /dev/null
  if wait_until 60 "slice repaired" converged; then pass "faults: deleted slice $victim repaired in $(since "$t") s: $(state)"
  else fail "faults: deleted slice $victim not repaired: $(state)"; fi
fi

# 3. etcd unavailable for 3 s
t=$(now)
stop_component etcd
sleep 3
start_etcd || { fail "faults: etcd did not come back"; exit 1; }
wait_until 60 "apiserver ready after etcd outage" apiserver_ready || fail "faults: apiserver not ready after the etcd outage"
if wait_until 60 "slices intact after etcd outage" converged; then pass "faults: after a 3 s etcd outage nothing was lost ($(since "$t") s): $(state)"
else fail "faults: after the etcd outage: $(state)"; fi
# the controller manager and scheduler reconnect by themselves; check the scheduler still works
make_namespace faults
K -n faults apply -f - > /dev/null << EOF
apiVersion: v1
kind: Pod
metadata: {name: after-outage}
spec:
  nodeSelector: {kubernetes.io/hostname: $NODE}
  containers: [{name: c, image: registry.k8s.io/pause:3.10}]
EOF
if wait_pod_bound faults after-outage 30; then pass "faults: the scheduler binds pods after the outages"; else fail "faults: no pod bound after the outages"; fi

stop_component driver-faults
if wait_until 30 "slices removed" bash -c "[ \"\$('$K8S_BIN/kubectl' get resourceslices -o json | jq --arg n $NODE '[.items[] | select(.spec.nodeName == \$n)] | length')\" = 0 ]"; then
  pass "faults: driver removed its slices on SIGTERM"
else fail "faults: driver left slices after SIGTERM: $(state)"; fi
