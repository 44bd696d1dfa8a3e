#!/bin/bash
# The QEMU/libvirt proof of `topoalign vm`, end to end with real parts:
#   1. rewrite vmcheck/domain.xml.in for the mi300x-8 host profile (--mirror-switches
#      --mirror-host-bridges: every GPU↔NIC pair keeps its host class in the guest);
#   2. virt-xml-validate the rewritten domain against libvirt's schema;
#   3. virsh define it on a real libvirtd (qemu:///system), then undefine;
#   4. replace the hostdevs by emulated stand-ins at the same guest addresses
#      (`topoalign vm --stand-ins`), validate, and boot that domain with libvirt
#      (`virsh create`, QEMU TCG): the guest's /init prints its PCI devices with numa_node
#      and bridge chain, and runs `topoalign matrix`/`discover` inside the guest.
# Usage: TOPOALIGN=path/to/topoalign W=workdir vmcheck/run.sh
# Output in $W: rewritten.xml, standin.xml, explain.json, guest-serial.log, timings.
# Exit 3 = skipped (QEMU/libvirt cannot be installed here), reason on stderr.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TOPOALIGN=${TOPOALIGN:?set TOPOALIGN to the topoalign binary}
export W=${W:-$HERE/../target/vmcheck}; mkdir -p "$W"; W=$(cd "$W" && pwd); export W
st() { echo "STAGE $1: $(( $(date +%s%N)/1000000 - T ))ms"; T=$(( $(date +%s%N)/1000000 )); }
T=$(( $(date +%s%N)/1000000 )); T0=$T
# One check at a time per work directory (parallel test runs share it).
exec 9>"$W/.lock"; flock 9
NAME=topoalign-vmcheck-$$
"$HERE/setup.sh"; st setup
TOPOALIGN="$TOPOALIGN" "$HERE/build_initramfs.sh"; st initramfs
KV=$(ls "$W/kernel-root/lib/modules" | head -1)
sed -e "s|@W@|$W|g" -e "s|@KV@|$KV|g" -e "s|<name>topoalign-vmcheck</name>|<name>$NAME</name>|" "$HERE/domain.xml.in" > "$W/domain.xml"

A=(--profile mi300x-8 --domain "$W/domain.xml" --mirror-switches --mirror-host-bridges)
"$TOPOALIGN" vm "${A[@]}" --output-file "$W/rewritten.xml"
"$TOPOALIGN" vm "${A[@]}" --explain -o json > "$W/explain.json"
"$TOPOALIGN" vm "${A[@]}" --explain
"$TOPOALIGN" vm "${A[@]}" --stand-ins --output-file "$W/standin.xml"
st rewrite
virt-xml-validate "$W/rewritten.xml" domain
virt-xml-validate "$W/standin.xml" domain
st validate

V="virsh -q -c qemu:///system"
$V define "$W/rewritten.xml"
$V dumpxml "$NAME" > "$W/defined.xml"
$V undefine "$NAME"
st define
# The stand-in domain boots on this machine, whose CPUs are not the modeled host's:
# drop the host-specific vCPU pinning (it has done its job in the rewrite).
sed -e '/<cputune>/,/<\/cputune>/d' "$W/standin.xml" > "$W/standin-boot.xml"
$V domxml-to-native qemu-argv "$W/standin-boot.xml" > "$W/qemu-argv.txt"
rm -f "$W/guest-serial.log"
t0=$(date +%s%N)
$V create "$W/standin-boot.xml"
deadline=$(( $(date +%s) + ${QEMU_TIMEOUT:-150} ))
while $V domstate "$NAME" >/dev/null 2>&1; do
  if [ "$(date +%s)" -gt "$deadline" ]; then
    $V destroy "$NAME" || true
    echo "guest did not power off within ${QEMU_TIMEOUT:-150}s" >&2; exit 1
  fi
  sleep 0.5
done
t1=$(date +%s%N)
echo "BOOT wall=$(( (t1 - t0) / 1000000 ))ms (virsh create to guest power-off, TCG)"
st boot
echo "TOTAL $(( (T - T0) / 1000 ))s"
