# Shared by the placement scenarios (device plugins and DRA): start `topoalign extender`,
# wire a second kube-scheduler to it from a deploy/extender/ configuration, read its
# metrics, and report the stock-vs-extender comparison of a placement script.
# Needs common.sh and cluster.sh sourced, and $RUN, $TOPOALIGN, $KUBECONFIG.

# start_extender NAME PORT [ARGS...] : runs `topoalign extender` on 127.0.0.1:PORT (log
# $RUN/logs/NAME.log) and waits up to 30 s for /readyz.
start_extender() {
  local name=$1 port=$2
  shift 2
  "$TOPOALIGN" extender --kubeconfig "$KUBECONFIG" --listen "127.0.0.1:$port" "$@" >> "$RUN/logs/$name.log" 2>&1 &
  register_pid "$name" $!
  wait_until 30 "$name /readyz" curl -sf "http://127.0.0.1:$port/readyz"
}

# wire_scheduler PROFILE CONFIG PORT OUT : writes OUT, deploy/extender/CONFIG with the
# extender at 127.0.0.1:PORT, no leader election and the scheduler's kubeconfig, and
# starts a kube-scheduler with it (log $RUN/logs/PROFILE.log).
wire_scheduler() {
  local profile=$1 config=$2 port=$3 out=$4
  python3 - "$REPO_DIR/deploy/extender/$config" "$port" "$RUN/scheduler.kubeconfig" > "$out" << 'PY' || return 1
import re, sys
text = open(sys.argv[1]).read()
def sub(pattern, repl):
    global text
    text, n = re.subn(pattern, repl, text, flags=re.M)
    if n != 1:
        sys.exit(f"{sys.argv[1]}: expected one match of {pattern!r}, found {n}")
sub(r"^(\s*- )urlPrefix: .*$", r"\g<1>urlPrefix: http://127.0.0.1:" + sys.argv[2])
sub(r"^(\s*)leaderElect: true$", r"\g<1>leaderElect: false")
sub(r"^kind: KubeSchedulerConfiguration$", "kind: KubeSchedulerConfiguration\nclientConnection:\n  kubeconfig: " + sys.argv[3])
print(text)
PY
  start_extra_scheduler "$profile" "$out"
}

# metric_total FILE NAME [FILTER] : the sum of the samples of metric NAME in FILE (an
# OpenMetrics text) whose label set contains FILTER.
metric_total() {
  awk -v m="$2" -v f="${3:-}" 'index($1, m) == 1 && index($1, f) {s+=$2} END {printf "%d", s}' "$1"
}

# metric_samples FILE NAME : the samples of metric NAME, labels and values on one line.
metric_samples() { grep -E "^$2" "$1" | sed "s/^$2//" | tr '\n' ' '; }

# http_errors FILE : extender calls answered 4xx or 5xx.
http_errors() {
  awk '$1 ~ /^topoalign_extender_requests_total/ && $1 ~ /code="[45]/ {s+=$2} END {printf "%d", s}' "$1"
}

# report_compare SCEN FILE : turns a placement script's `compare` output into the
# harness's lines (FIGURE, INFO, PASS for "VERDICT ok", TARGET MISSED for "VERDICT worse").
report_compare() {
  local scen=$1 file=$2 line
  while IFS= read -r line; do
    case "$line" in
      "FIGURE "*) figure "${line#FIGURE }" ;;
      "INFO "*) info "${line#INFO }" ;;
      "VERDICT ok "*) pass "$scen: ${line#VERDICT ok }" ;;
      "VERDICT worse "*) missed "$scen: the extender does not beat the stock scheduler: ${line#VERDICT worse }" ;;
    esac
  done < "$file"
  grep -q '^VERDICT' "$file" || fail "$scen: no verdict from the comparison ($file)"
}
