#!/usr/bin/env bash
# Resident memory of `topoalign driver` while idle after publishing, against a real
# kube-apiserver (etcd + kube-apiserver v1.37.2 from the e2e harness, e2e/lib).
#
#   crates/driver/scripts/idle-rss.sh [PROFILE...]     default: every built-in profile
#   TOPOALIGN_BIN=target/debug/topoalign crates/driver/scripts/idle-rss.sh mi300x-8
#
# For each profile: starts the full agent (publisher + kubelet plugin + HTTP server) for a
# fake node, waits until /readyz says the pool is published, lets it idle for IDLE_S
# seconds (default 20) with a 2 s rescan (so the idle period includes rediscovery and
# LIST rounds), then prints VmRSS and VmHWM from /proc/PID/status and the target (30 MiB).
# Stops every process it started by PID.
set -uo pipefail
REPO_DIR=$(cd "$(dirname "$0")/../../.." && pwd)
E2E_DIR=$REPO_DIR/e2e
export E2E_DIR REPO_DIR
. "$E2E_DIR/lib/common.sh"
. "$E2E_DIR/lib/build.sh"
. "$E2E_DIR/lib/cluster.sh"

IDLE_S=${IDLE_S:-20}
PROFILES=("$@")
[ ${#PROFILES[@]} -eq 0 ] && PROFILES=(mi300x-8 gb300-4 dgx-h100 pcie-2socket)

RUN=$(mktemp -d "${TMPDIR:-/tmp}/topoalign-rss.XXXXXX")
export RUN
mkdir -p "$RUN/logs"
trap 'stop_all; rm -rf "$RUN"' EXIT
resolve_binary_dirs || exit 1
build_go_binaries > "$RUN/logs/build.out" 2>&1 || { tail "$RUN/logs/build.out"; exit 1; }
TOPOALIGN=${TOPOALIGN_BIN:-$TOPOALIGN}
[ -x "$TOPOALIGN" ] || { echo "no topoalign binary at $TOPOALIGN (cargo build --release -p topoalign)" >&2; exit 1; }
read -r P_ETCD P_PEER P_API < <(free_ports 3)
gen_pki && start_etcd && start_apiserver || { echo "control plane did not start (logs: $RUN/logs)" >&2; exit 1; }
export KUBECONFIG=$RUN/admin.kubeconfig

status=0
for p in "${PROFILES[@]}"; do
  node=rss-$p
  d=$RUN/$p
  mkdir -p "$d"
  read -r port < <(free_ports 1)
  "$TOPOALIGN" driver --profile "$p" --node-name "$node" --kubeconfig "$KUBECONFIG" \
    --plugin-registry-dir "$d/registry" --plugin-dir "$d/plugins" --cdi-dir "$d/cdi" --state-dir "$d/state" \
    --listen "127.0.0.1:$port" --rescan-interval 2s > "$RUN/logs/driver-$p.log" 2>&1 &
  pid=$!
  register_pid "driver-$p" "$pid"
  if ! wait_until 60 "driver $p ready" curl -sf "http://127.0.0.1:$port/readyz"; then
    echo "$p: driver not ready (log: $(tail -3 "$RUN/logs/driver-$p.log"))" >&2
    status=1
    continue
  fi
  sleep "$IDLE_S"
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
  hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
  anon=$(awk '/^RssAnon/ {print $2}' "/proc/$pid/status")
  file=$(awk '/^RssFile/ {print $2}' "/proc/$pid/status")
  slices=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^topoalign_driver_resourceslices / {print $2}')
  gen=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^topoalign_driver_pool_generation / {print $2}')
  awk -v p="$p" -v r="$rss" -v h="$hwm" -v a="$anon" -v f="$file" -v s="$slices" -v g="$gen" -v i="$IDLE_S" 'BEGIN {
    printf "%-13s idle %ss after publishing %s slices (generation %s): VmRSS %.1f MiB (anon %.1f, file %.1f), VmHWM %.1f MiB (target < 30 MiB)\n", p, i, s, g, r/1024, a/1024, f/1024, h/1024 }'
  [ "$rss" -lt $((30 * 1024)) ] || status=1
  stop_component "driver-$p"
done
exit $status
