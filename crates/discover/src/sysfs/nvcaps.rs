//! The NVIDIA driver's MIG capability table, `/proc/driver/nvidia-caps/mig-minors`: the
//! device number N of `/dev/nvidia-caps/nvidia-cap<N>` that grants access to each GPU
//! instance and compute instance. A container given a MIG instance needs the parent's
//! `/dev/nvidiaM` plus the two caps nodes of its GPU instance and compute instance
//! (`../shared/REFERENCE.md` §11).
//!
//! The file is `<capability> <minor>` lines, the GPU named by its device minor (the M of
//! `/dev/nvidiaM`), every possible instance listed whether it exists or not:
//!
//! ```text
//! config 1
//! monitor 2
//! gpu0/gi0/access 3
//! gpu0/gi0/ci0/access 4
//! ```
//!
//! Nothing here is fatal: a line that does not parse is skipped with a problem naming its
//! line number (the caller adds the file).

use std::collections::BTreeMap;
use std::path::Path;

use crate::parse::excerpt;

/// Where the table is, relative to the root.
pub const MIG_MINORS: &str = "proc/driver/nvidia-caps/mig-minors";
/// Where the caps device nodes are.
pub const CAPS_DEV_DIR: &str = "/dev/nvidia-caps";

/// A capability of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MigCap {
    /// `config`: creating and destroying instances.
    Config,
    /// `monitor`: reading every instance's state.
    Monitor,
    /// `gpu<gpu>/gi<gi>/access`.
    GpuInstance {
        /// The GPU's device minor.
        gpu: u32,
        /// The GPU instance ID.
        gi: u32,
    },
    /// `gpu<gpu>/gi<gi>/ci<ci>/access`.
    ComputeInstance {
        /// The GPU's device minor.
        gpu: u32,
        /// The GPU instance ID.
        gi: u32,
        /// The compute instance ID.
        ci: u32,
    },
}

/// The parsed table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigMinors {
    /// Capability → caps device minor.
    pub minors: BTreeMap<MigCap, u32>,
    /// Lines that did not parse: `(line number from 1, what is wrong)`.
    pub problems: Vec<(usize, String)>,
}

impl MigMinors {
    /// The caps device node of a capability (`/dev/nvidia-caps/nvidia-cap<N>`).
    pub fn node(&self, cap: MigCap) -> Option<String> {
        self.minors
            .get(&cap)
            .map(|n| format!("{CAPS_DEV_DIR}/nvidia-cap{n}"))
    }

    /// The caps nodes a container needs for GPU instance `gi` (and compute instance `ci`)
    /// of the GPU with device minor `gpu`, in that order; `None` when the table lacks
    /// one of them.
    pub fn instance_nodes(&self, gpu: u32, gi: u32, ci: Option<u32>) -> Option<Vec<String>> {
        let mut out = vec![self.node(MigCap::GpuInstance { gpu, gi })?];
        if let Some(ci) = ci {
            out.push(self.node(MigCap::ComputeInstance { gpu, gi, ci })?);
        }
        Some(out)
    }
}

fn number(s: &str, prefix: &str) -> Option<u32> {
    let rest = s.strip_prefix(prefix)?;
    if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rest.parse().ok()
}

fn parse_cap(s: &str) -> Option<MigCap> {
    match s {
        "config" => return Some(MigCap::Config),
        "monitor" => return Some(MigCap::Monitor),
        _ => {}
    }
    let parts: Vec<&str> = s.split('/').collect();
    match parts[..] {
        [g, i, "access"] => Some(MigCap::GpuInstance {
            gpu: number(g, "gpu")?,
            gi: number(i, "gi")?,
        }),
        [g, i, c, "access"] => Some(MigCap::ComputeInstance {
            gpu: number(g, "gpu")?,
            gi: number(i, "gi")?,
            ci: number(c, "ci")?,
        }),
        _ => None,
    }
}

/// Parses the table. Blank lines are skipped; a line that is not `<capability> <minor>`,
/// and a capability listed twice (the second is dropped), are problems.
pub fn parse_mig_minors(text: &str) -> MigMinors {
    let mut out = MigMinors::default();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        let mut words = t.split_whitespace();
        let (Some(cap), Some(minor), None) = (words.next(), words.next(), words.next()) else {
            out.problems.push((
                n,
                format!(
                    "`{}` is not `<capability> <minor>` (e.g. `gpu0/gi1/access 12`)",
                    excerpt(t)
                ),
            ));
            continue;
        };
        let Some(cap) = parse_cap(cap) else {
            out.problems.push((
                n,
                format!(
                    "`{}` is not a MIG capability (expected config, monitor, gpu<M>/gi<G>/access or gpu<M>/gi<G>/ci<C>/access)",
                    excerpt(cap)
                ),
            ));
            continue;
        };
        let Ok(minor) = minor.parse::<u32>() else {
            out.problems.push((
                n,
                format!(
                    "`{}` is not a device minor (expected an integer)",
                    excerpt(minor)
                ),
            ));
            continue;
        };
        if out.minors.contains_key(&cap) {
            out.problems.push((
                n,
                format!("`{}` is listed twice; kept the first", excerpt(t)),
            ));
            continue;
        }
        out.minors.insert(cap, minor);
    }
    out
}

/// Reads the table under `root`. A missing or unreadable file is `None` with one warning
/// (instances then get their parent's device nodes only); malformed lines become
/// warnings naming the file and the line.
pub fn read_mig_minors(root: &Path, warnings: &mut Vec<String>) -> Option<MigMinors> {
    let path = root.join(MIG_MINORS);
    let text = match std::fs::read(&path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            warnings.push(format!(
                "{}: cannot be read ({e}): MIG instances get their parent GPU's device nodes only, without their /dev/nvidia-caps access nodes (mount the host's /proc/driver/nvidia-caps under the sysfs root)",
                path.display()
            ));
            return None;
        }
    };
    let parsed = parse_mig_minors(&text);
    for (line, p) in &parsed.problems {
        warnings.push(format!("{} line {line}: {p}", path.display()));
    }
    Some(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_table() {
        let t = parse_mig_minors(
            "config 1\nmonitor 2\ngpu0/gi0/access 3\ngpu0/gi0/ci0/access 4\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n\ngpu3/gi2/ci1/access 421\n",
        );
        assert!(t.problems.is_empty(), "{:?}", t.problems);
        assert_eq!(t.minors.len(), 7);
        assert_eq!(t.minors[&MigCap::Monitor], 2);
        assert_eq!(
            t.instance_nodes(0, 1, Some(0)).unwrap(),
            [
                "/dev/nvidia-caps/nvidia-cap12",
                "/dev/nvidia-caps/nvidia-cap13"
            ]
        );
        assert_eq!(
            t.node(MigCap::ComputeInstance {
                gpu: 3,
                gi: 2,
                ci: 1
            })
            .as_deref(),
            Some("/dev/nvidia-caps/nvidia-cap421")
        );
        assert_eq!(t.instance_nodes(0, 1, None).unwrap().len(), 1);
        assert_eq!(t.instance_nodes(1, 1, Some(0)), None);
        assert_eq!(t.instance_nodes(0, 0, Some(5)), None);
    }

    #[test]
    fn malformed_lines_are_numbered_problems() {
        let t = parse_mig_minors(
            "config 1\ngpu0/gi1/access\ngpuX/gi1/access 5\ngpu0/gi1/access twelve\ngpu0/gi1/ci0/access 13 extra\ngpu0/gi/access 6\ngpu0/gi2/access 7\ngpu0/gi2/access 8\n\0\u{fffd}\n",
        );
        let lines: Vec<usize> = t.problems.iter().map(|(n, _)| *n).collect();
        assert_eq!(lines, [2, 3, 4, 5, 6, 8, 9], "{:?}", t.problems);
        assert_eq!(
            t.minors.get(&MigCap::GpuInstance { gpu: 0, gi: 2 }),
            Some(&7)
        );
        assert_eq!(t.minors.len(), 2);
        assert!(t.problems[2].1.contains("`twelve` is not a device minor"));
        assert!(t.problems[5].1.contains("listed twice"));
    }

    #[test]
    fn a_missing_file_is_one_warning() {
        let dir = std::env::temp_dir().join(format!("nvcaps-missing-{}", std::process::id()));
        let mut w = Vec::new();
        assert_eq!(read_mig_minors(&dir, &mut w), None);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("mig-minors: cannot be read"), "{w:?}");
    }
}
