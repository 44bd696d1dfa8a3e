//! On a live NVIDIA host, NVLink counts come from NVML, which `nvidia-smi topo -m` prints:
//! this runs the tool (bounded in time) and merges its `NV#` cells into a sysfs discovery.
//! Any failure is a warning, never an error: the sysfs view stays valid without NVLink.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use topoalign_topology::GpuVendor;

use crate::parse::nvlink_merge::apply_nvlink_text;
use crate::source::Discovery;

/// The variable that names another `nvidia-smi` binary (default: `nvidia-smi` on PATH).
pub const PROGRAM_ENV: &str = "TOPOALIGN_NVIDIA_SMI";

/// How long `nvidia-smi topo -m` may run; a wedged driver can make it hang.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// The program to run: `$TOPOALIGN_NVIDIA_SMI` or `nvidia-smi`.
pub fn program_from_env() -> String {
    std::env::var(PROGRAM_ENV).unwrap_or_else(|_| "nvidia-smi".to_string())
}

/// When the discovery holds NVIDIA GPUs, runs `<program> topo -m` and merges its NVLink
/// cells. Returns whether links were merged; every failure (program missing, non-zero
/// exit, timeout, unparseable or mismatching output) becomes a warning naming the cause
/// and the `--nvlink-from FILE` alternative.
pub fn merge_nvlinks(discovery: &mut Discovery, program: &str) -> bool {
    if !discovery
        .topology
        .gpus
        .iter()
        .any(|g| g.vendor == GpuVendor::Nvidia)
    {
        return false;
    }
    let hint = "pass --nvlink-from FILE with saved `nvidia-smi topo -m` output to get NV# links";
    let text = match run(program) {
        Ok(t) => t,
        Err(why) => {
            discovery
                .warnings
                .push(format!("NVLink links unknown: {why}; {hint}"));
            return false;
        }
    };
    let label = format!("<output of `{program} topo -m`>");
    match apply_nvlink_text(discovery, &text, Path::new(&label)) {
        Ok(()) => true,
        Err(e) => {
            discovery
                .warnings
                .push(format!("NVLink links unknown: {e}; {hint}"));
            false
        }
    }
}

/// Runs `<program> topo -m`, returning its stdout, or why it could not.
fn run(program: &str) -> Result<String, String> {
    let mut child = Command::new(program)
        .args(["topo", "-m"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run `{program}`: {e}"))?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or_else(|| format!("`{program}` gave no stdout"))?;
    // Read on a thread so a chatty tool cannot block on a full pipe while we wait.
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        stdout.read_to_end(&mut buf).map(|_| buf)
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() > TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`{program} topo -m` did not finish within {} s",
                    TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("waiting for `{program}`: {e}")),
        }
    };
    let out = reader
        .join()
        .map_err(|_| format!("reading the output of `{program}` failed"))?
        .map_err(|e| format!("reading the output of `{program}`: {e}"))?;
    if !status.success() {
        return Err(format!("`{program} topo -m` exited with {status}"));
    }
    String::from_utf8(out).map_err(|_| format!("`{program} topo -m` printed non-UTF-8 output"))
}
