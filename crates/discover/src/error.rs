//! Errors of discovery.

use std::path::PathBuf;

use thiserror::Error;

/// Why a topology could not be discovered.
#[derive(Debug, Error)]
pub enum DiscoverError {
    /// `--profile` named a profile that does not exist (the profiles crate's one message).
    #[error(transparent)]
    UnknownProfile(#[from] topoalign_profiles::UnknownProfile),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Input did not have the expected shape.
    #[error("{path}:{line}: {message}")]
    Malformed {
        /// The file (or `<input>`).
        path: PathBuf,
        /// 1-based line number (0 when not tied to a line).
        line: usize,
        /// What was found and what was expected.
        message: String,
    },
    /// The input needs more synthetic PCI addresses than there are (it names no PCI
    /// addresses of its own, and is too large to stand for with made-up ones).
    #[error("{path}:{line}: {source}")]
    TooLarge {
        /// The file (or `<input>`).
        path: PathBuf,
        /// 1-based line number (0 when not tied to a line).
        line: usize,
        /// What ran out.
        #[source]
        source: SynthError,
    },
    /// `--sysfs-root` names a directory that is not a sysfs tree.
    #[error(
        "{root} is not a sysfs tree: it has no sys/bus/pci/devices (expected `/` on a host, or a directory written by `topoalign profile write`)"
    )]
    NotSysfs {
        /// The directory given.
        root: PathBuf,
    },
    /// The resulting model broke an invariant.
    #[error("inconsistent topology: {0}")]
    Model(#[from] topoalign_topology::ModelError),
    /// Placeholder for sources not wired yet.
    #[error("source not supported yet: {0}")]
    Unsupported(String),
}

/// Why an external tool (`nvidia-smi`) gave no answer to read.
#[derive(Debug, Error)]
pub enum ToolError {
    /// The program could not be started.
    #[error("cannot run `{program}`: {source}")]
    Spawn {
        /// The program as given.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The program ran past the time limit and was killed.
    #[error("`{command}` did not finish within {seconds} s")]
    Timeout {
        /// The command line as run.
        command: String,
        /// The time limit.
        seconds: u64,
    },
    /// Waiting for the program failed.
    #[error("waiting for `{program}`: {source}")]
    Wait {
        /// The program as given.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The thread reading one of its pipes panicked.
    #[error("reading the output of `{program}` failed")]
    ReaderPanicked {
        /// The program as given.
        program: String,
    },
    /// Reading one of its pipes failed.
    #[error("reading the output of `{program}`: {source}")]
    Read {
        /// The program as given.
        program: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// It ran but exited with a failure where an answer was needed.
    #[error("`{command}` exited with {status}")]
    Failed {
        /// The command line as run.
        command: String,
        /// The exit status, as the OS words it.
        status: String,
    },
}

/// Why a Linux cpumask (`0000ffff,00000000`) does not read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum CpuMaskError {
    /// More words than CPU ids allow.
    #[error("mask is too long")]
    TooLong,
    /// A word is empty or longer than 8 hex digits.
    #[error("`{0}` is not a 32-bit hex word")]
    NotWord(String),
    /// A word has a non-hex digit.
    #[error("`{0}` is not hexadecimal")]
    NotHex(String),
}

/// Why a synthetic PCI tree (built for inputs that carry no PCI addresses) cannot grow.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SynthError {
    /// Past 256 host bridges.
    #[error("more than 256 host bridges needed; the input is too large")]
    HostBridges,
    /// Past the bridge numbering scheme's capacity.
    #[error("more than {0} bridges needed; the input is too large")]
    Bridges(u32),
}
