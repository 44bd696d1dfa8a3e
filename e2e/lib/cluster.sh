# shellcheck shell=bash
# A real control plane on 127.0.0.1: etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, on free ports with a generated PKI.
#
# Needs: RUN (run directory), K8S_BIN, ETCD_BIN (from build.sh), common.sh.
# State lives in the run directory so scenarios (separate processes) can use and restart
# components:
#   $RUN/cluster.env        ports, paths, KUBECONFIG (sourced by scenarios)
#   $RUN/pid/<name>         PID of each running component
#   $RUN/pid.order          names in start order (teardown goes in reverse)
#   $RUN/logs/<name>.log    each component's log (appended across restarts)

# register_pid NAME PID : remember a process for teardown (also used by scenarios).
register_pid() {
  mkdir -p "$RUN/pid"
  echo "$2" > "$RUN/pid/$1"
  grep -qx "$1" "$RUN/pid.order" 2> /dev/null || echo "$1" >> "$RUN/pid.order"
}

# stop_component NAME : stop a registered process by its PID and forget it. A scenario
# (name scenario-*) runs in its own process group and is stopped with that group.
stop_component() {
  local f=$RUN/pid/$1
  [ -f "$f" ] || return 0
  local pid; pid=$(cat "$f")
  case "$1" in
    scenario-*) kill -TERM -- "-$pid" 2> /dev/null ;;
  esac
  stop_pid "$pid" "$1"
  rm -f "$f"
}

# stop_all : every registered process, in reverse start order.
stop_all() {
  [ -f "$RUN/pid.order" ] || return 0
  local name
  tac "$RUN/pid.order" | while read -r name; do stop_component "$name"; done
}

gen_pki() {
  local p=$RUN/pki
  mkdir -p "$p"
  (
    cd "$p" || exit 1
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=topoalign-e2e-ca" 2> /dev/null &&
      printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' > serving.ext &&
      printf 'extendedKeyUsage=clientAuth\n' > client.ext &&
      openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2> /dev/null &&
      openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 2 -extfile serving.ext 2> /dev/null || exit 1
    local c n subj
    for c in "admin:/O=system:masters/CN=e2e-admin" "scheduler:/CN=system:kube-scheduler" "kcm:/CN=system:kube-controller-manager"; do
      n=${c%%:*}; subj=${c#*:}
      openssl req -newkey rsa:2048 -nodes -keyout "$n.key" -out "$n.csr" -subj "$subj" 2> /dev/null &&
        openssl x509 -req -in "$n.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$n.crt" -days 2 -extfile client.ext 2> /dev/null || exit 1
    done
    openssl genrsa -out sa.key 2048 2> /dev/null && openssl rsa -in sa.key -pubout -out sa.pub 2> /dev/null
  ) || return 1
  local n
  for n in admin scheduler kcm; do
    cat > "$RUN/$n.kubeconfig" << EOF
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: "https://127.0.0.1:$P_API", certificate-authority: "$p/ca.crt"}
users:
- name: $n
  user: {client-certificate: "$p/$n.crt", client-key: "$p/$n.key"}
contexts:
- name: e2e
  context: {cluster: e2e, user: $n}
current-context: e2e
EOF
  done
}

start_etcd() {
  local extra=()
  "$ETCD_BIN/etcd" --help 2>&1 | grep -q -- '--unsafe-no-fsync' && extra+=(--unsafe-no-fsync)
  "$ETCD_BIN/etcd" --name e2e --data-dir "$RUN/etcd-data" \
    --listen-client-urls "http://127.0.0.1:$P_ETCD" --advertise-client-urls "http://127.0.0.1:$P_ETCD" \
    --listen-peer-urls "http://127.0.0.1:$P_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$P_PEER" \
    --initial-cluster "e2e=http://127.0.0.1:$P_PEER" "${extra[@]}" >> "$RUN/logs/etcd.log" 2>&1 &
  register_pid etcd $!
  wait_until 30 "etcd /health" curl -sf "http://127.0.0.1:$P_ETCD/health"
}

apiserver_ready() {
  [ "$(curl -s --max-time 2 --cacert "$RUN/pki/ca.crt" --cert "$RUN/pki/admin.crt" --key "$RUN/pki/admin.key" "https://127.0.0.1:$P_API/readyz")" = ok ]
}

# start_apiserver [ARG...] : kube-apiserver, with ARGs appended (e.g. a scenario's
# --feature-gates=...; a plain start_apiserver restores the defaults).
start_apiserver() {
  "$K8S_BIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$P_ETCD" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$P_API" \
    --endpoint-reconciler-type=none \
    --tls-cert-file="$RUN/pki/apiserver.crt" --tls-private-key-file="$RUN/pki/apiserver.key" \
    --client-ca-file="$RUN/pki/ca.crt" \
    --service-account-key-file="$RUN/pki/sa.pub" --service-account-signing-key-file="$RUN/pki/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-cluster-ip-range=10.96.0.0/24 \
    --authorization-mode=Node,RBAC \
    --runtime-config=resource.k8s.io/v1=true,scheduling.k8s.io/v1beta1=true \
    --feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true \
    --profiling=false "$@" >> "$RUN/logs/kube-apiserver.log" 2>&1 &
  register_pid kube-apiserver $!
  wait_until 90 "kube-apiserver /readyz" apiserver_ready
}

start_scheduler() {
  "$K8S_BIN/kube-scheduler" --kubeconfig="$RUN/scheduler.kubeconfig" \
    --authentication-kubeconfig="$RUN/scheduler.kubeconfig" --authorization-kubeconfig="$RUN/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$P_SCHED" --leader-elect=false -v=2 >> "$RUN/logs/kube-scheduler.log" 2>&1 &
  register_pid kube-scheduler $!
  wait_until 60 "kube-scheduler /readyz" bash -c "[ \"\$(curl -sk --max-time 2 https://127.0.0.1:$P_SCHED/readyz)\" = ok ]"
}

# start_extra_scheduler NAME CONFIG [ARG...] : a second kube-scheduler next to the stock one,
# with its own KubeSchedulerConfiguration (its own profile names, e.g. one wired to an
# extender; CONFIG must set clientConnection.kubeconfig and leaderElection.leaderElect:
# false) and ARGs appended (e.g. --feature-gates=...). Registered as NAME (log
# $RUN/logs/NAME.log); stop it with `stop_component NAME`.
start_extra_scheduler() {
  local name=$1 config=$2 port
  shift 2
  port=$(free_ports 1)
  "$K8S_BIN/kube-scheduler" --config="$config" \
    --authentication-kubeconfig="$RUN/scheduler.kubeconfig" --authorization-kubeconfig="$RUN/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$port" -v=2 "$@" >> "$RUN/logs/$name.log" 2>&1 &
  register_pid "$name" $!
  wait_until 60 "$name /readyz" bash -c "[ \"\$(curl -sk --max-time 2 https://127.0.0.1:$port/readyz)\" = ok ]"
}

start_kcm() {
  # No node-lifecycle / taint-eviction controllers: there is no kubelet, nodes would go NotReady.
  # GenericWorkload: the resourceclaim controller makes claims for pods of a PodGroup only
  # with it (the stock kube-scheduler keeps its defaults; the gang scenario runs its own).
  "$K8S_BIN/kube-controller-manager" --kubeconfig="$RUN/kcm.kubeconfig" \
    --authentication-kubeconfig="$RUN/kcm.kubeconfig" --authorization-kubeconfig="$RUN/kcm.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port="$P_KCM" --leader-elect=false \
    --controllers=resourceclaim-controller,serviceaccount-controller,serviceaccount-token-controller,namespace-controller,garbage-collector-controller,root-ca-certificate-publisher-controller,device-taint-eviction-controller \
    --service-account-private-key-file="$RUN/pki/sa.key" --root-ca-file="$RUN/pki/ca.crt" \
    --use-service-account-credentials=true --feature-gates=GenericWorkload=true >> "$RUN/logs/kube-controller-manager.log" 2>&1 &
  register_pid kube-controller-manager $!
  wait_until 60 "kube-controller-manager /healthz" bash -c "[ \"\$(curl -sk --max-time 2 https://127.0.0.1:$P_KCM/healthz)\" = ok ]"
}

# restart_clients : kube-scheduler and the controller manager started afresh after an API
# server restart. Their reflectors would recover by themselves, but only after client-go's
# relist back-off (up to a minute): what the scenarios test is topoalign, not how fast
# client-go reconnects, and a later scenario's first pod must not go unseen that long.
restart_clients() {
  stop_component kube-scheduler
  stop_component kube-controller-manager
  start_scheduler && start_kcm
}

# start_cluster : ports, PKI, the four components; writes $RUN/cluster.env.
start_cluster() {
  local t0; t0=$(now)
  mkdir -p "$RUN/logs"
  read -r P_ETCD P_PEER P_API P_SCHED P_KCM < <(free_ports 5)
  gen_pki || { fail "control plane: generating the PKI with openssl failed"; return 1; }
  cat > "$RUN/cluster.env" << EOF
P_ETCD=$P_ETCD
P_PEER=$P_PEER
P_API=$P_API
P_SCHED=$P_SCHED
P_KCM=$P_KCM
export KUBECONFIG=$RUN/admin.kubeconfig
EOF
  log "control plane ports: etcd=$P_ETCD apiserver=$P_API scheduler=$P_SCHED kcm=$P_KCM"
  local c
  for c in etcd apiserver scheduler kcm; do
    if ! "start_$c"; then
      fail "control plane: $c did not become healthy (log: $RUN/logs)"
      return 1
    fi
  done
  pass "control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager) healthy in $(since "$t0") s"
}
