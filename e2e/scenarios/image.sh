#!/usr/bin/env bash
# Scenario image (issue 20): the container image, built with no container daemon and no
# registry, runs the binary it carries.
#
# - scripts/build-image turns the harness's topoalign binary and Debian's runtime packages
#   into an OCI layout and a docker-loadable tarball;
# - the layout is read as a runtime reads it (e2e/lib/oci_image.py): index.json ->
#   manifest -> config and layers, every digest and size checked against its blob, the
#   config's diff_ids against the uncompressed layers, the tarball against the layout;
# - the layers are unpacked in manifest order into a root filesystem, and under chroot
#   (root only; otherwise skipped with the reason) `topoalign --version` and
#   `topoalign driver --profile dgx-h100 --node-name n1 --dry-run` run there as the image's
#   user, so a shared library the image lacks fails the scenario (proven: the same rootfs
#   without libgcc_s must fail);
# - a second build gives the same digests (fixed timestamps), and deploy/ and both Helm
#   charts name the image this build tags.
# Needs no control plane. Standalone: TOPOALIGN=target/debug/topoalign bash e2e/scenarios/image.sh
set -uo pipefail
E2E_DIR=${E2E_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
REPO_DIR=${REPO_DIR:-$(cd "$E2E_DIR/.." && pwd)}
. "$E2E_DIR/lib/common.sh"

TOPOALIGN=${TOPOALIGN:-${TOPOALIGN_BIN:-$REPO_DIR/target/release/topoalign}}
if [ -z "${SCEN_DIR:-}" ]; then
  SCEN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/topoalign-image.XXXXXX")
  trap 'rm -rf "$SCEN_DIR"' EXIT
fi
D=$SCEN_DIR
OCI="python3 $E2E_DIR/lib/oci_image.py"
[ -x "$TOPOALIGN" ] || { fail "image: no topoalign binary at $TOPOALIGN"; exit 1; }

# ---------------------------------------------------------------- build
T=$(now)
TOPOALIGN_BINARY=$TOPOALIGN "$REPO_DIR/scripts/build-image" "$D/image" > "$D/build.out" 2>&1
rc=$?
if [ "$rc" -ne 0 ]; then
  fail "image: scripts/build-image failed (exit $rc): $(tail -c 1500 "$D/build.out")"
  exit 1
fi
BUILD_S=$(since "$T")
# shellcheck disable=SC1091
. "$D/image/image.env"
pass "image: scripts/build-image wrote $IMAGE in $BUILD_S s"

if summary=$($OCI validate "$D/image/oci" "$D/image/topoalign-image.tar" "$IMAGE" 2> "$D/validate.err"); then
  layers=$(jq -r .layers <<< "$summary")
  mib=$(jq -r '.compressed / 1048576 * 10 | round / 10' <<< "$summary")
  raw=$(jq -r '.uncompressed / 1048576 * 10 | round / 10' <<< "$summary")
  pass "image: OCI layout valid: index.json -> manifest $(jq -r .manifest <<< "$summary" | cut -c1-19)… -> config, $layers layers, digests and sizes match their blobs, diff_ids match; the tarball holds the same blobs and a docker manifest.json"
  figure "image $IMAGE: $layers layers, $mib MiB compressed, $raw MiB unpacked, tarball $(du -m "$D/image/topoalign-image.tar" | cut -f1) MiB; build-image $BUILD_S s"
else
  fail "image: the OCI image is not valid: $(cat "$D/validate.err")"
fi

# A second reader, where installed: skopeo (containers/image, what podman and CRI-O use).
if command -v skopeo > /dev/null 2>&1; then
  if a=$(skopeo inspect "oci:$D/image/oci:$IMAGE_TAG" 2>&1) && b=$(skopeo inspect "docker-archive:$D/image/topoalign-image.tar" 2>&1) &&
    c=$(skopeo inspect "oci-archive:$D/image/topoalign-image.tar" 2>&1); then
    if [ "$(jq -r .Digest <<< "$a")" = "$IMAGE_DIGEST" ] && [ "$(jq -r .Digest <<< "$c")" = "$IMAGE_DIGEST" ]; then
      pass "image: skopeo reads the layout (oci:), the tarball as an OCI archive and as a docker archive; digest $IMAGE_DIGEST"
    else fail "image: skopeo sees digests $(jq -r .Digest <<< "$a") / $(jq -r .Digest <<< "$c"), build-image wrote $IMAGE_DIGEST"; fi
  else
    fail "image: skopeo cannot read the image: $(printf '%s\n' "${a:-}" "${b:-}" "${c:-}" | grep -i -m3 error)"
  fi
else
  info "image: skopeo not installed; the image was checked by e2e/lib/oci_image.py only"
fi

# The same inputs give the same image.
if TOPOALIGN_BINARY=$TOPOALIGN "$REPO_DIR/scripts/build-image" "$D/image2" > "$D/build2.out" 2>&1; then
  second=$(sed -n 's/^IMAGE_DIGEST=//p' "$D/image2/image.env")
  if [ "$second" = "$IMAGE_DIGEST" ]; then pass "image: a second build gives the same manifest digest ($IMAGE_DIGEST)"
  else fail "image: two builds of the same binary differ: $IMAGE_DIGEST vs $second"; fi
  rm -rf "$D/image2"
else
  fail "image: the second scripts/build-image failed: $(tail -c 800 "$D/build2.out")"
fi

# ---------------------------------------------------------------- the manifests name this image
bad=()
want_repo=${IMAGE%:*}
grep -q "image: $IMAGE\$" "$REPO_DIR/deploy/daemonset.yaml" || bad+=("deploy/daemonset.yaml does not name $IMAGE")
for values in "$REPO_DIR/deploy/helm/topoalign/values.yaml" "$REPO_DIR/deploy/extender/helm/topoalign-extender/values.yaml"; do
  chart=$(dirname "$values")/Chart.yaml
  rel=${values#"$REPO_DIR"/}
  grep -q "^  repository: $want_repo\$" "$values" || bad+=("$rel: image.repository is not $want_repo")
  app=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$chart")
  tag=$(sed -n '/^image:/,/^[^ ]/s/^  tag: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$values")
  [ "${tag:-$app}" = "$IMAGE_TAG" ] || bad+=("${chart#"$REPO_DIR"/}: the image tag (tag '${tag}', appVersion '$app') is not $IMAGE_TAG")
done
if [ ${#bad[@]} -eq 0 ]; then pass "image: deploy/daemonset.yaml and both Helm charts name $IMAGE"
else fail "image: $(printf '%s; ' "${bad[@]}")"; fi

# ---------------------------------------------------------------- run it
ROOTFS=$D/rootfs
if ! cfg=$($OCI unpack "$D/image/oci" "$ROOTFS" 2> "$D/unpack.err"); then
  fail "image: unpacking the layers: $(cat "$D/unpack.err")"
  exit 1
fi
user=$(jq -r .User <<< "$cfg")
entry=$(jq -r '.Entrypoint[0]' <<< "$cfg")
pass "image: $(jq -r '.Entrypoint | join(" ")' <<< "$cfg") unpacked from the layers in order (user $user, $(du -sm "$ROOTFS" | cut -f1) MiB)"

if [ "$(id -u)" != 0 ]; then
  skip "image: running the binary in the image's root filesystem needs chroot, which needs root (running as uid $(id -u))"
  exit 0
fi
CHROOT=$(command -v chroot) || { fail "image: no chroot command (Debian package coreutils)"; exit 1; }
# in_image ARGS... : the entrypoint under chroot, as the image's user, with the image's environment.
in_image() {
  local envs=()
  mapfile -t envs < <(jq -r '.Env[]' <<< "$cfg")
  env -i "${envs[@]}" "$CHROOT" --userspec="$user" "$ROOTFS" "$entry" "$@"
}
host_version=$("$TOPOALIGN" --version 2>&1)
if out=$(in_image --version 2>&1); then
  if [ "$out" = "$host_version" ]; then pass "image: 'topoalign --version' runs in the image as $user: $out"
  else fail "image: 'topoalign --version' in the image says '$out', the binary on the host '$host_version'"; fi
else
  fail "image: 'topoalign --version' does not run in the image: $out"
fi
T=$(now)
if in_image driver --profile dgx-h100 --node-name n1 --dry-run -o json > "$D/driver.json" 2> "$D/driver.err"; then
  "$TOPOALIGN" driver --profile dgx-h100 --node-name n1 --dry-run -o json > "$D/driver-host.json" 2> /dev/null
  n=$(jq '[.. | objects | select(.kind == "ResourceSlice")] | length' "$D/driver.json" 2> /dev/null || echo 0)
  if [ "${n:-0}" -gt 0 ] && cmp -s "$D/driver.json" "$D/driver-host.json"; then
    pass "image: 'topoalign driver --profile dgx-h100 --node-name n1 --dry-run' runs in the image: $n ResourceSlices, identical to the host's output ($(since "$T") s)"
  else
    fail "image: the driver's dry run in the image gave $n ResourceSlices or differs from the host's (files in $D)"
  fi
else
  fail "image: 'topoalign driver --profile dgx-h100 --node-name n1 --dry-run' fails in the image: $(head -c 1500 "$D/driver.err")"
fi

# The check can fail: the same root filesystem without the GCC runtime library must not run.
BROKEN=$D/rootfs-broken
cp -a "$ROOTFS" "$BROKEN"
lib=$(find "$BROKEN" -name 'libgcc_s.so.1' | head -1)
if [ -z "$lib" ]; then
  info "image: the binary does not load libgcc_s.so.1; negative check skipped"
elif ! ldd "$TOPOALIGN" 2> /dev/null | grep -q libgcc_s; then
  info "image: the binary does not need libgcc_s.so.1; negative check skipped"
else
  rm -f "$lib"
  if out=$(env -i "$CHROOT" --userspec="$user" "$BROKEN" "$entry" --version 2>&1); then
    fail "image: the binary ran in a root filesystem without libgcc_s.so.1, so this scenario cannot detect a missing library: $out"
  elif grep -q 'libgcc_s.so.1' <<< "$out"; then
    pass "image: without libgcc_s.so.1 the binary does not start in the image ($out)"
  else
    fail "image: without libgcc_s.so.1 the binary failed for another reason: $out"
  fi
fi
rm -rf "$BROKEN"
