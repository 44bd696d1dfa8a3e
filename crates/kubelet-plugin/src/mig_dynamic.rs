//! Dynamic MIG at prepare and unprepare: the instance an allocated placement stands for
//! is created with `nvidia-smi` at exactly that placement, read back (GPU-instance and
//! compute-instance IDs, MIG UUID, `/dev/nvidia-caps` access nodes), and destroyed by
//! its IDs at unprepare.
//!
//! The tool is `$TOPOALIGN_NVIDIA_SMI` or `nvidia-smi` (as for `topo -m` and
//! `--mig-from-host`), or [`crate::PluginConfig::nvidia_smi`]; each run is bounded in
//! time. Creating: `-L` (the GPU's MIG UUIDs before), `mig -i <GPU UUID> -cgi
//! <profile ID>:<start> -C` (the instance and its default compute instance), `-L` again:
//! the one new UUID is the instance's. A failure at any step destroys what was created
//! and is an error naming the GPU, the profile, the placement, the command and what it
//! printed. Destroying: `mig -i <GPU> -gi <GI> -ci <CI> -dci`, then `mig -i <GPU> -gi
//! <GI> -dgi`; an instance already gone (`Not Found`) is destroyed. A placement a crash
//! left pending ([`PendingMig`]) is found with `-L` and `mig -lgi` and destroyed.
//!
//! A dynamic-MIG GPU belongs to topoalign: an instance made there by hand at a pending
//! placement is taken for one an interrupted prepare made.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use topoalign_discover::sysfs::nvcaps::read_mig_minors;
use topoalign_discover::{ToolError, program_from_env, run_tool};
use topoalign_dra::{
    prepare::{PreparedDevice, PreparedMig, node_number},
    publish::Inventory,
};
use topoalign_mig::{ReadError, SavedOutput, created_gpu_instance, listed_mig_uuids, read_created};
use topoalign_topology::Bdf;

/// One MIG instance the plugin created for a claim: what unprepare destroys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreatedMig {
    /// The parent GPU's address.
    pub gpu: Bdf,
    /// How `nvidia-smi -i` names the parent (its UUID).
    pub target: String,
    /// Profile name (`1g.10gb`).
    pub profile: String,
    /// GPU-instance profile ID.
    pub profile_id: u32,
    /// First memory slice.
    pub start: u8,
    /// GPU-instance ID.
    pub gi: u32,
    /// Compute-instance ID.
    pub ci: u32,
    /// `MIG-…`.
    pub uuid: String,
    /// Its `/dev/nvidia-caps` access nodes (empty when `mig-minors` lacks them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_nodes: Vec<String>,
}

/// A placement about to be created for a claim (checkpointed before `nvidia-smi` runs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PendingMig {
    /// The claim's UID.
    pub claim: String,
    /// The parent GPU's address.
    pub gpu: Bdf,
    /// How `nvidia-smi -i` names the parent (its UUID).
    pub target: String,
    /// Profile name.
    pub profile: String,
    /// GPU-instance profile ID.
    pub profile_id: u32,
    /// First memory slice.
    pub start: u8,
}

/// The placements of `devices` on dynamic-MIG GPUs of `inv`, for claim `uid`.
pub(crate) fn pending(inv: &Inventory, uid: &str, devices: &[PreparedDevice]) -> Vec<PendingMig> {
    devices
        .iter()
        .filter_map(|d| d.mig.as_ref())
        .filter(|m| inv.is_mig_dynamic(m.parent.bdf))
        .filter_map(|m| {
            Some(PendingMig {
                claim: uid.to_string(),
                gpu: m.parent.bdf,
                target: m.parent.uuid.clone()?,
                profile: m.instance.profile.clone(),
                profile_id: m.instance.profile_id,
                start: m.instance.start,
            })
        })
        .collect()
}

/// Why an instance could not be created or destroyed.
#[derive(Debug, thiserror::Error)]
pub enum MigToolError {
    /// The parent has no UUID (the new instance's UUID is found under it in `-L`).
    #[error(
        "dynamic MIG on GPU {gpu}: the GPU has no UUID in the topology: expected one (`nvidia-smi -L` names it) to create {profile}@{start}"
    )]
    NoUuid {
        /// The GPU.
        gpu: Bdf,
        /// Profile.
        profile: String,
        /// Placement.
        start: u8,
    },
    /// A command could not be run or failed.
    #[error("dynamic MIG on GPU {gpu} ({target}), {profile}@{start}: {what}")]
    Command {
        /// The GPU.
        gpu: Bdf,
        /// Its `-i` name.
        target: String,
        /// Profile.
        profile: String,
        /// Placement.
        start: u8,
        /// The command and what it printed.
        what: String,
    },
    /// A command's output does not read.
    #[error("dynamic MIG on GPU {gpu} ({target}), {profile}@{start}: {source}")]
    Output {
        /// The GPU.
        gpu: Bdf,
        /// Its `-i` name.
        target: String,
        /// Profile.
        profile: String,
        /// Placement.
        start: u8,
        /// The reader's error (input and line; boxed: large and rare).
        #[source]
        source: Box<ReadError>,
    },
}

/// The tool and the host paths dynamic MIG uses.
#[derive(Debug, Clone)]
pub(crate) struct MigTool {
    program: String,
    caps_root: PathBuf,
}

/// What one run printed, for errors: the command, its status, its first lines.
fn said(shown: &str, status: &str, stdout: &str, stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .chain(stdout.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(4)
        .collect();
    if lines.is_empty() {
        format!("{shown} exited with {status} and printed nothing")
    } else {
        format!("{shown} exited with {status}: {}", lines.join(" / "))
    }
}

impl MigTool {
    /// `program` (`None`: `$TOPOALIGN_NVIDIA_SMI` or `nvidia-smi`), and the root under
    /// which `proc/driver/nvidia-caps/mig-minors` is read.
    pub(crate) fn new(program: Option<&str>, caps_root: &Path) -> MigTool {
        MigTool {
            program: program.map_or_else(program_from_env, str::to_string),
            caps_root: caps_root.to_path_buf(),
        }
    }

    /// Runs the tool; its stdout when it exits 0, else an error with what it printed.
    fn run(&self, args: &[&str]) -> Result<String, String> {
        let shown = format!("`{} {}`", self.program, args.join(" "));
        match run_tool(&self.program, args) {
            Ok(out) if out.success => Ok(out.stdout),
            Ok(out) => Err(said(&shown, &out.status, &out.stdout, &out.stderr)),
            Err(e @ (ToolError::Spawn { .. } | ToolError::Timeout { .. })) => Err(e.to_string()),
            Err(e) => Err(format!("{shown}: {e}")),
        }
    }

    /// The MIG UUIDs `-L` lists under `target`.
    fn uuids(&self, target: &str) -> Result<Vec<String>, Result<String, Box<ReadError>>> {
        let text = self.run(&["-L"]).map_err(Ok)?;
        let name = format!("`{} -L`", self.program);
        match listed_mig_uuids(SavedOutput::new(&name, &text), target) {
            Ok(Some(u)) => Ok(u),
            Ok(None) => Err(Ok(format!("{name} does not list GPU {target}"))),
            Err(e) => Err(Err(Box::new(e))),
        }
    }

    /// Creates the instance `mig` stands for at its placement and fills in its IDs,
    /// UUID and access nodes. On any failure nothing created is left behind.
    pub(crate) fn create(&self, mig: &mut PreparedMig) -> Result<CreatedMig, MigToolError> {
        let (gpu, profile, start) = (
            mig.parent.bdf,
            mig.instance.profile.clone(),
            mig.instance.start,
        );
        let Some(target) = mig.parent.uuid.clone() else {
            return Err(MigToolError::NoUuid {
                gpu,
                profile,
                start,
            });
        };
        let fail = |what: Result<String, Box<ReadError>>| match what {
            Ok(what) => MigToolError::Command {
                gpu,
                target: target.clone(),
                profile: profile.clone(),
                start,
                what,
            },
            Err(source) => MigToolError::Output {
                gpu,
                target: target.clone(),
                profile: profile.clone(),
                start,
                source,
            },
        };
        let before = self.uuids(&target).map_err(fail)?;
        let placement = format!("{}:{start}", mig.instance.profile_id);
        let text = self
            .run(&["mig", "-i", &target, "-cgi", &placement, "-C"])
            .map_err(|e| fail(Ok(e)))?;
        let name = format!("`{} mig -i {target} -cgi {placement} -C`", self.program);
        let created = match read_created(SavedOutput::new(&name, &text)) {
            Ok(c) => c,
            Err(e) => {
                // Cut short after the GPU instance was made: destroy it by its ID.
                if let Some(gi) = created_gpu_instance(&text) {
                    let gi = gi.to_string();
                    for args in [
                        ["mig", "-i", &target, "-gi", &gi, "-dci"],
                        ["mig", "-i", &target, "-gi", &gi, "-dgi"],
                    ] {
                        if let Err(w) = self.run(&args) {
                            tracing::warn!(error = %w, "destroying a MIG instance after unreadable create output");
                        }
                    }
                }
                return Err(fail(Err(Box::new(e))));
            }
        };
        let mut done = CreatedMig {
            gpu,
            target: target.clone(),
            profile: profile.clone(),
            profile_id: mig.instance.profile_id,
            start,
            gi: created.gi,
            ci: created.ci,
            uuid: String::new(),
            device_nodes: Vec::new(),
        };
        let uuid = match self.uuids(&target) {
            Ok(after) => {
                let new: Vec<String> = after.into_iter().filter(|u| !before.contains(u)).collect();
                match new.as_slice() {
                    [one] => Ok(one.clone()),
                    _ => Err(fail(Ok(format!(
                        "`{} -L` lists {} new MIG devices under the GPU after creating GPU instance {}: expected exactly one",
                        self.program,
                        new.len(),
                        created.gi
                    )))),
                }
            }
            Err(e) => Err(fail(e)),
        };
        done.uuid = match uuid {
            Ok(u) => u,
            Err(e) => {
                self.rollback(&done);
                return Err(e);
            }
        };
        done.device_nodes = self.caps(&mig.parent.device_nodes, created.gi, created.ci);
        mig.instance.gi = Some(done.gi);
        mig.instance.ci = Some(done.ci);
        mig.instance.uuid = Some(done.uuid.clone());
        mig.instance.device_nodes = done.device_nodes.clone();
        Ok(done)
    }

    /// The instance's access nodes from `mig-minors` (warnings logged; none found: the
    /// parent's nodes only).
    fn caps(&self, parent_nodes: &[String], gi: u32, ci: u32) -> Vec<String> {
        let mut warnings = Vec::new();
        let nodes = node_number(parent_nodes, "/dev/nvidia").and_then(|minor| {
            read_mig_minors(&self.caps_root, &mut warnings)?.instance_nodes(minor, gi, Some(ci))
        });
        for w in warnings {
            tracing::warn!(warning = %w, "dynamic MIG access nodes");
        }
        nodes.unwrap_or_default()
    }

    /// Destroys the instance at a pending placement, if one is there (a create that a
    /// crash interrupted before its claim was checkpointed). True when one was.
    pub(crate) fn clear_pending(&self, p: &PendingMig) -> Result<bool, MigToolError> {
        let fail = |what: String| MigToolError::Command {
            gpu: p.gpu,
            target: p.target.clone(),
            profile: p.profile.clone(),
            start: p.start,
            what,
        };
        let list = self.run(&["-L"]).map_err(fail)?;
        let lgi = match self.run(&["mig", "-lgi"]) {
            Ok(t) => t,
            Err(w) if w.contains("No GPU instances found") => return Ok(false),
            Err(w) => return Err(fail(w)),
        };
        let (ln, gn) = (
            format!("`{} -L`", self.program),
            format!("`{} mig -lgi`", self.program),
        );
        let state = topoalign_mig::read_state(&topoalign_mig::MigOutputs {
            list: Some(SavedOutput::new(&ln, &list)),
            lgi: Some(SavedOutput::new(&gn, &lgi)),
            ..Default::default()
        })
        .map_err(|e| fail(e.to_string()))?;
        let found = (state.gpus.iter())
            .filter(|g| g.uuid.as_deref() == Some(p.target.as_str()))
            .flat_map(|g| &g.instances)
            .find(|i| i.profile_id == p.profile_id && i.start == p.start);
        let Some(gi) = found.map(|i| i.id.to_string()) else {
            return Ok(false);
        };
        for args in [
            ["mig", "-i", &p.target, "-gi", &gi, "-dci"],
            ["mig", "-i", &p.target, "-gi", &gi, "-dgi"],
        ] {
            if let Err(w) = self.run(&args)
                && !w.contains("Not Found")
            {
                return Err(fail(format!("destroying GPU instance {gi}: {w}")));
            }
        }
        Ok(true)
    }

    /// Destroys what [`MigTool::create`] made after a later step failed (logged).
    pub(crate) fn rollback(&self, c: &CreatedMig) {
        if let Err(e) = self.destroy(c) {
            tracing::warn!(error = %e, "destroying a MIG instance after a failed prepare");
        }
    }

    /// Destroys the instance: its compute instance, then its GPU instance. One already
    /// gone is destroyed.
    pub(crate) fn destroy(&self, c: &CreatedMig) -> Result<(), MigToolError> {
        let (gi, ci) = (c.gi.to_string(), c.ci.to_string());
        let steps: [&[&str]; 2] = [
            &["mig", "-i", &c.target, "-gi", &gi, "-ci", &ci, "-dci"],
            &["mig", "-i", &c.target, "-gi", &gi, "-dgi"],
        ];
        for args in steps {
            if let Err(what) = self.run(args)
                && !what.contains("Not Found")
            {
                return Err(MigToolError::Command {
                    gpu: c.gpu,
                    target: c.target.clone(),
                    profile: c.profile.clone(),
                    start: c.start,
                    what: format!("destroying GPU instance {gi}: {what}"),
                });
            }
        }
        Ok(())
    }
}

/// Creates the instance of every device of `devices` on a dynamic-MIG GPU of `inv`
/// (filling in its IDs, UUID and access nodes): one entry per device, `None` for the
/// others. On a failure the instances created so far are destroyed.
pub(crate) fn create_all(
    tool: &MigTool,
    inv: &Inventory,
    devices: &mut [PreparedDevice],
) -> Result<Vec<Option<CreatedMig>>, MigToolError> {
    let mut out: Vec<Option<CreatedMig>> = Vec::with_capacity(devices.len());
    for d in devices.iter_mut() {
        let created = match d.mig.as_mut() {
            Some(m) if inv.is_mig_dynamic(m.parent.bdf) => match tool.create(m) {
                Ok(c) => Some(c),
                Err(e) => {
                    rollback_all(tool, &out);
                    return Err(e);
                }
            },
            _ => None,
        };
        out.push(created);
    }
    Ok(out)
}

/// Destroys every instance of `created` (after a later step of prepare failed).
pub(crate) fn rollback_all(tool: &MigTool, created: &[Option<CreatedMig>]) {
    for c in created.iter().flatten() {
        tool.rollback(c);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    use topoalign_dra::{prepare::PreparedGpu, publish::MigInstance};

    /// The fake tool (`tests/data/fake-nvidia-smi.sh`) with its state in `dir`, behind a
    /// wrapper that sets it; GPU 0 is `GPU-aaa`.
    fn fake(dir: &Path) -> MigTool {
        use std::os::unix::fs::PermissionsExt;
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/fake-nvidia-smi.sh");
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("gpus"), "0 GPU-aaa\n").unwrap();
        let wrapper = dir.join("nvidia-smi");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nFAKE_SMI_DIR='{}' exec '{}' \"$@\"\n",
                dir.display(),
                script.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
        MigTool::new(Some(&wrapper.display().to_string()), &dir.join("host"))
    }

    fn placement(uuid: Option<&str>, profile_id: u32, start: u8) -> PreparedMig {
        let h100 = topoalign_mig::lookup("h100-80gb").unwrap();
        let shape = topoalign_mig::SHAPES
            .into_iter()
            .find(|s| s.gi_profile_id() == profile_id)
            .unwrap();
        PreparedMig {
            instance: MigInstance::planned(h100, shape, start),
            parent: PreparedGpu {
                name: "gpu-0000-1b-00-0".into(),
                bdf: Bdf::new(0, 0x1b, 0, 0),
                vendor: "nvidia".into(),
                uuid: uuid.map(str::to_string),
                device_nodes: vec!["/dev/nvidia0".into()],
            },
        }
    }

    #[test]
    fn create_reads_back_and_destroy_removes_exactly_it() {
        let dir = std::env::temp_dir().join(format!("topoalign-smi-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let tool = fake(&dir);
        let mut m = placement(Some("GPU-aaa"), 19, 6);
        let c = tool.create(&mut m).unwrap();
        assert_eq!(
            (c.gi, c.ci, c.start, c.profile.as_str()),
            (1, 0, 6, "1g.10gb")
        );
        assert!(c.uuid.starts_with("MIG-"), "{}", c.uuid);
        assert_eq!(m.instance.uuid.as_deref(), Some(c.uuid.as_str()));
        assert!(
            c.device_nodes.is_empty(),
            "no mig-minors table: parent's nodes only"
        );
        // A second instance on the same GPU: a different GI, its own UUID.
        let mut other = placement(Some("GPU-aaa"), 5, 0);
        let d = tool.create(&mut other).unwrap();
        assert_ne!((d.gi, &d.uuid), (c.gi, &c.uuid));
        // Overlap: the tool refuses; the error names everything.
        let e = tool
            .create(&mut placement(Some("GPU-aaa"), 9, 4))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("0000:1b:00.0")
                && e.contains("3g.40gb@4")
                && e.contains("Insufficient Resources"),
            "{e}"
        );
        tool.destroy(&c).unwrap();
        // Already gone: destroyed.
        tool.destroy(&c).unwrap();
        let left = std::fs::read_to_string(dir.join("instances")).unwrap();
        assert_eq!(left.lines().count(), 1, "{left}");
        assert!(left.contains(&d.uuid));
        // A GPU without UUID, a GPU the tool does not list, a tool that is not there.
        let e = tool
            .create(&mut placement(None, 19, 0))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no UUID"), "{e}");
        let e = tool
            .create(&mut placement(Some("GPU-zzz"), 19, 0))
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not list GPU GPU-zzz"), "{e}");
        let missing = MigTool::new(Some("/nonexistent/nvidia-smi"), &dir);
        let e = missing
            .create(&mut placement(Some("GPU-aaa"), 19, 0))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot run `/nonexistent/nvidia-smi`"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn what_a_failed_command_said() {
        assert_eq!(
            said("`x`", "exit status: 1", "", "Insufficient Resources\n"),
            "`x` exited with exit status: 1: Insufficient Resources"
        );
        assert_eq!(
            said("`x`", "exit status: 2", "\n", ""),
            "`x` exited with exit status: 2 and printed nothing"
        );
    }
}
