//! The rules of the house the README states, checked on the source tree (run by this
//! crate's integration test on the workspace itself, and on small trees by its unit tests):
//!
//! - **No import circle inside a crate**: the files of a crate's `src/` are modules, and
//!   `use crate::a::b` (or `super::`, `self::`) from file `x` is an arrow `x -> a::b`; a set
//!   of files that reach each other is a circle ([`Violation::Circle`]). A file's own
//!   `mod tests` and a parent's `mod child;` declaration are not arrows.
//! - **No edge process crate depends on another** ([`Violation::EdgeDependsOnEdge`]): the
//!   crates of a process (the DRA driver, the extender, the device-plugin agent, the
//!   webhook) meet only in the CLI and in shared library crates below them.
//! - **A public module says why it is public** ([`Violation::PubModWithoutWhy`]): every
//!   library keeps its modules private and names its face in `lib.rs`; a `pub mod` stays
//!   public only as a namespace of constants or a sub-API, with a doc line saying so.

mod circles;
mod modules;
mod workspace;

use std::fmt;
use std::path::PathBuf;

pub use workspace::{Crate, Workspace, read_crate, read_workspace};

/// The crates that are processes of their own (each has an async `run`); none may depend
/// on another.
pub const EDGE_CRATES: [&str; 4] = [
    "topoalign-driver",
    "topoalign-extender",
    "topoalign-agent",
    "topoalign-webhook",
];

/// Why the tree cannot be checked.
#[derive(Debug, thiserror::Error)]
pub enum ArchError {
    /// A file could not be read.
    #[error("reading {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not Rust the parser accepts.
    #[error("parsing {path}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's complaint.
        #[source]
        source: syn::Error,
    },
    /// `cargo metadata` failed or printed what it should not.
    #[error("cargo metadata: {0}")]
    Metadata(String),
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// Files of one crate that import each other (module paths, the imports that tie
    /// them: `from -> to`).
    Circle {
        /// The crate.
        krate: String,
        /// The modules of the circle, sorted.
        modules: Vec<String>,
        /// The arrows inside it.
        arrows: Vec<(String, String)>,
    },
    /// An edge process crate depends on another.
    EdgeDependsOnEdge {
        /// The dependent crate.
        from: String,
        /// The crate it depends on.
        to: String,
    },
    /// A `pub mod` without a doc comment.
    PubModWithoutWhy {
        /// The crate.
        krate: String,
        /// The file that declares it.
        file: PathBuf,
        /// The module's name.
        module: String,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::Circle {
                krate,
                modules,
                arrows,
            } => {
                let arrows: Vec<String> =
                    arrows.iter().map(|(a, b)| format!("{a} -> {b}")).collect();
                write!(
                    f,
                    "{krate}: import circle between {} ({}); move what both need into a module of its own",
                    modules.join(", "),
                    arrows.join(", ")
                )
            }
            Violation::EdgeDependsOnEdge { from, to } => write!(
                f,
                "{from} depends on {to}: no edge process crate imports another; move what they share into a library crate below both"
            ),
            Violation::PubModWithoutWhy {
                krate,
                file,
                module,
            } => write!(
                f,
                "{krate}: `pub mod {module}` in {} has no doc comment saying why it is public (a namespace of constants or a sub-API), else keep it private and re-export its face",
                file.display()
            ),
        }
    }
}

/// Every broken rule of the workspace.
pub fn violations(ws: &Workspace) -> Vec<Violation> {
    let mut out = Vec::new();
    for c in &ws.crates {
        if EDGE_CRATES.contains(&c.name.as_str()) {
            for d in &c.dependencies {
                if EDGE_CRATES.contains(&d.as_str()) {
                    out.push(Violation::EdgeDependsOnEdge {
                        from: c.name.clone(),
                        to: d.clone(),
                    });
                }
            }
        }
        for (file, module) in &c.undocumented_pub_mods {
            out.push(Violation::PubModWithoutWhy {
                krate: c.name.clone(),
                file: file.clone(),
                module: module.clone(),
            });
        }
        for (modules, arrows) in circles::circles(&c.arrows) {
            out.push(Violation::Circle {
                krate: c.name.clone(),
                modules,
                arrows,
            });
        }
    }
    out
}
