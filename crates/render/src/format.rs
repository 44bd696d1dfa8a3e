//! The output formats the commands speak: `-o table|json|yaml` for reports, `svg|dot` for
//! drawings, and the matrix's own text or structured forms. With the `clap` feature each
//! is a `clap::ValueEnum` (the doc comments are the help text of its values).

/// How a command prints its result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Format {
    /// Human-readable text.
    #[default]
    Table,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

/// Drawing formats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum DrawFormat {
    /// Standalone SVG.
    #[default]
    Svg,
    /// Graphviz DOT text.
    Dot,
}

impl DrawFormat {
    /// The machine drawn in this format.
    pub fn render(self, topo: &topoalign_topology::Topology) -> String {
        self.render_with_mig(topo, &crate::MigOverlay::default())
    }

    /// The machine drawn in this format, MIG instances inside their GPU's box.
    pub fn render_with_mig(
        self,
        topo: &topoalign_topology::Topology,
        mig: &crate::MigOverlay,
    ) -> String {
        match self {
            DrawFormat::Svg => crate::svg::render_with_mig(topo, mig),
            DrawFormat::Dot => crate::dot::render(topo, mig),
        }
    }
}

/// How the pair matrix is printed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum MatrixFormat {
    /// The `nvidia-smi topo -m` text (tab-separated unless `--aligned`).
    #[default]
    Table,
    /// The classified matrix as JSON (`numaAffinity` null when unknown).
    Json,
    /// The classified matrix as YAML.
    Yaml,
}

impl MatrixFormat {
    /// The report format of the structured forms; `None` for the text.
    pub fn structured(self) -> Option<Format> {
        match self {
            MatrixFormat::Table => None,
            MatrixFormat::Json => Some(Format::Json),
            MatrixFormat::Yaml => Some(Format::Yaml),
        }
    }
}
