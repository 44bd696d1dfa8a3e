//! `--mig-from-host`: the MIG state of this host from the live `nvidia-smi` (bounded in
//! time, `$TOPOALIGN_NVIDIA_SMI` names another binary), read by the same readers as the
//! saved outputs of `--mig-state DIR`.
//!
//! A host without MIG is no error: `nvidia-smi mig -lgi` then says `No MIG-enabled
//! devices found.` or `Not Supported` (with a non-zero exit), which reads as no GPU
//! instances. A tool that cannot be run, hangs, or fails otherwise is an error naming
//! the command and what it printed.

use topoalign_discover::{ToolError, ToolOutput, program_from_env, run_tool};

/// The commands run, in [`LiveOutputs`] order.
pub(crate) const COMMANDS: [&[&str]; 3] = [&["-L"], &["mig", "-lgi"], &["mig", "-lci"]];

/// Answers of `nvidia-smi` on a host (or GPU) without MIG, which read as "no instances".
const NO_MIG: [&str; 4] = [
    "No MIG-enabled devices found",
    "Not Supported",
    "No GPU instances found",
    "No compute instances found",
];

/// What the three commands printed: `(shown command, text)` each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LiveOutputs {
    /// `nvidia-smi -L`.
    pub list: (String, String),
    /// `nvidia-smi mig -lgi`.
    pub lgi: (String, String),
    /// `nvidia-smi mig -lci`.
    pub lci: (String, String),
}

/// Why the live state cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The tool could not be run or did not finish.
    #[error(
        "--mig-from-host: {0} (set $TOPOALIGN_NVIDIA_SMI to another nvidia-smi, or save the outputs and pass --mig-state DIR)"
    )]
    Tool(#[from] ToolError),
    /// It ran and failed without a no-MIG answer: the command and what it printed.
    #[error(
        "--mig-from-host: {0} (set $TOPOALIGN_NVIDIA_SMI to another nvidia-smi, or save the outputs and pass --mig-state DIR)"
    )]
    Failed(String),
}

/// Runs the commands with `program` (`None`: `$TOPOALIGN_NVIDIA_SMI` or `nvidia-smi`).
pub(crate) fn run_live(program: Option<&str>) -> Result<LiveOutputs, LiveError> {
    let program = program.map_or_else(program_from_env, str::to_string);
    let mut texts = COMMANDS.iter().map(|args| {
        let shown = format!("`{program} {}`", args.join(" "));
        let out = run_tool(&program, args)?;
        Ok((shown.clone(), accept(&shown, out)?))
    });
    let mut next = || {
        texts
            .next()
            .unwrap_or_else(|| Err(LiveError::Failed("no command left".into())))
    };
    Ok(LiveOutputs {
        list: next()?,
        lgi: next()?,
        lci: next()?,
    })
}

/// The text to read from one run: its stdout when it succeeded, the no-MIG answer when
/// it says so (whatever the exit status), else an error with what it printed.
fn accept(shown: &str, out: ToolOutput) -> Result<String, LiveError> {
    let both = format!("{}\n{}", out.stdout, out.stderr);
    if let Some(line) = both
        .lines()
        .map(str::trim)
        .find(|l| NO_MIG.iter().any(|m| l.contains(m)))
        && !out.success
    {
        // The readers know these lines; give them on stdout's place.
        return Ok(format!("{line}\n"));
    }
    if out.success {
        return Ok(out.stdout);
    }
    let said: String = both
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(3)
        .collect::<Vec<_>>()
        .join(" / ");
    Err(LiveError::Failed(format!(
        "{shown} exited with {}{}",
        out.status,
        if said.is_empty() {
            String::new()
        } else {
            format!(": {said}")
        }
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(stdout: &str, stderr: &str, success: bool) -> ToolOutput {
        ToolOutput {
            stdout: stdout.into(),
            stderr: stderr.into(),
            success,
            status: if success {
                "exit status: 0"
            } else {
                "exit status: 6"
            }
            .into(),
        }
    }

    #[test]
    fn no_mig_answers_are_no_instances_and_other_failures_are_errors() {
        assert_eq!(
            accept("x", out("No MIG-enabled devices found.\n", "", false)).unwrap(),
            "No MIG-enabled devices found.\n"
        );
        assert_eq!(
            accept("x", out("", "Unable to list: Not Supported\n", false)).unwrap(),
            "Unable to list: Not Supported\n"
        );
        assert_eq!(accept("x", out("table\n", "", true)).unwrap(), "table\n");
        let e = accept(
            "`nvidia-smi mig -lgi`",
            out(
                "",
                "Failed to initialize NVML: Driver/library version mismatch\n",
                false,
            ),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains(
                "`nvidia-smi mig -lgi` exited with exit status: 6: Failed to initialize NVML"
            ),
            "{e}"
        );
        assert!(e.contains("--mig-state DIR"), "{e}");
    }
}
