//! `topoalign rails`: neighbours from a written sysfs tree and a fabric scan, the rails of
//! the `ib-subnet` rule and the derived leaf, as JSON; a rule without neighbours refused.

use std::fmt::Write as _;
use std::fs;

use crate::common::{json, run_expecting, stdout_of, subcommand, write_file};

#[test]
fn infiniband_ports_and_a_scan_give_rails_and_the_unit() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    let root_s = root.to_str().unwrap();
    stdout_of(&["profile", "write", "dgx-h100", root_s]);
    let ib = root.join("sys/class/infiniband");
    let mut scan = String::new();
    let mut devs: Vec<String> = fs::read_dir(&ib)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|d| {
            fs::read_to_string(ib.join(d).join("ports/1/link_layer"))
                .unwrap()
                .trim()
                == "InfiniBand"
        })
        .collect();
    devs.sort_by_key(|d| d.trim_start_matches("mlx5_").parse::<u32>().unwrap());
    assert_eq!(devs.len(), 8);
    for (i, dev) in devs.iter().enumerate() {
        let port = ib.join(dev).join("ports/1");
        fs::create_dir_all(port.join("gids")).unwrap();
        fs::write(port.join("state"), "4: ACTIVE\n").unwrap();
        // Subnets in reverse: the rail by order is 7 - i.
        fs::write(
            port.join("gids/0"),
            format!("fe80:0000:0000:{:04x}:0c42:a103:00ff:{i:04x}\n", 8 - i),
        )
        .unwrap();
        write!(
            scan,
            "Ca\t1 \"H-0c42a10300ff{i:04x}\"\t\t# \"n1 {dev}\"\n\
             [1](c42a10300ff{i:04x}) \t\"S-7cfe900300a5a2{i:02x}\"[{p}]\t\t# lid {p} lmc 0 \"MF0;leaf-r{r}-su3:MQM9700/U1\" lid 1 4xNDR\n",
            p = i + 1,
            r = 7 - i
        )
        .unwrap();
    }
    let scan = write_file(dir.path(), "fabric.txt", &scan);
    let rails = write_file(dir.path(), "rails.yaml", "rule: ib-subnet\nrails: 8\n");
    let out = json(&stdout_of(&[
        "rails",
        "--sysfs-root",
        root_s,
        "--ibnetdiscover",
        scan.to_str().unwrap(),
        "--rails",
        rails.to_str().unwrap(),
        "-o",
        "json",
    ]));
    let nics = out["nics"].as_array().unwrap();
    let railed: Vec<_> = nics.iter().filter(|n| n["rail"].is_u64()).collect();
    assert_eq!(railed.len(), 8, "{out:#}");
    for n in railed {
        // The subnet order and the scan agree: rail r is on leaf-r<r>.
        let rail = n["rail"].as_u64().unwrap();
        assert_eq!(n["switch"], format!("leaf-r{rail}-su3"), "{n}");
    }
    let leaf = out["leaf"]["value"].as_str().unwrap();
    assert!(leaf.starts_with("leaf-r-su3-"), "{leaf}");
    assert_eq!(
        out["rails"]["source"],
        format!("rule ib-subnet ({})", rails.display())
    );
}

#[test]
fn a_neighbour_rule_without_neighbours_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rails = write_file(
        dir.path(),
        "rails.yaml",
        "rule: switch\nrails: 8\nswitchPattern: \"leaf-r{rail}\"\n",
    );
    let out = run_expecting(
        subcommand("rails").args(["--profile", "mi300x-8", "--rails", rails.to_str().unwrap()]),
        2,
    );
    assert!(
        out.stderr.contains("has no neighbour switch")
            && out.stderr.contains("rails.yaml: rule: NIC"),
        "{}",
        out.stderr
    );
}
