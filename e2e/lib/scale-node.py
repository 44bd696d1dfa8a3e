#!/usr/bin/env python3
"""Writes an NCCL topology XML (NCCL_TOPO_FILE format) for a synthetic large node.

    scale-node.py [--numa 4] [--switches 9] > scale-72.xml

Each NUMA node has SWITCHES PCIe switches; each switch holds 2 GPUs and 2 InfiniBand NICs
(PIX to each other), so the default is 72 GPUs and 72 NICs, 18 of each per NUMA node. The
speed scenario publishes it with `topoalign driver --from-nccl-xml` to see how the upstream
allocator and `topoalign plan` scale. Addresses are made up; nothing else is modeled.
"""
import argparse

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--numa", type=int, default=4)
ap.add_argument("--switches", type=int, default=9, help="switches per NUMA node")
a = ap.parse_args()
if a.numa < 1 or a.switches < 1 or a.numa * a.switches * 5 > 250:
    ap.error("need 1+ NUMA nodes and switches, at most 50 switches in all (bus numbers)")

out = ['<system version="1">']
gpu = nic = 0
for numa in range(a.numa):
    out.append(f'  <cpu numaid="{numa}" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">')
    for s in range(a.switches):
        i = numa * a.switches + s
        bus = 1 + i * 5
        out.append(f'    <pci busid="0000:{bus:02x}:00.0" class="0x060400" vendor="0x1000" device="0xc030" link_speed="32.0 GT/s PCIe" link_width="16">')
        for k in range(2):
            out.append(f'      <pci busid="0000:{bus + 1 + k:02x}:00.0" class="0x030200" vendor="0x10de" device="0x2330" link_speed="32.0 GT/s PCIe" link_width="16">')
            out.append(f'        <gpu dev="{gpu}" sm="90" rank="{gpu}" gdr="1"/>')
            out.append('      </pci>')
            gpu += 1
        for k in range(2):
            out.append(f'      <pci busid="0000:{bus + 3 + k:02x}:00.0" class="0x020700" vendor="0x15b3" device="0x1021" link_speed="32.0 GT/s PCIe" link_width="16">')
            out.append(f'        <nic><net name="mlx5_{nic}" dev="{nic}" speed="400000" port="1" gdr="1"/></nic>')
            out.append('      </pci>')
            nic += 1
        out.append('    </pci>')
    out.append('  </cpu>')
out.append('</system>')
print("\n".join(out))
