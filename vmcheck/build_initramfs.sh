#!/bin/sh
# Builds $W/initramfs.cpio.gz: busybox-static, init.sh as /init, the e1000e/virtio driver
# modules from the unpacked Debian kernel and, when $TOPOALIGN names a binary, topoalign
# (stripped) with the libraries ldd lists, so the guest runs `topoalign discover`.
set -e
W=${W:?}; HERE=$(cd "$(dirname "$0")" && pwd)
KV=$(ls "$W/kernel-root/lib/modules" | head -1)
M=$W/kernel-root/lib/modules/$KV
R=$W/initramfs-root
rm -rf "$R"; mkdir -p "$R/bin" "$R/proc" "$R/sys" "$R/dev" "$R/lib/mods" "$R/tmp"
cp /bin/busybox "$R/bin/busybox"
ln -s busybox "$R/bin/sh"
cp "$HERE/init.sh" "$R/init"; chmod 755 "$R/init"
: > "$R/modules.order"
for want in e1000e; do
  line=$(grep -E "/$want\.ko(\.xz)?:" "$M/modules.dep" || true)
  [ -n "$line" ] || continue
  deps=$(echo "$line" | cut -d: -f2)
  self=$(echo "$line" | cut -d: -f1)
  for f in $(echo $deps | tr ' ' '\n' | tac) $self; do
    b=$(basename "$f")
    grep -qx "$b" "$R/modules.order" || { cp "$M/$f" "$R/lib/mods/"; echo "$b" >> "$R/modules.order"; }
  done
done
if [ -n "${TOPOALIGN:-}" ] && [ -x "$TOPOALIGN" ]; then
  cp "$TOPOALIGN" "$R/bin/topoalign"; strip "$R/bin/topoalign" 2>/dev/null || true
  for lib in $(ldd "$TOPOALIGN" | grep -o '/[^ ]*'); do
    mkdir -p "$R$(dirname "$lib")"; cp -L "$lib" "$R$lib"
  done
fi
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1) > "$W/initramfs.cpio.gz"
