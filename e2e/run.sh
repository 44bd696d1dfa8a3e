#!/usr/bin/env bash
# topoalign end-to-end harness: a real Kubernetes control plane and the kubelet's own code.
#
#   e2e/run.sh                  build what is missing, run every scenario
#   e2e/run.sh tm-parity speed  run only the named scenarios
#   e2e/run.sh build            only build (Kubernetes, etcd, Go stand-ins, topoalign)
#   e2e/run.sh list             list the scenarios
#
# Scenarios: objects (1), alignment (2), shapes (3), kubelet (4), tm-parity (5), speed (6),
# faults (7), placement, placement-dra and podresources (issue 11), cdi, image, explain and
# gate-off (issue 20), hold (issue 22), mig (issue 23), gang (issue 24), cpus, extended and webhook (issue 33).
# Each prints PASS/FAIL and FIGURE lines;
# the last line of the run is exactly "N passed, N failed"; non-zero exit on any failure.
#
# Environment:
#   E2E_CARGO_PROFILE=release|debug  cargo profile for topoalign (default release)
#   TOPOALIGN_BIN=PATH               use this topoalign binary instead of building one
#   TOPOALIGN_E2E_CACHE=DIR          binary cache (default ${XDG_CACHE_HOME:-$HOME/.cache}/topoalign-e2e)
#   E2E_RUN_ROOT=DIR                 where the run directory is made (default $TMPDIR or /tmp)
#   KEEP=1                           keep the run directory (logs, certs, yaml) even on success
#   E2E_ALLOW_MISSING=1              skip (not fail) scenarios whose topoalign command is absent
#   TM_PARITY_CASES=N                random cases for tm-parity (default 20000)
#
# Everything listens on 127.0.0.1 on free ports. Every process is stopped by its PID in
# reverse start order on exit, failure or interrupt. On failure the run directory with
# every component's log is kept and its path printed.
set -uo pipefail

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$E2E_DIR/.." && pwd)
export E2E_DIR REPO_DIR
# shellcheck source=lib/common.sh
. "$E2E_DIR/lib/common.sh"
# shellcheck source=lib/build.sh
. "$E2E_DIR/lib/build.sh"
# shellcheck source=lib/cluster.sh
. "$E2E_DIR/lib/cluster.sh"

# Host tools the scenarios use: installed from Debian's packages when missing (as root),
# otherwise a clear error naming them.
need_tools() {
  local missing=() t
  for t in jq openssl curl python3 go cargo; do command -v "$t" > /dev/null 2>&1 || missing+=("$t"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  local pkgs=() m
  for m in "${missing[@]}"; do case "$m" in jq | openssl | curl | python3) pkgs+=("$m") ;; esac; done
  if [ ${#pkgs[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null 2>&1; then
    echo "installing ${pkgs[*]} from Debian's packages" >&2
    apt-get update -qq > /dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" > /dev/null || true
  fi
  missing=()
  for t in jq openssl curl python3 go cargo; do command -v "$t" > /dev/null 2>&1 || missing+=("$t"); done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "e2e: missing tools: ${missing[*]} (expected on PATH: jq, openssl, curl, python3, go, cargo)" >&2
    exit 2
  fi
}

ALL_SCENARIOS=(objects alignment shapes kubelet tm-parity speed faults placement placement-dra podresources cdi image explain gate-off hold mig gang cpus extended webhook vendor)
# scenarios that run without the control plane
NO_CLUSTER=" tm-parity image "

usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; }

SELECTED=()
BUILD_ONLY=0
for a in "$@"; do
  case "$a" in
    -h | --help) usage; exit 0 ;;
    list) printf '%s\n' "${ALL_SCENARIOS[@]}"; exit 0 ;;
    build) BUILD_ONLY=1 ;;
    all) SELECTED+=("${ALL_SCENARIOS[@]}") ;;
    *)
      if [ -f "$E2E_DIR/scenarios/$a.sh" ]; then SELECTED+=("$a")
      else echo "unknown scenario '$a'; expected one of: ${ALL_SCENARIOS[*]}, build, list" >&2; exit 2; fi ;;
  esac
done
[ ${#SELECTED[@]} -eq 0 ] && [ "$BUILD_ONLY" = 0 ] && SELECTED=("${ALL_SCENARIOS[@]}")

need_tools

PASSED=0
FAILED=0
MISSED=0
# count: read a scenario's output, echo it, and tally its PASS/FAIL lines.
count() {
  local line
  while IFS= read -r line; do
    printf '%s\n' "$line"
    case "$line" in
      PASS:*) PASSED=$((PASSED + 1)) ;;
      FAIL:*) FAILED=$((FAILED + 1)) ;;
      "TARGET MISSED:"*) MISSED=$((MISSED + 1)) ;;
    esac
  done
}

RUN=$(mktemp -d "${E2E_RUN_ROOT:-${TMPDIR:-/tmp}}/topoalign-e2e.XXXXXX")
export RUN
mkdir -p "$RUN/logs"
T_START=$(now)

exec 3>&1 4>&2 # the run's own stdout/stderr, for finish (it may run inside a redirection)
finish() {
  local rc=$?
  exec 1>&3 2>&4
  trap - EXIT
  trap '' INT TERM # an interrupt during teardown must not leave processes behind
  stop_all
  echo "TIMING total: $(since "$T_START") s"
  if [ "$FAILED" -gt 0 ] || [ "${KEEP:-0}" = 1 ] || [ "$rc" -ne 0 ]; then
    echo "logs and state kept in $RUN (component logs: $RUN/logs)"
  else
    rm -rf "$RUN"
  fi
  [ "$MISSED" -gt 0 ] && echo "performance targets not yet met: $MISSED (TARGET MISSED lines above)"
  echo "$PASSED passed, $FAILED failed"
  if [ "$FAILED" -gt 0 ] || [ "$rc" -ne 0 ]; then exit 1; fi
  exit 0
}
trap finish EXIT
trap 'echo "FAIL: interrupted" >&3; FAILED=$((FAILED + 1)); exit 130' INT TERM

# ---------------------------------------------------------------- build
T_BUILD=$(now)
resolve_binary_dirs || { count <<< "FAIL: resolving build directories (go and cargo must be on PATH)"; exit 1; }
build_go_binaries 2>&1 | tee "$RUN/logs/build-go.out"
if [ "${PIPESTATUS[0]}" != 0 ]; then
  count <<< "FAIL: building the Kubernetes/etcd/Go stand-in binaries (log: $RUN/logs/build-go.out)"
  exit 1
fi
if [ -n "${TOPOALIGN_BIN:-}" ]; then
  TOPOALIGN=$TOPOALIGN_BIN
  echo "TIMING build topoalign: skipped, using TOPOALIGN_BIN=$TOPOALIGN" > "$RUN/logs/build-topoalign.out"
elif ! build_topoalign > "$RUN/logs/build-topoalign.out" 2>&1; then
  tail -40 "$RUN/logs/build-topoalign.out" >&2
  count <<< "FAIL: cargo build of topoalign (log: $RUN/logs/build-topoalign.out)"
  exit 1
fi
grep '^TIMING' "$RUN/logs/build-topoalign.out"
export K8S_BIN ETCD_BIN HELM_BIN TOOLS_BIN CDI_BIN TOPOALIGN K8S_VERSION
echo "TIMING build (all, cached or not): $(since "$T_BUILD") s"
[ "$BUILD_ONLY" = 1 ] && [ ${#SELECTED[@]} -eq 0 ] && exit 0

# ---------------------------------------------------------------- control plane
need_cluster=0
for s in "${SELECTED[@]}"; do
  case "$NO_CLUSTER" in *" $s "*) ;; *) need_cluster=1 ;; esac
done
if [ "$need_cluster" = 1 ]; then
  start_cluster > "$RUN/logs/control-plane.out" 2>&1
  count < "$RUN/logs/control-plane.out"
  [ -f "$RUN/pid/kube-controller-manager" ] || { echo "control plane did not start; logs in $RUN/logs" >&2; exit 1; }
fi

# ---------------------------------------------------------------- scenarios
for s in "${SELECTED[@]}"; do
  echo "=== scenario $s"
  t=$(now)
  before=$FAILED
  mkdir -p "$RUN/$s"
  # In the background, registered like a component, so an interrupt stops it too.
  # setsid: its own process group, so stopping it also stops what it runs in the foreground.
  SCEN_DIR=$RUN/$s setsid bash "$E2E_DIR/scenarios/$s.sh" > "$RUN/logs/scenario-$s.out" 2>&1 &
  register_pid "scenario-$s" $!
  tail -n +1 --pid=$! -f "$RUN/logs/scenario-$s.out" &
  TAIL_PID=$!
  wait "$(cat "$RUN/pid/scenario-$s")"
  rc=$?
  wait "$TAIL_PID"
  rm -f "$RUN/pid/scenario-$s"
  count < "$RUN/logs/scenario-$s.out" > /dev/null
  if [ "$rc" -ne 0 ] && [ "$FAILED" -eq "$before" ]; then
    count <<< "FAIL: scenario $s exited with status $rc"
  fi
  echo "TIMING scenario $s: $(since "$t") s"
  if [ "$FAILED" -gt "$before" ]; then
    echo "scenario $s failed; its files: $RUN/$s, component logs: $RUN/logs"
  fi
done
