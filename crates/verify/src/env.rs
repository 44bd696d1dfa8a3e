//! The environment a device plugin or container runtime gives a pod:
//! `NVIDIA_VISIBLE_DEVICES` / `CUDA_VISIBLE_DEVICES` (indices or UUIDs, `all`, `none`)
//! and the SR-IOV network device plugin's `PCIDEVICE_<RESOURCE>` (comma-separated PCI
//! addresses; the `PCIDEVICE_<RESOURCE>_INFO` JSON companions are not addresses).

use topoalign_topology::Bdf;

use crate::error::VerifyError;

/// One GPU named in a `*_VISIBLE_DEVICES` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuRef {
    /// An index (host nvidia-smi order for `NVIDIA_VISIBLE_DEVICES`; position among the
    /// visible GPUs for `CUDA_VISIBLE_DEVICES`).
    Index(usize),
    /// A `GPU-…` UUID.
    Uuid(String),
}

/// The value of a `*_VISIBLE_DEVICES` variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuSelector {
    /// `all`.
    All,
    /// `none`, `void` or empty.
    Nothing,
    /// A list.
    List(Vec<GpuRef>),
}

/// What the environment says is visible.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvSelection {
    /// `NVIDIA_VISIBLE_DEVICES`.
    pub nvidia_visible: Option<GpuSelector>,
    /// `CUDA_VISIBLE_DEVICES`.
    pub cuda_visible: Option<GpuSelector>,
    /// Addresses from `PCIDEVICE_*` variables, with the variable that named each.
    pub pci_devices: Vec<(String, Bdf)>,
    /// Entries that were skipped (MIG instances) and why.
    pub warnings: Vec<String>,
}

/// Reads the variables that matter from `vars` (e.g. `std::env::vars()`).
pub fn parse_env(
    vars: impl IntoIterator<Item = (String, String)>,
) -> Result<EnvSelection, VerifyError> {
    let mut sel = EnvSelection::default();
    let mut vars: Vec<(String, String)> = vars.into_iter().collect();
    vars.sort();
    for (name, value) in vars {
        match name.as_str() {
            "NVIDIA_VISIBLE_DEVICES" => {
                sel.nvidia_visible = Some(parse_gpu_list(&name, &value, &mut sel.warnings)?)
            }
            "CUDA_VISIBLE_DEVICES" => {
                sel.cuda_visible = Some(parse_gpu_list(&name, &value, &mut sel.warnings)?)
            }
            n if n.starts_with("PCIDEVICE_") && !n.ends_with("_INFO") => {
                for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    let bdf: Bdf = part.parse().map_err(|e| VerifyError::Env {
                        var: name.clone(),
                        value: shorten(&value),
                        why: format!(
                            "expected comma-separated PCI addresses like 0000:0c:00.1 ({e})"
                        ),
                    })?;
                    sel.pci_devices.push((name.clone(), bdf));
                }
            }
            _ => {}
        }
    }
    Ok(sel)
}

/// Parses `all`, `none`/`void`/empty, or a comma list of indices and UUIDs.
fn parse_gpu_list(
    var: &str,
    value: &str,
    warnings: &mut Vec<String>,
) -> Result<GpuSelector, VerifyError> {
    let v = value.trim();
    match v.to_ascii_lowercase().as_str() {
        "all" => return Ok(GpuSelector::All),
        "" | "none" | "void" => return Ok(GpuSelector::Nothing),
        _ => {}
    }
    let mut refs = Vec::new();
    for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if part.starts_with("GPU-") {
            refs.push(GpuRef::Uuid(part.to_string()));
        } else if part.starts_with("MIG-") {
            warnings.push(format!(
                "{var}: MIG instance {part} cannot be mapped to a GPU without NVML; skipped"
            ));
        } else if let Ok(i) = part.parse::<usize>() {
            refs.push(GpuRef::Index(i));
        } else {
            return Err(VerifyError::Env {
                var: var.to_string(),
                value: shorten(value),
                why: format!(
                    "`{part}` is neither an index nor a GPU-… UUID (expected all, none, or a comma-separated list)"
                ),
            });
        }
    }
    Ok(GpuSelector::List(refs))
}

/// At most 80 characters of a value, for messages.
fn shorten(v: &str) -> String {
    v.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn reads_plugin_and_runtime_variables() {
        let s = parse_env(env(&[
            (
                "PCIDEVICE_OPENSHIFT_IO_MLX_RDMA",
                "0000:0c:00.1, 0000:2a:00.2",
            ),
            (
                "PCIDEVICE_OPENSHIFT_IO_MLX_RDMA_INFO",
                "{\"0000:0c:00.1\":{}}",
            ),
            ("NVIDIA_VISIBLE_DEVICES", "GPU-abc,3,MIG-xyz"),
            ("CUDA_VISIBLE_DEVICES", "none"),
            ("PATH", "/bin"),
        ]))
        .unwrap();
        assert_eq!(s.pci_devices.len(), 2);
        assert_eq!(s.pci_devices[1].1.to_string(), "0000:2a:00.2");
        assert_eq!(
            s.nvidia_visible,
            Some(GpuSelector::List(vec![
                GpuRef::Uuid("GPU-abc".into()),
                GpuRef::Index(3)
            ]))
        );
        assert_eq!(s.cuda_visible, Some(GpuSelector::Nothing));
        assert_eq!(s.warnings.len(), 1);
        assert_eq!(
            parse_env(env(&[("NVIDIA_VISIBLE_DEVICES", "all")]))
                .unwrap()
                .nvidia_visible,
            Some(GpuSelector::All)
        );
    }

    #[test]
    fn garbage_names_the_variable() {
        let e = parse_env(env(&[("PCIDEVICE_NICS", "0000:0c:00.1,banana")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("PCIDEVICE_NICS") && e.contains("banana"), "{e}");
        let e = parse_env(env(&[("CUDA_VISIBLE_DEVICES", "0,x")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("CUDA_VISIBLE_DEVICES") && e.contains("`x`"),
            "{e}"
        );
    }
}
