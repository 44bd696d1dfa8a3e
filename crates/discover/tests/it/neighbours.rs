//! Neighbours read from a sysfs tree written from a profile, plus lldpctl and
//! ibnetdiscover files, matched to the profile's NICs.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use topoalign_discover::neighbours::{LldpFrom, NeighbourSources, read_ib_ports, read_neighbours};
use topoalign_discover::write_tree;
use topoalign_topology::{LinkLayer, SubnetPrefix, Topology};

/// The dgx-h100 profile's InfiniBand NICs, in address order: (RDMA device, netdev).
fn ib_nics(topo: &Topology) -> Vec<(String, String)> {
    topo.nics
        .iter()
        .filter(|n| n.link_layer() == Some(LinkLayer::InfiniBand) && !n.is_vf())
        .map(|n| (n.rdma.clone().unwrap(), n.netdev.clone().unwrap()))
        .collect()
}

/// Writes port 1 of each IB device as an ACTIVE port on subnet `fe80:0:0:<rail+1>`.
fn write_ports(root: &Path, devs: &[(String, String)]) {
    for (i, (dev, _)) in devs.iter().enumerate() {
        let p = root.join("sys/class/infiniband").join(dev).join("ports/1");
        fs::create_dir_all(p.join("gids")).unwrap();
        fs::write(p.join("state"), "4: ACTIVE\n").unwrap();
        fs::write(p.join("lid"), format!("0x{:x}\n", 0x10 + i)).unwrap();
        fs::write(p.join("sm_lid"), "0x1\n").unwrap();
        fs::write(
            p.join("gids/0"),
            format!("fe80:0000:0000:{:04x}:0c42:a103:0000:{:04x}\n", i + 1, i),
        )
        .unwrap();
    }
}

/// An ibnetdiscover output: each host port on `leaf-r<i>-su1`, port 1 + i, plus a
/// host of another node.
fn scan(devs: &[(String, String)]) -> String {
    let mut s = String::from("#\n# Topology file: generated on Fri Nov 27 12:00:00 2026\n#\n");
    for (i, (dev, _)) in devs.iter().enumerate() {
        let guid = 0x0c42_a103_0000_0000u64 | i as u64;
        let sw = 0x7cfe_9003_00a5_a200u64 | i as u64;
        write!(
            s,
            "\nvendid=0x2c9\ndevid=0x1021\nsysimgguid=0x{guid:x}\ncaguid=0x{guid:x}\n\
             Ca\t1 \"H-{guid:016x}\"\t\t# \"dgx-01 {dev}\"\n\
             [1]({guid:x}) \t\"S-{sw:016x}\"[{port}]\t\t# lid {lid} lmc 0 \"MF0;leaf-r{i}-su1:MQM9700/U1\" lid 1 4xNDR\n",
            port = 1 + i,
            lid = 0x10 + i
        )
        .unwrap();
    }
    s.push_str("\nCa\t1 \"H-00000000000000aa\"\t\t# \"dgx-02 mlx5_0\"\n[1](aa) \t\"S-7cfe900300a5a200\"[9]\t\t# lid 40 lmc 0 \"MF0;leaf-r0-su1:MQM9700/U1\" lid 1 4xNDR\n");
    s
}

/// The dgx-h100 profile written as a sysfs tree under `dir/tree`, each InfiniBand port
/// active ([`write_ports`]): the profile, the tree's root and its IB NICs.
fn ib_tree(dir: &Path) -> (Topology, PathBuf, Vec<(String, String)>) {
    let topo = topoalign_profiles::get("dgx-h100").unwrap();
    let root = dir.join("tree");
    write_tree(&topo, &root).unwrap();
    let devs = ib_nics(&topo);
    write_ports(&root, &devs);
    (topo, root, devs)
}

/// The error of reading the neighbours of `topo` from `sources`, in words.
fn error_of(topo: &Topology, sources: NeighbourSources) -> String {
    read_neighbours(topo, &sources).unwrap_err().to_string()
}

const LLDP: &str = r#"{
  "lldp": {
    "interface": [
      {"enp41s0f0np0": {"via": "LLDP", "rid": "2", "age": "0 day, 01:02:03",
        "chassis": {"tor-12": {"id": {"type": "mac", "value": "b8:59:9f:00:00:12"}, "descr": "Cumulus Linux", "capability": [{"type": "Bridge", "enabled": true}]}},
        "port": {"id": {"type": "ifname", "value": "swp7"}, "descr": "dgx-01 mgmt", "ttl": "120"}}},
      {"eno1": {"via": "LLDP", "rid": "3",
        "chassis": {"oob-3": {"id": {"type": "mac", "value": "b8:59:9f:00:00:99"}}},
        "port": {"id": {"type": "ifname", "value": "swp40"}}}}
    ]
  }
}"#;

#[test]
fn every_source_lands_on_its_nic() {
    let dir = tempfile::tempdir().unwrap();
    let (topo, root, devs) = ib_tree(dir.path());
    assert_eq!(devs.len(), 8);
    fs::write(dir.path().join("lldp.json"), LLDP).unwrap();
    fs::write(dir.path().join("fabric.txt"), scan(&devs)).unwrap();

    let (n, warnings) = read_neighbours(
        &topo,
        &NeighbourSources {
            lldp: Some(LldpFrom::File(dir.path().join("lldp.json"))),
            ib_root: Some(root.clone()),
            ibnetdiscover: Some(dir.path().join("fabric.txt")),
        },
    )
    .unwrap();
    assert_eq!(n.sources.len(), 3, "{:?}", n.sources);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("oob-3 on eno1"), "{warnings:?}");

    for (i, (dev, _)) in devs.iter().enumerate() {
        let nic = topo
            .nics
            .iter()
            .position(|x| x.rdma.as_deref() == Some(dev))
            .unwrap();
        let port = n.of(topo.nic_bdf(nic)).unwrap().ib.as_ref().unwrap();
        assert_eq!(port.device, *dev);
        assert!(port.active());
        assert_eq!(port.lid, Some(0x10 + i as u16));
        assert_eq!(port.sm_lid, Some(1));
        assert_eq!(
            port.subnet,
            Some(SubnetPrefix(0xfe80_0000_0000_0000 | (i as u64 + 1)))
        );
        let sw = port.switch.as_ref().unwrap();
        assert_eq!(sw.name(), format!("leaf-r{i}-su1"));
        assert_eq!(sw.port, 1 + i as u32);
    }
    let mgmt = topo
        .nics
        .iter()
        .position(|x| x.netdev.as_deref() == Some("enp41s0f0np0"))
        .unwrap();
    let lldp = &n.of(topo.nic_bdf(mgmt)).unwrap().lldp;
    assert_eq!(lldp.len(), 1);
    assert_eq!(lldp[0].chassis_name.as_deref(), Some("tor-12"));
    assert_eq!(lldp[0].port_id.as_deref(), Some("ifname swp7"));
    // The management NIC's port is Ethernet: no IB facts for it.
    assert!(n.of(topo.nic_bdf(mgmt)).unwrap().ib.is_none());
}

#[test]
fn bad_sysfs_files_and_a_scan_alone_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (topo, root, devs) = ib_tree(dir.path());
    let lid = root
        .join("sys/class/infiniband")
        .join(&devs[2].0)
        .join("ports/1/lid");
    fs::write(&lid, "sixteen\n").unwrap();
    let e = read_ib_ports(&root).unwrap_err().to_string();
    assert!(
        e.contains(&format!("{}:1: `sixteen` is not a LID", lid.display())),
        "{e}"
    );
    fs::write(&lid, "0x12\n").unwrap();
    let gid = lid.with_file_name("gids").join("0");
    fs::write(&gid, "fe80::1\n").unwrap();
    let e = read_ib_ports(&root).unwrap_err().to_string();
    assert!(e.contains("is not a GID: expected eight groups"), "{e}");

    let e = error_of(
        &topo,
        NeighbourSources {
            ibnetdiscover: Some(dir.path().join("fabric.txt")),
            ..NeighbourSources::default()
        },
    );
    assert!(e.contains("needs the InfiniBand ports"), "{e}");
    let e = error_of(
        &topo,
        NeighbourSources {
            lldp: Some(LldpFrom::File(dir.path().join("missing.json"))),
            ..NeighbourSources::default()
        },
    );
    assert!(e.contains("missing.json"), "{e}");
}

#[test]
fn a_port_that_is_down_keeps_its_state_and_lldpctl_failing_is_a_tool_error() {
    let dir = tempfile::tempdir().unwrap();
    let (topo, root, devs) = ib_tree(dir.path());
    let state = root
        .join("sys/class/infiniband")
        .join(&devs[0].0)
        .join("ports/1/state");
    fs::write(&state, "1: DOWN\n").unwrap();
    let ports = read_ib_ports(&root).unwrap();
    assert_eq!(ports.len(), 8, "Ethernet ports are left out");
    assert_eq!(ports[0].state.as_deref(), Some("DOWN"));
    assert!(!ports[0].active());

    let e = error_of(
        &topo,
        NeighbourSources {
            lldp: Some(LldpFrom::Run("false".into())),
            ..NeighbourSources::default()
        },
    );
    assert!(e.contains("`false -f json` exited with"), "{e}");
}
