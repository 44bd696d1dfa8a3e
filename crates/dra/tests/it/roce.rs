//! RoCE in the published devices: every pair carries its NIC's link layer, so claims and
//! `topoalign lint` can tell RoCE (Ethernet) pairs from InfiniBand ones.

use topoalign_dra::{
    attr,
    publish::{PublishOptions, resource_slices},
};

fn link_layers(profile: &str) -> Vec<(String, Option<String>, Option<String>)> {
    let topo = topoalign_profiles::get(profile).unwrap();
    let slices = resource_slices(&topo, "n1", &PublishOptions::default()).unwrap();
    let devices: Vec<_> = slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .collect();
    let string = |d: &k8s_openapi::api::resource::v1::Device, k: &str| {
        d.attributes
            .as_ref()
            .and_then(|a| a.get(k))
            .and_then(|v| v.string.clone())
    };
    let mut out = Vec::new();
    for pair in devices
        .iter()
        .filter(|d| string(d, attr::TYPE).as_deref() == Some("pair"))
    {
        let nic_name = string(pair, attr::NIC).unwrap();
        let nic = devices
            .iter()
            .find(|d| d.name == nic_name)
            .expect("the pair's NIC is published");
        out.push((
            pair.name.clone(),
            string(pair, attr::LINK_LAYER),
            string(nic, attr::LINK_LAYER),
        ));
    }
    out
}

#[test]
fn pairs_carry_their_nics_link_layer() {
    let mi = link_layers("mi300x-8");
    assert!(!mi.is_empty());
    assert!(
        mi.iter()
            .all(|(_, pair, nic)| pair.as_deref() == Some("Ethernet") && pair == nic),
        "{mi:?}"
    );
    // dgx-h100: InfiniBand compute NICs and one Ethernet management NIC, both paired.
    let dgx = link_layers("dgx-h100");
    assert!(
        dgx.iter()
            .all(|(_, pair, nic)| pair.is_some() && pair == nic),
        "{dgx:?}"
    );
    let layers: std::collections::BTreeSet<_> = dgx.iter().map(|(_, p, _)| p.clone()).collect();
    assert_eq!(
        layers,
        [Some("Ethernet".to_string()), Some("InfiniBand".to_string())].into(),
    );
}
