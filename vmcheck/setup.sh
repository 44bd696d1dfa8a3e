#!/bin/bash
# Prepares the machine for the QEMU/libvirt check, caching in $W: Debian packages (QEMU,
# libvirt, busybox, cpio), the Debian kernel unpacked from its .deb (apt-get download +
# dpkg-deb -x, never installed), and a running libvirtd (+ virtlogd) without systemd.
# Exit 3 (and a reason on stderr) when QEMU cannot be installed here.
set -euo pipefail
W=${W:?set W to the work directory}
mkdir -p "$W"
st() { echo "STAGE $1: $(( $(date +%s%N)/1000000 - T ))ms" >&2; T=$(( $(date +%s%N)/1000000 )); }
T=$(( $(date +%s%N)/1000000 ))

have_all() {
  for c in qemu-system-x86_64 busybox cpio virsh virt-xml-validate libvirtd virtlogd; do
    command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || return 1
  done
  [ -e /bin/busybox ] && file_is_static /bin/busybox
}
file_is_static() { ! ldd "$1" >/dev/null 2>&1; }

if ! have_all; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "SKIP: QEMU/libvirt are not installed and this is not a root Debian machine (no apt-get as root)" >&2
    exit 3
  fi
  if ! apt-get update -qq >&2; then
    echo "SKIP: apt-get update failed: the Debian archive is not reachable" >&2
    exit 3
  fi
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      qemu-system-x86 qemu-utils busybox-static cpio libvirt-clients libxml2-utils \
      libvirt-daemon libvirt-daemon-driver-qemu libvirt-daemon-system >/dev/null; then
    echo "SKIP: apt-get install of qemu-system-x86/libvirt failed" >&2
    exit 3
  fi
  st apt-install
fi

if [ ! -d "$W/kernel-root/boot" ]; then
  KPKG=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-/{print $2; exit}')
  rm -rf "$W/debs" "$W/kernel-root"; mkdir -p "$W/debs"
  (cd "$W/debs" && apt-get download -qq "$KPKG")
  mkdir -p "$W/kernel-root"; dpkg-deb -x "$W"/debs/"${KPKG}"_*.deb "$W/kernel-root"
  KV=$(ls "$W/kernel-root/lib/modules" | head -1); busybox depmod -b "$W/kernel-root" "$KV"
  st kernel-download+extract
fi

# libvirtd without systemd: start it (and virtlogd) once; reuse one already running.
# QEMU runs as root here: where /dev/kvm exists but only root may open it, libvirt's
# capability probe (as root) sees KVM while its cache check (as libvirt-qemu) does not,
# and every call re-probes QEMU for ~2 minutes. The changed qemu.conf is bind-mounted
# in a private mount namespace so the system's file stays as it is.
if ! virsh -c qemu:///system version >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "SKIP: no libvirtd is reachable at qemu:///system and starting one needs root" >&2
    exit 3
  fi
  mkdir -p /run/libvirt
  # The daemons outlive this run: close run.sh's lock (fd 9) for them, or they would
  # hold it forever and every later run would wait on it.
  pgrep -x virtlogd >/dev/null || virtlogd --daemon 9>&-
  { cat /etc/libvirt/qemu.conf; printf 'user = "root"\ngroup = "root"\n'; } > "$W/qemu.conf"
  if ! unshare -m --propagation private sh -c \
      "mount --bind '$W/qemu.conf' /etc/libvirt/qemu.conf && exec libvirtd --daemon" 9>&-; then
    echo "note: no private mount namespace; libvirtd runs with the system qemu.conf" >&2
    pgrep -x libvirtd >/dev/null || libvirtd --daemon 9>&-
  fi
  for _ in $(seq 1 50); do virsh -c qemu:///system version >/dev/null 2>&1 && break; sleep 0.2; done
  virsh -c qemu:///system version >/dev/null
  st libvirtd-start
fi
