#!/bin/sh
# Guest /init: list every PCI function with its NUMA node, bridge chain and (for NICs)
# MAC address as `PCIDEV` lines, the NUMA nodes as `NODE` lines, run topoalign in the
# guest when it is there, then power off.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
echo "=== GUEST-BEGIN kernel=$(uname -r)"
for m in $(cat /modules.order 2>/dev/null); do insmod /lib/mods/$m 2>/dev/null; done
sleep 1
for n in /sys/devices/system/node/node*; do echo "NODE $(basename $n) cpulist=$(cat $n/cpulist)"; done
for d in /sys/bus/pci/devices/*; do
  bdf=$(basename $d)
  p=$(readlink -f $d)
  parents=$(echo "$p" | tr '/' '\n' | grep -E '^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$' | grep -v "^$bdf\$" | tr '\n' ',' | sed 's/,$//')
  root=$(echo "$p" | tr '/' '\n' | grep -E '^pci[0-9a-f]{4}:[0-9a-f]{2}$')
  mac=-; for a in $d/net/*/address; do [ -f "$a" ] && mac=$(cat $a); done
  echo "PCIDEV bdf=$bdf id=$(sed s/0x// $d/vendor):$(sed s/0x// $d/device) class=$(cat $d/class) numa_node=$(cat $d/numa_node) root=$root parents=${parents:-none} mac=$mac"
done
if [ -x /bin/topoalign ]; then
  echo "=== TOPOALIGN-MATRIX"
  /bin/topoalign matrix --sysfs-root / --all-nics --aligned 2>&1
  echo "=== TOPOALIGN-DISCOVER"
  /bin/topoalign discover --sysfs-root / 2>&1
  echo "=== TOPOALIGN-END rc=$?"
fi
echo "=== GUEST-END uptime=$(cut -d' ' -f1 /proc/uptime)s"
poweroff -f
