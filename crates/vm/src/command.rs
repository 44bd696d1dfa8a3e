//! `topoalign vm` as two calls on its flags (the `clap` feature; the only I/O of this
//! crate): [`VmArgs::read_inputs`] reads `--domain` and `--vmi` before the host is read,
//! [`VmArgs::rewrite_on`] reads `--capabilities`, rewrites the domain on the host's
//! topology and writes `--draw-guest` and `--output-file` (atomically).

use std::path::{Path, PathBuf};

use thiserror::Error;
use topoalign_atomic::AtomicWriteError;
use topoalign_topology::Topology;

use crate::vmi::VmiInfo;
use crate::{HostView, Rewrite, VmArgs, VmError};

/// Why `topoalign vm` rewrote nothing.
#[derive(Debug, Error)]
pub enum VmCommandError {
    /// A file named by a flag cannot be read.
    #[error("reading {flag} {}", path.display())]
    Read {
        /// The flag (`--domain`).
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file named by a flag is not what the flag takes.
    #[error("{flag} {}", path.display())]
    Input {
        /// The flag (`--vmi`, `--capabilities`).
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        #[source]
        source: Box<VmError>,
    },
    /// The domain cannot be rewritten.
    #[error("rewriting --domain {}", path.display())]
    Rewrite {
        /// The domain file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<VmError>,
    },
    /// The stand-in devices cannot be built.
    #[error("building stand-ins")]
    StandIns(#[source] Box<VmError>),
    /// `--draw-guest` with nothing moved.
    #[error("--draw-guest: no device was moved, so there is no guest PCIe tree to draw")]
    NothingToDraw,
    /// A file named by a flag cannot be written.
    #[error("writing {flag} {}", path.display())]
    Write {
        /// The flag (`--output-file`).
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: AtomicWriteError,
    },
}

/// What [`VmArgs::read_inputs`] read.
#[derive(Debug)]
pub struct VmInputs {
    domain_xml: String,
    vmi: Option<VmiInfo>,
}

/// The rewrite and the XML it ends in (with stand-ins when asked).
#[derive(Debug)]
pub struct VmOutput {
    /// The rewrite, its devices labelled with the VMI's names.
    pub rewrite: Rewrite,
    /// The domain XML to print or written to `--output-file`.
    pub xml: String,
}

/// Reads `path`, naming `flag` in the error.
fn read(path: &Path, flag: &'static str) -> Result<String, VmCommandError> {
    std::fs::read_to_string(path).map_err(|source| VmCommandError::Read {
        flag,
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `text` to `path` atomically, naming `flag` in the error.
fn write(path: &Path, flag: &'static str, text: &str) -> Result<(), VmCommandError> {
    topoalign_atomic::write(path, text.as_bytes()).map_err(|source| VmCommandError::Write {
        flag,
        path: path.to_path_buf(),
        source,
    })
}

impl VmArgs {
    /// Reads `--domain` and `--vmi`.
    pub fn read_inputs(&self) -> Result<VmInputs, VmCommandError> {
        let domain_xml = read(&self.domain, "--domain")?;
        let vmi = match &self.vmi {
            Some(p) => Some(crate::parse_vmi(&read(p, "--vmi")?).map_err(|source| {
                VmCommandError::Input {
                    flag: "--vmi",
                    path: p.clone(),
                    source: Box::new(source),
                }
            })?),
            None => None,
        };
        Ok(VmInputs { domain_xml, vmi })
    }

    /// Rewrites the domain of `inputs` on `host` (its NUMA cells from `--capabilities`
    /// when given), with stand-ins when asked; writes `--draw-guest` and `--output-file`.
    pub fn rewrite_on(
        &self,
        inputs: VmInputs,
        host: &Topology,
    ) -> Result<VmOutput, VmCommandError> {
        let mut view = HostView::from_topology(host);
        if let Some(c) = &self.capabilities {
            let xml = read(c, "--capabilities")?;
            view = view
                .with_capabilities(&xml)
                .map_err(|source| VmCommandError::Input {
                    flag: "--capabilities",
                    path: c.clone(),
                    source: Box::new(source),
                })?;
        }
        let opts = self.options.with_vmi(inputs.vmi.as_ref());
        let mut rw = crate::rewrite(&inputs.domain_xml, &view, opts).map_err(|source| {
            VmCommandError::Rewrite {
                path: self.domain.clone(),
                source: Box::new(source),
            }
        })?;
        if let Some(v) = &inputs.vmi {
            rw.label_with(v);
        }
        let xml = match self.stand_ins {
            true => crate::stand_ins(&rw.xml, &view)
                .map_err(|e| VmCommandError::StandIns(Box::new(e)))?,
            false => rw.xml.clone(),
        };
        if let Some(path) = &self.draw_guest {
            let topo = (rw.guest.topology.as_ref()).ok_or(VmCommandError::NothingToDraw)?;
            write(path, "--draw-guest", &topoalign_render::render_svg(topo))?;
        }
        if let Some(path) = &self.output_file {
            write(path, "--output-file", &xml)?;
        }
        Ok(VmOutput { rewrite: rw, xml })
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, FromArgMatches};

    use super::*;

    fn args(argv: &[&str]) -> VmArgs {
        let cmd = VmArgs::augment_args(clap::Command::new("vm"));
        VmArgs::from_arg_matches(&cmd.try_get_matches_from(argv).unwrap()).unwrap()
    }

    fn fixture() -> String {
        format!(
            "{}/tests/fixtures/virt-launcher-mi300x.xml",
            env!("CARGO_MANIFEST_DIR")
        )
    }

    #[test]
    fn the_domain_is_rewritten_and_the_files_written() {
        let dir = std::env::temp_dir().join(format!("topoalign-vm-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (out, svg) = (dir.join("d.xml"), dir.join("g.svg"));
        let a = args(&[
            "vm",
            "--domain",
            &fixture(),
            "--mirror-switches",
            "--output-file",
            out.to_str().unwrap(),
            "--draw-guest",
            svg.to_str().unwrap(),
        ]);
        let host = topoalign_profiles::get("mi300x-8").unwrap();
        let got = a.rewrite_on(a.read_inputs().unwrap(), &host).unwrap();
        let written = std::fs::read_to_string(&out).unwrap();
        let drawn = std::fs::read_to_string(&svg).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(written, got.xml);
        assert!(got.xml.contains("pcie-expander-bus"), "{}", got.xml);
        assert!(
            drawn.starts_with("<svg") || drawn.contains("<svg"),
            "{drawn}"
        );
    }

    #[test]
    fn each_error_names_its_flag_and_file() {
        let a = args(&["vm", "--domain", "/nonexistent/d.xml"]);
        let e = a.read_inputs().unwrap_err();
        assert_eq!(e.to_string(), "reading --domain /nonexistent/d.xml");
        assert!(
            std::error::Error::source(&e).is_some(),
            "the io error is kept"
        );
        let f = fixture();
        let bad = std::env::temp_dir().join(format!("topoalign-vm-bad-{}", std::process::id()));
        std::fs::write(&bad, "{not json").unwrap();
        let b = bad.to_str().unwrap().to_string();
        let a = args(&["vm", "--domain", &f, "--vmi", &b]);
        let e = a.read_inputs().unwrap_err();
        assert_eq!(e.to_string(), format!("--vmi {b}"));
        let a = args(&["vm", "--domain", &f, "--capabilities", &b]);
        let host = topoalign_profiles::get("mi300x-8").unwrap();
        let e = a.rewrite_on(a.read_inputs().unwrap(), &host).unwrap_err();
        let _ = std::fs::remove_file(&bad);
        assert_eq!(e.to_string(), format!("--capabilities {b}"));
    }
}
