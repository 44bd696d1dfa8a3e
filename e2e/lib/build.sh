# shellcheck shell=bash
# Build (or find in the cache) every binary the e2e harness runs.
#
# Sourced by run.sh. Binaries are cached outside the repository, one directory per
# content key, so a warm run finds them in seconds and a changed go.sum builds anew:
#   $E2E_CACHE/k8s-<key>/    kube-apiserver kube-scheduler kube-controller-manager kubectl
#   $E2E_CACHE/etcd-<key>/   etcd
#   $E2E_CACHE/helm-<key>/   helm (renders the charts under deploy/ for the objects scenario)
#   $E2E_CACHE/kueue-<key>/  kueue (the Kueue controller manager, sigs.k8s.io/kueue/cmd/kueue from
#                            the Go module proxy, for the gang scenario), its CRDs (crd/*.yaml)
#                            and webhook configurations (webhook.yaml) from the same module
#   $E2E_CACHE/tools-<key>/  the Go stand-ins under e2e/go/cmd (kubeletdra, tmparity, allocbench,
#                            podresources)
#   $E2E_CACHE/cdi-<key>/    cdiinject (e2e/cdi, its own module): CDI ids injected into an OCI
#                            spec by the CDI library containerd and CRI-O use (the cdi scenario)
# A directory is complete when its `.done` file exists (builds go to a temporary directory
# that is renamed at the end, so an interrupted build is never mistaken for a finished one).

E2E_CACHE=${TOPOALIGN_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/topoalign-e2e}
K8S_VERSION=v1.37.2  # must match e2e/go/go.mod
ETCD_VERSION=v3.7.3  # must match e2e/etcd/go.mod
KUEUE_VERSION=v0.17.0  # must match e2e/kueue/go.mod
# Builds run niced: the machine is shared and the cold Kubernetes build takes minutes.
GO_NICE=${E2E_GO_NICE:-10}
# Cargo profile for the topoalign binary: release (default; the speed scenario times it)
# or debug (E2E_CARGO_PROFILE=debug).
E2E_CARGO_PROFILE=${E2E_CARGO_PROFILE:-release}

# content_key FILE... : a short hash of the files' contents plus the Go version.
content_key() {
  { go version; cat "$@"; } | sha256sum | cut -c1-16
}

# build_into DIR LOGNAME COMMAND... : run COMMAND (which writes into $OUTDIR) and publish
# its output as DIR atomically. Returns non-zero with the log tail on failure.
build_into() {
  local dir=$1 name=$2; shift 2
  [ -f "$dir/.done" ] && return 0
  mkdir -p "$E2E_CACHE"
  local tmp; tmp=$(mktemp -d "$E2E_CACHE/.build-$name.XXXXXX")
  local t0; t0=$(now)
  log "building $name (log: $tmp/build.log)"
  if ! OUTDIR=$tmp "$@" > "$tmp/build.log" 2>&1; then
    echo "build of $name failed; last lines of $tmp/build.log:" >&2
    tail -30 "$tmp/build.log" >&2
    return 1
  fi
  touch "$tmp/.done"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  echo "TIMING build $name: $(since "$t0") s"
}

_go_build_k8s() {
  local v=${K8S_VERSION#v} major minor ldf p
  major=${v%%.*}; minor=${v#*.}; minor=${minor%%.*}
  ldf="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  cd "$E2E_DIR/go" &&
    nice -n "$GO_NICE" go build -mod=readonly -trimpath -ldflags="$ldf" -o "$OUTDIR/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler \
      k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
}

_go_build_etcd() {
  # `go install go.etcd.io/etcd/server/v3@...` is refused (its go.mod has replace
  # directives), so e2e/etcd is a module that requires it and builds it as a dependency.
  cd "$E2E_DIR/etcd" &&
    nice -n "$GO_NICE" go build -mod=readonly -trimpath -ldflags="-s -w" -o "$OUTDIR/etcd" go.etcd.io/etcd/server/v3
}

_go_build_helm() {
  cd "$E2E_DIR/helm" &&
    nice -n "$GO_NICE" go build -mod=readonly -trimpath -ldflags="-s -w" -o "$OUTDIR/helm" helm.sh/helm/v3/cmd/helm
}

# The Kueue manager, and the CRDs and webhook configurations of the same module version
# (config/components/crd/bases, config/components/webhook/manifests.yaml in the module
# source the proxy serves).
_go_build_kueue() {
  cd "$E2E_DIR/kueue" &&
    nice -n "$GO_NICE" go build -mod=readonly -trimpath \
      -ldflags="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION" \
      -o "$OUTDIR/kueue" sigs.k8s.io/kueue/cmd/kueue || return 1
  local src
  src=$(go list -mod=readonly -m -f '{{.Dir}}' sigs.k8s.io/kueue) && [ -d "$src/config/components/crd/bases" ] ||
    { echo "the sigs.k8s.io/kueue module source has no config/components/crd/bases" >&2; return 1; }
  mkdir -p "$OUTDIR/crd" && cp "$src"/config/components/crd/bases/*.yaml "$OUTDIR/crd/" &&
    cp "$src/config/components/webhook/manifests.yaml" "$OUTDIR/webhook.yaml" && chmod -R u+w "$OUTDIR"
}

_go_build_cdi() {
  cd "$E2E_DIR/cdi" &&
    nice -n "$GO_NICE" go build -mod=readonly -trimpath -ldflags="-s -w" -o "$OUTDIR/cdiinject" .
}

_go_build_tools() {
  cd "$E2E_DIR/go" &&
    nice -n "$GO_NICE" go build -mod=readonly -trimpath -o "$OUTDIR/" ./cmd/...
}

# resolve_binary_dirs: sets K8S_BIN, ETCD_BIN, HELM_BIN, KUEUE_BIN, TOOLS_BIN, CDI_BIN (cache
# dirs) and TOPOALIGN. CDI_BIN and KUEUE_BIN are exported here (scenarios read them).
resolve_binary_dirs() {
  command -v go > /dev/null || { echo "go not found in PATH (Go >= 1.26 is needed to build Kubernetes)" >&2; return 1; }
  K8S_BIN=$E2E_CACHE/k8s-$(content_key "$E2E_DIR/go/go.mod" "$E2E_DIR/go/go.sum")
  ETCD_BIN=$E2E_CACHE/etcd-$(content_key "$E2E_DIR/etcd/go.mod" "$E2E_DIR/etcd/go.sum")
  HELM_BIN=$E2E_CACHE/helm-$(content_key "$E2E_DIR/helm/go.mod" "$E2E_DIR/helm/go.sum")
  CDI_BIN=$E2E_CACHE/cdi-$(content_key "$E2E_DIR/cdi/go.mod" "$E2E_DIR/cdi/go.sum" "$E2E_DIR/cdi/main.go")
  KUEUE_BIN=$E2E_CACHE/kueue-$(content_key "$E2E_DIR/kueue/go.mod" "$E2E_DIR/kueue/go.sum")
  export CDI_BIN KUEUE_BIN
  local tool_files
  # shellcheck disable=SC2046
  tool_files=$(cd "$E2E_DIR/go" && find cmd -name '*.go' | LC_ALL=C sort)
  # shellcheck disable=SC2086
  TOOLS_BIN=$E2E_CACHE/tools-$(cd "$E2E_DIR/go" && content_key go.mod go.sum $tool_files)
  local target
  target=$(cd "$REPO_DIR" && cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])') || return 1
  if [ "$E2E_CARGO_PROFILE" = release ]; then TOPOALIGN=$target/release/topoalign; else TOPOALIGN=$target/debug/topoalign; fi
}

# build_go_binaries: builds whatever of K8S_BIN, ETCD_BIN, TOOLS_BIN, HELM_BIN, CDI_BIN,
# KUEUE_BIN is not in the cache.
build_go_binaries() {
  build_into "$K8S_BIN" "kubernetes-$K8S_VERSION" _go_build_k8s || return 1
  build_into "$ETCD_BIN" "etcd-$ETCD_VERSION" _go_build_etcd || return 1
  build_into "$TOOLS_BIN" "go-stand-ins" _go_build_tools || return 1
  build_into "$HELM_BIN" "helm" _go_build_helm || return 1
  build_into "$CDI_BIN" "cdiinject" _go_build_cdi || return 1
  build_into "$KUEUE_BIN" "kueue-$KUEUE_VERSION" _go_build_kueue || return 1
}

# build_topoalign: cargo build of the binary at TOPOALIGN (from this checkout).
build_topoalign() {
  local t0; t0=$(now)
  local flag=()
  [ "$E2E_CARGO_PROFILE" = release ] && flag=(--release)
  log "building topoalign with cargo (${E2E_CARGO_PROFILE})"
  (cd "$REPO_DIR" && cargo build "${flag[@]}" -p topoalign --bin topoalign) || return 1
  [ -x "$TOPOALIGN" ] || { echo "cargo did not produce $TOPOALIGN" >&2; return 1; }
  echo "TIMING build topoalign ($E2E_CARGO_PROFILE): $(since "$t0") s"
}
