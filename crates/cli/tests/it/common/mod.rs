//! Helpers shared by the `topoalign` CLI integration tests: building and running the
//! binary, checking its exit code, parsing its JSON, and the files a test works on.
// Each test file uses only some of the helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// What one run of the binary gave back. Both streams must be valid UTF-8.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The exit code (a run killed by a signal fails the test).
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// The `topoalign` binary built for these tests, with no arguments yet.
pub(crate) fn topoalign() -> Command {
    Command::cargo_bin("topoalign").unwrap()
}

/// `topoalign <name>`: the binary with its subcommand, ready for more arguments.
pub(crate) fn subcommand(name: &str) -> Command {
    let mut cmd = topoalign();
    cmd.arg(name);
    cmd
}

/// Runs `cmd` to completion and returns its exit code, stdout and stderr.
pub(crate) fn run(cmd: &mut Command) -> Outcome {
    let out = cmd.output().unwrap();
    Outcome {
        code: out
            .status
            .code()
            .unwrap_or_else(|| panic!("{cmd:?} was killed by a signal")),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

/// Runs `topoalign ARGS`, whatever its exit code.
pub(crate) fn run_args(args: &[&str]) -> Outcome {
    run(topoalign().args(args))
}

/// Runs `cmd` and asserts that it exits with `code`, showing both streams otherwise.
pub(crate) fn run_expecting(cmd: &mut Command, code: i32) -> Outcome {
    let out = run(cmd);
    assert_eq!(
        out.code, code,
        "{cmd:?}\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    out
}

/// Runs `topoalign ARGS`, asserts that it succeeds (exit 0) and returns its stdout.
pub(crate) fn stdout_of(args: &[&str]) -> String {
    run_expecting(topoalign().args(args), 0).stdout
}

/// `text` parsed as JSON.
pub(crate) fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

/// Writes `contents` to `dir/name` and returns the path.
pub(crate) fn write_file(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

/// `crates/<krate>/tests/<rel>`: test data that belongs to a library crate.
pub(crate) fn test_data(krate: &str, rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(krate)
        .join("tests")
        .join(rel)
}
