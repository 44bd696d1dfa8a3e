//! On a live NVIDIA host, NVLink counts and GPU memory sizes come from NVML, which
//! `nvidia-smi topo -m` and `nvidia-smi --query-gpu=pci.bus_id,memory.total --format=csv`
//! print: this runs the tool (bounded in time) and merges its `NV#` cells and memory
//! sizes into a sysfs discovery. Any failure is a warning, never an error: the sysfs view
//! stays valid without them.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use topoalign_topology::GpuVendor;

use crate::discovery::Discovery;
use crate::error::ToolError;
use crate::parse::nvlink_merge::apply_nvlink_text;

/// The variable that names another `nvidia-smi` binary (default: `nvidia-smi` on PATH).
pub(crate) const PROGRAM_ENV: &str = "TOPOALIGN_NVIDIA_SMI";

/// How long `nvidia-smi topo -m` may run; a wedged driver can make it hang.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(20);

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

/// The arguments of the memory query (the saved file's command, [`crate::sysfs::nvml::MEMORY_FILE`]).
const MEMORY_QUERY: [&str; 2] = ["--query-gpu=pci.bus_id,memory.total", "--format=csv"];

/// When the discovery holds NVIDIA GPUs whose memory size sysfs did not give, runs
/// `<program> --query-gpu=pci.bus_id,memory.total --format=csv` and sets their sizes.
/// Returns whether sizes were merged; a failure becomes a warning naming the cause.
pub fn merge_memory(discovery: &mut Discovery, program: &str) -> bool {
    let unknown = (discovery.topology.gpus.iter())
        .any(|g| g.vendor == GpuVendor::Nvidia && g.memory_mib.is_none());
    if !unknown {
        return false;
    }
    let text = match run_checked(program, &MEMORY_QUERY) {
        Ok(t) => t,
        Err(why) => {
            discovery
                .warnings
                .push(format!("GPU memory sizes unknown: {why}"));
            return false;
        }
    };
    let label = format!("<output of `{program} {}`>", MEMORY_QUERY.join(" "));
    let mut t = discovery.topology.clone();
    match crate::sysfs::nvml::apply_memory_csv(&mut t, &text, Path::new(&label)) {
        Ok(()) => {
            discovery.topology = t;
            true
        }
        Err(e) => {
            discovery
                .warnings
                .push(format!("GPU memory sizes unknown: {e}"));
            false
        }
    }
}

/// Runs `<program> topo -m`, returning its stdout, or why it could not.
fn run(program: &str) -> Result<String, ToolError> {
    run_checked(program, &["topo", "-m"])
}

/// Runs `<program> <args…>` ([`run_tool`]) where only a successful run answers: its
/// stdout, or [`ToolError::Failed`] naming the command and its exit status.
pub fn run_checked(program: &str, args: &[&str]) -> Result<String, ToolError> {
    let out = run_tool(program, args)?;
    if !out.success {
        return Err(ToolError::Failed {
            command: format!("{program} {}", args.join(" ")),
            status: out.status,
        });
    }
    Ok(out.stdout)
}

/// What one run of the tool printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// Its standard output (lossy UTF-8).
    pub stdout: String,
    /// Its standard error (lossy UTF-8).
    pub stderr: String,
    /// Whether it exited with 0.
    pub success: bool,
    /// The exit status, for messages.
    pub status: String,
}

/// Runs `<program> <args…>` bounded by `TIMEOUT`, returning what it printed whatever
/// its exit status (some answers, like `No MIG-enabled devices found.`, come with a
/// non-zero one), or why it could not be run or did not finish.
pub fn run_tool(program: &str, args: &[&str]) -> Result<ToolOutput, ToolError> {
    let shown = format!("{program} {}", args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ToolError::Spawn {
            program: program.to_string(),
            source,
        })?;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        // Read on a thread so a chatty tool cannot block on a full pipe while we wait.
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                p.read_to_end(&mut buf).map(|_| buf)
            } else {
                Ok(buf)
            }
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() > TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(ToolError::Timeout {
                    command: shown,
                    seconds: TIMEOUT.as_secs(),
                });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(source) => {
                return Err(ToolError::Wait {
                    program: program.to_string(),
                    source,
                });
            }
        }
    };
    let read = |h: std::thread::JoinHandle<std::io::Result<Vec<u8>>>| {
        h.join()
            .map_err(|_| ToolError::ReaderPanicked {
                program: program.to_string(),
            })?
            .map_err(|source| ToolError::Read {
                program: program.to_string(),
                source,
            })
    };
    let out = read(stdout)?;
    let err = read(stderr)?;
    Ok(ToolOutput {
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr: String::from_utf8_lossy(&err).into_owned(),
        success: status.success(),
        status: status.to_string(),
    })
}
