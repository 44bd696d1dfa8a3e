//! What `claims` and `explain --all` read of other drivers' devices: saved files
//! (several, `-` for stdin) or the live cluster (ResourceSlices, DeviceClasses and
//! ResourceClaims, and pods for `explain --all`).

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::Api;
use kube::api::ListParams;
use topoalign_dra::foreign::{SliceFile, parse_slice_file};

/// Slices, classes, claims and pods as read.
#[derive(Debug, Default)]
pub(crate) struct Live {
    /// ResourceSlices and DeviceClasses.
    pub(crate) file: SliceFile,
    /// Every ResourceClaim (live only).
    pub(crate) claims: Vec<ResourceClaim>,
    /// Every pod (live, when asked).
    pub(crate) pods: Vec<Pod>,
}

/// Reads and merges `paths` (`-`: stdin, once).
pub(crate) fn read_files(paths: &[PathBuf]) -> anyhow::Result<SliceFile> {
    let mut all = SliceFile::default();
    let mut seen = Vec::new();
    let dashes = paths.iter().filter(|p| p.as_os_str() == "-").count();
    anyhow::ensure!(dashes <= 1, "--from-slices: `-` (stdin) given twice");
    for p in paths {
        let (text, name) = if p.as_os_str() == "-" {
            let mut t = String::new();
            std::io::stdin()
                .read_to_string(&mut t)
                .context("reading slices from stdin")?;
            (t, "stdin".to_string())
        } else {
            let t =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            (t, p.display().to_string())
        };
        all.merge(parse_slice_file(&text, &name)?, &name, &mut seen)?;
    }
    Ok(all)
}

/// Turns a read's error into one line: not reachable (naming the server), else the API's.
pub(crate) fn api_error(e: kube::Error, what: &str, server: &str) -> anyhow::Error {
    match e {
        kube::Error::Api(s) => anyhow!("reading {what}: {} ({})", s.message, s.code),
        other => anyhow!("cannot reach the API server at {server} (reading {what}): {other}"),
    }
}

/// `-` is the default chain (in-cluster, $KUBECONFIG, ~/.kube/config).
pub(crate) fn config_path(kubeconfig: &Path) -> Option<&Path> {
    (kubeconfig.as_os_str() != "-").then_some(kubeconfig)
}

/// Reads the live cluster's slices, classes and claims (and pods when `pods`), through
/// `kubeconfig` (`None`: in-cluster, $KUBECONFIG, ~/.kube/config).
pub(crate) fn read_live(kubeconfig: Option<&Path>, pods: bool) -> anyhow::Result<Live> {
    let rt = topoalign_probes::runtime(topoalign_probes::Threads::PerCpu)
        .context("starting the async runtime")?;
    rt.block_on(async {
        let config = topoalign_probes::kube_config(kubeconfig).await?;
        let server = config.cluster_url.to_string();
        let client = kube::Client::try_from(config).context("building the API client")?;
        let all = ListParams::default();
        let server = server.as_str();
        let err = |what: &'static str| move |e| api_error(e, what, server);
        let slices = Api::<ResourceSlice>::all(client.clone())
            .list(&all)
            .await
            .map_err(err("ResourceSlices"))?
            .items;
        let classes = Api::<DeviceClass>::all(client.clone())
            .list(&all)
            .await
            .map_err(err("DeviceClasses"))?
            .items;
        let claims = Api::<ResourceClaim>::all(client.clone())
            .list(&all)
            .await
            .map_err(err("ResourceClaims"))?
            .items;
        let pods = if pods {
            Api::<Pod>::all(client.clone())
                .list(&all)
                .await
                .map_err(err("pods"))?
                .items
        } else {
            Vec::new()
        };
        Ok(Live {
            file: SliceFile { slices, classes },
            claims,
            pods,
        })
    })
}
