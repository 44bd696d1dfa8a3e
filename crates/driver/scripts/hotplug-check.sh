#!/usr/bin/env bash
# Hot-plug and generation check of `topoalign driver` against a real kube-apiserver
# (etcd + kube-apiserver v1.37.2 from the e2e harness, e2e/lib):
#   1. publish a node from a sysfs tree (`topoalign profile write pcie-2socket`), 1 s rescans;
#   2. idle for 5 s: the pool generation must not move (no change, no bump);
#   3. unplug a GPU (its /sys/bus/pci/devices link): within seconds the slices lose its
#      devices and the generation goes up by exactly one;
#   4. plug it back: the devices return, generation up by one again;
#   5. SIGTERM: every slice of the node is deleted.
# Prints PASS/FAIL lines; exit status non-zero on any FAIL. Stops what it started by PID.
#
#   TOPOALIGN_BIN=target/debug/topoalign crates/driver/scripts/hotplug-check.sh
set -uo pipefail
REPO_DIR=$(cd "$(dirname "$0")/../../.." && pwd)
E2E_DIR=$REPO_DIR/e2e
export E2E_DIR REPO_DIR
. "$E2E_DIR/lib/common.sh"
. "$E2E_DIR/lib/build.sh"
. "$E2E_DIR/lib/cluster.sh"

RUN=$(mktemp -d "${TMPDIR:-/tmp}/topoalign-hotplug.XXXXXX")
export RUN
mkdir -p "$RUN/logs"
trap 'stop_all; [ "${KEEP:-0}" = 1 ] && echo "kept $RUN" || rm -rf "$RUN"' EXIT
resolve_binary_dirs || exit 1
build_go_binaries > "$RUN/logs/build.out" 2>&1 || { tail "$RUN/logs/build.out"; exit 1; }
TOPOALIGN=${TOPOALIGN_BIN:-$TOPOALIGN}
read -r P_ETCD P_PEER P_API < <(free_ports 3)
gen_pki && start_etcd && start_apiserver || { echo "control plane did not start (logs: $RUN/logs)" >&2; exit 1; }
export KUBECONFIG=$RUN/admin.kubeconfig
FAILS=0
ok() { echo "PASS: $*"; }
bad() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }

NODE=hotplug-1
TREE=$RUN/tree
"$TOPOALIGN" profile write pcie-2socket "$TREE" > /dev/null || { bad "profile write"; exit 1; }
read -r port < <(free_ports 1)
"$TOPOALIGN" driver --sysfs-root "$TREE" --node-name "$NODE" --kubeconfig "$KUBECONFIG" --no-plugin \
  --listen "127.0.0.1:$port" --rescan-interval 1s > "$RUN/logs/driver.log" 2>&1 &
register_pid driver $!

# state : "<slices> <devices> <generations...>" of the node's slices
state() {
  "$K8S_BIN/kubectl" get resourceslices --field-selector "spec.nodeName=$NODE" -o json |
    python3 -c 'import json,sys
items=json.load(sys.stdin)["items"]
gens=sorted({i["spec"]["pool"]["generation"] for i in items})
print(len(items), sum(len(i["spec"].get("devices") or []) for i in items), *gens)'
}
devices() { state | awk '{print $2}'; }
gen() { state | awk '{print $3}'; }

wait_until 60 "driver ready" curl -sf "http://127.0.0.1:$port/readyz" || { bad "driver not ready: $(tail -3 "$RUN/logs/driver.log")"; exit 1; }
s0=$(state); d0=$(devices); g0=$(gen)
ok "published: $s0 (slices devices generation)"
sleep 5
[ "$(gen)" = "$g0" ] && ok "5 s of 1 s rescans without a change: generation stays $g0" || bad "generation moved without a change: $(state)"

gpu=$(cd "$TREE/sys/bus/pci/devices" && for d in *; do [ "$(cat "$d/class")" = 0x030200 ] || [ "$(cat "$d/class")" = 0x030000 ] && { echo "$d"; break; }; done)
[ -n "$gpu" ] || { bad "no GPU in the tree"; exit 1; }
link=$(readlink "$TREE/sys/bus/pci/devices/$gpu")
rm "$TREE/sys/bus/pci/devices/$gpu"
t=$(now)
if wait_until 30 "GPU $gpu gone" bash -c "[ \"\$(\"$K8S_BIN/kubectl\" get resourceslices --field-selector spec.nodeName=$NODE -o json | grep -c '\"$(echo "gpu-$gpu" | tr ':.' '--')\"')\" = 0 ]"; then
  sleep 1
  d1=$(devices); g1=$(gen)
  [ "$d1" -lt "$d0" ] && [ "$g1" = $((g0 + 1)) ] && ok "GPU $gpu unplugged: republished in $(since "$t") s, devices $d0 -> $d1, generation $g0 -> $g1" ||
    bad "after unplugging $gpu: $(state), expected fewer than $d0 devices at generation $((g0 + 1))"
else bad "GPU $gpu still published: $(state)"; fi

ln -s "$link" "$TREE/sys/bus/pci/devices/$gpu"
t=$(now)
if wait_until 30 "GPU $gpu back" bash -c "[ \"\$(\"$K8S_BIN/kubectl\" get resourceslices --field-selector spec.nodeName=$NODE -o json | python3 -c 'import json,sys; print(sum(len(i[\"spec\"].get(\"devices\") or []) for i in json.load(sys.stdin)[\"items\"]))')\" = $d0 ]"; then
  sleep 1
  [ "$(gen)" = $((g0 + 2)) ] && ok "GPU $gpu plugged back: $d0 devices again in $(since "$t") s, generation $(gen)" ||
    bad "after re-plugging: $(state), expected generation $((g0 + 2))"
else bad "GPU $gpu not republished: $(state)"; fi

stop_component driver
[ "$(state | awk '{print $1}')" = 0 ] && ok "SIGTERM removed every slice of $NODE" || bad "slices left after SIGTERM: $(state)"
grep -q '"level":"ERROR"' "$RUN/logs/driver.log" && bad "errors in the driver log: $(grep '"level":"ERROR"' "$RUN/logs/driver.log" | head -3)"
echo "$FAILS failed"
exit $((FAILS > 0))
