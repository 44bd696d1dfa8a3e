# shellcheck shell=bash
# Helpers shared by run.sh and every scenario: timing, logging, PASS/FAIL lines, waiting.
#
# Scenarios report with `pass`/`fail`/`skip`/`info`/`figure`; run.sh counts the PASS and
# FAIL lines of each scenario's output for the closing summary.

now() { date +%s.%N; }
# since T0 : seconds since T0 with two decimals
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.2f", b-a}'; }
# ms_since T0 : milliseconds since T0, integer
ms_since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%d", (b-a)*1000}'; }
log() { echo "[$(date +%T)] $*" >&2; }
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; }
skip() { echo "SKIP: $*"; }
info() { echo "INFO: $*"; }
figure() { echo "FIGURE: $*"; }
# A performance target of an issue that is measured but not yet met: reported, not failed
# (the issue stays open with the figure); functional failures use fail.
missed() { echo "TARGET MISSED: $*"; }

# wait_until TIMEOUT_S DESCRIPTION COMMAND... : poll COMMAND every 0.1 s until it succeeds.
wait_until() {
  local t=$1 d=$2; shift 2
  local end; end=$(awk -v a="$(now)" -v t="$t" 'BEGIN{printf "%.3f", a+t}')
  while :; do
    "$@" > /dev/null 2>&1 && return 0
    awk -v a="$(now)" -v e="$end" 'BEGIN{exit !(a>e)}' && { log "timeout after ${t}s: $d"; return 1; }
    sleep 0.1
  done
}

# free_ports N : print N free TCP ports on 127.0.0.1
free_ports() {
  python3 - "$1" << 'EOF'
import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in ss])
for s in ss:
    s.close()
EOF
}

# rss_mib PID : resident memory of PID in MiB
rss_mib() { ps -o rss= -p "$1" 2> /dev/null | awk '{printf "%.0f", $1/1024}'; }

# stop_pid PID NAME : SIGTERM, wait up to 15 s, then SIGKILL. Only the given PID.
stop_pid() {
  local pid=$1 name=${2:-process}
  kill -TERM "$pid" 2> /dev/null || return 0
  local _
  for _ in $(seq 1 150); do kill -0 "$pid" 2> /dev/null || return 0; sleep 0.1; done
  log "$name (pid $pid) did not stop in 15 s, SIGKILL"
  kill -KILL "$pid" 2> /dev/null
  return 0
}

# need_topoalign_cmd SUBCOMMAND... : true when `topoalign SUBCOMMAND --help` works.
# Otherwise: with E2E_ALLOW_MISSING=1 prints SKIP and exits the scenario with 0;
# without it prints FAIL and exits 1 (the final run must run every scenario).
need_topoalign_cmd() {
  if "$TOPOALIGN" "$@" --help > /dev/null 2>&1; then return 0; fi
  if [ "${E2E_ALLOW_MISSING:-0}" = 1 ]; then
    skip "'topoalign $*' is not available in this build (E2E_ALLOW_MISSING=1)"
    exit 0
  fi
  fail "'topoalign $*' is not available in this build (set E2E_ALLOW_MISSING=1 to skip)"
  exit 1
}
