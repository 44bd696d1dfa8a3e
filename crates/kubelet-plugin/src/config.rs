//! Where the plugin puts its sockets, CDI specs and checkpoint.

use std::path::PathBuf;

use topoalign_dra::DRIVER_NAME;

/// The kubelet's default plugin registration directory.
pub(crate) const DEFAULT_PLUGIN_REGISTRY_DIR: &str = "/var/lib/kubelet/plugins_registry";
/// The kubelet's default directory for plugin sockets.
pub(crate) const DEFAULT_PLUGIN_DIR: &str = "/var/lib/kubelet/plugins";
/// The CDI directory for generated (transient) specs.
pub(crate) const DEFAULT_CDI_DIR: &str = "/var/run/cdi";
/// Where container runtimes (containerd, CRI-O, the CDI library) read CDI specs, lowest
/// priority first: the GPU vendors' specs are looked up there.
pub(crate) const DEFAULT_CDI_SPEC_DIRS: [&str; 2] = ["/etc/cdi", "/var/run/cdi"];

/// The plugin's directory flags (the `clap` feature), flattened into `topoalign driver`.
#[cfg(feature = "clap")]
#[derive(Debug, Clone, clap::Args)]
pub struct PluginArgs {
    /// Where the kubelet watches for plugin registration sockets.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_PLUGIN_REGISTRY_DIR)]
    pub plugin_registry_dir: PathBuf,
    /// Parent of the driver's DRA socket directory (`DIR/topoalign.dev/dra.sock`).
    #[arg(long, value_name = "DIR", default_value = DEFAULT_PLUGIN_DIR)]
    pub plugin_dir: PathBuf,
    /// Where CDI specs are written.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_CDI_DIR)]
    pub cdi_dir: PathBuf,
    /// Where the plugin keeps its checkpoint (default: the driver's plugin directory).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// The runtime's CDI spec directories, lowest priority first, where the GPU
    /// vendors' specs (`nvidia.com/gpu`, `amd.com/gpu`) are looked up.
    #[arg(long = "cdi-spec-dir", value_name = "DIR", default_values = DEFAULT_CDI_SPEC_DIRS)]
    pub cdi_spec_dirs: Vec<PathBuf>,
    /// Move each prepared RoCE VF's network interface into the container (CDI
    /// `netDevices`, spec 1.1.0). Off by default: it needs containerd 2.2.1+ (CDI library
    /// 1.1.0) and runc 1.4+, older runtimes refuse the whole claim's spec, and a
    /// `hostNetwork` pod cannot take it (see deploy/README.md, RoCE).
    #[arg(long)]
    pub cdi_net_devices: bool,
}

#[cfg(feature = "clap")]
impl PluginArgs {
    /// The configuration of the plugin on node `node_name`.
    pub fn config(&self, node_name: impl Into<String>) -> PluginConfig {
        PluginConfig {
            node_name: node_name.into(),
            plugin_registry_dir: self.plugin_registry_dir.clone(),
            plugin_dir: self.plugin_dir.clone(),
            cdi_dir: self.cdi_dir.clone(),
            state_dir: (self.state_dir.clone())
                .unwrap_or_else(|| self.plugin_dir.join(DRIVER_NAME)),
            cdi_spec_dirs: self.cdi_spec_dirs.clone(),
            cdi_net_devices: self.cdi_net_devices,
            nvidia_smi: None,
            host_root: PathBuf::from("/"),
        }
    }
}

/// Paths and identity of the plugin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginConfig {
    /// The node's name: the pool name of every device this plugin prepares.
    pub node_name: String,
    /// Where the kubelet watches for registration sockets.
    pub plugin_registry_dir: PathBuf,
    /// The parent of the driver's own socket directory (`<plugin_dir>/<driver>/`).
    pub plugin_dir: PathBuf,
    /// Where CDI specs are written.
    pub cdi_dir: PathBuf,
    /// Where the checkpoint lives; default `<plugin_dir>/<driver>/`.
    pub state_dir: PathBuf,
    /// The runtime's CDI spec directories, lowest priority first (vendor specs).
    pub cdi_spec_dirs: Vec<PathBuf>,
    /// Whether RoCE VFs' interfaces are moved into the container (CDI `netDevices`).
    pub cdi_net_devices: bool,
    /// Dynamic MIG: the `nvidia-smi` that creates and destroys instances (`None`:
    /// `$TOPOALIGN_NVIDIA_SMI` or `nvidia-smi`, looked up when used).
    pub nvidia_smi: Option<String>,
    /// Dynamic MIG: the root under which `proc/driver/nvidia-caps/mig-minors` is read
    /// for a new instance's access nodes (`/`).
    pub host_root: PathBuf,
}

impl PluginConfig {
    /// The kubelet's default paths for node `node_name`.
    pub fn new(node_name: impl Into<String>) -> Self {
        let plugin_dir = PathBuf::from(DEFAULT_PLUGIN_DIR);
        Self {
            node_name: node_name.into(),
            plugin_registry_dir: PathBuf::from(DEFAULT_PLUGIN_REGISTRY_DIR),
            state_dir: plugin_dir.join(DRIVER_NAME),
            plugin_dir,
            cdi_dir: PathBuf::from(DEFAULT_CDI_DIR),
            cdi_spec_dirs: DEFAULT_CDI_SPEC_DIRS.iter().map(PathBuf::from).collect(),
            cdi_net_devices: false,
            nvidia_smi: None,
            host_root: PathBuf::from("/"),
        }
    }

    /// Every path under `root` (`root/plugins_registry`, `root/plugins`, `root/cdi`, the
    /// vendor spec directories `root/etc-cdi` and `root/cdi`, the host root `root/host`
    /// of `mig-minors`): for tests and for running beside a kubelet with a non-default
    /// root.
    pub fn under(node_name: impl Into<String>, root: &std::path::Path) -> Self {
        let plugin_dir = root.join("plugins");
        Self {
            node_name: node_name.into(),
            plugin_registry_dir: root.join("plugins_registry"),
            state_dir: plugin_dir.join(DRIVER_NAME),
            plugin_dir,
            cdi_dir: root.join("cdi"),
            cdi_spec_dirs: vec![root.join("etc-cdi"), root.join("cdi")],
            cdi_net_devices: false,
            nvidia_smi: None,
            host_root: root.join("host"),
        }
    }

    /// `<plugin_registry_dir>/<driver>-reg.sock`.
    pub fn registration_socket(&self) -> PathBuf {
        self.plugin_registry_dir
            .join(format!("{DRIVER_NAME}-reg.sock"))
    }

    /// `<plugin_dir>/<driver>/dra.sock`.
    pub fn dra_socket(&self) -> PathBuf {
        self.plugin_dir.join(DRIVER_NAME).join("dra.sock")
    }

    /// `<state_dir>/checkpoint.json`.
    pub fn checkpoint_path(&self) -> PathBuf {
        self.state_dir.join("checkpoint.json")
    }
}
