//! Output formats for topologies: the `nvidia-smi topo -m` matrix, human tables, and
//! SVG/DOT drawings that render without Graphviz, plus small SVG charts.
//!
//! - `matrix`: a [`topoalign_topology::PairMatrix`] in the exact layout of
//!   `nvidia-smi topo -m` (tab-separated like the tool, or space-aligned), with its
//!   `Legend:` and `NIC Legend:` blocks.
//! - `summary`: a readable multi-section table of a whole topology.
//! - `svg` and `dot`: drawings of the machine (NUMA nodes, host bridges, switches,
//!   GPUs, NICs, the NVLink/xGMI fabric and each GPU's best NIC coloured by pair class).
//! - [`format`]: the output formats (`-o table|json|yaml`, `svg|dot`).
//! - `chart`: generic stacked horizontal bar and line charts as SVG.
//! - `mig`: MIG instances laid over a topology ([`MigOverlay`]), shown under their parent
//!   GPU by the summary, the matrix and the drawings.
//! - `rails`: a node's NICs, rails and leaf ([`rails_table`]).
//!
//! Everything here is pure: functions take a model and return a `String`.

mod chart;
mod documents;
mod dot;
mod format;
mod matrix;
mod mig;
mod rails;
mod scene;
mod summary;
mod svg;
mod table;
mod text;
pub use chart::{lines, stack, stacked_bars};
pub use documents::{WithMig, merge_table};
pub use format::{DrawFormat, Format, MatrixFormat};
pub use matrix::{MatrixStyle, render as render_matrix, render_with_mig as render_matrix_with_mig};
pub use mig::{ClosestNic, MigGpuView, MigInstanceView, MigOverlay, MigRow};
pub use rails::rails_table;
pub use summary::{render as render_summary, render_with_mig as render_summary_with_mig};
pub use svg::{render as render_svg, render_with_mig as render_svg_with_mig};
pub use table::{Table, terminal_width, wrap};
