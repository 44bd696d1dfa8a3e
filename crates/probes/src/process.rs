//! The parts every long-running topoalign process (the DRA driver, the node agent, the
//! scheduler extender) is assembled from, defined once: the Kubernetes API client from a
//! kubeconfig (or the in-cluster/`$KUBECONFIG`/`~/.kube/config` inference), the
//! SIGTERM/SIGINT shutdown future, the tokio runtime, and a serving process's start (its
//! runtime with the signal handlers installed, [`serving`]) and stop line
//! ([`say_stopping`]).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;

use tokio::signal::unix::{SignalKind, signal};

/// Why no API client could be made.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The kubeconfig given cannot be read or used.
    #[error("reading kubeconfig {}: {source}", path.display())]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        source: kube::config::KubeconfigError,
    },
    /// No kubeconfig was given and none could be inferred.
    #[error("no kubeconfig given and none found (in-cluster, $KUBECONFIG, ~/.kube/config): {0}")]
    Infer(#[source] kube::config::InferConfigError),
    /// The client cannot be built from the configuration.
    #[error("building the API client: {0}")]
    Client(#[source] kube::Error),
}

/// The client configuration of `kubeconfig`, else the in-cluster configuration,
/// `$KUBECONFIG` or `~/.kube/config` (its `cluster_url` names the server in messages).
pub async fn kube_config(kubeconfig: Option<&Path>) -> Result<kube::Config, ClientError> {
    Ok(match kubeconfig {
        Some(p) => {
            let failed = |source| ClientError::Kubeconfig {
                path: p.to_path_buf(),
                source,
            };
            let kc = kube::config::Kubeconfig::read_from(p).map_err(failed)?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(failed)?
        }
        None => kube::Config::infer().await.map_err(ClientError::Infer)?,
    })
}

/// An API client from [`kube_config`].
pub async fn kube_client(kubeconfig: Option<&Path>) -> Result<kube::Client, ClientError> {
    kube::Client::try_from(kube_config(kubeconfig).await?).map_err(ClientError::Client)
}

/// Installs the SIGTERM and SIGINT handlers now and returns a future that resolves with
/// the name of the first of them to arrive (`"SIGTERM"` or `"SIGINT"`).
pub fn shutdown_signals() -> std::io::Result<impl Future<Output = &'static str> + Send> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        }
    })
}

/// The name of the first SIGTERM/SIGINT, once it comes ([`shutdown_signals`]).
pub type Signalled = Pin<Box<dyn Future<Output = &'static str> + Send>>;

/// A serving process once started: its runtime, the SIGTERM/SIGINT handlers installed.
pub struct Serving {
    /// The runtime to serve on.
    pub runtime: tokio::runtime::Runtime,
    /// The first signal's name.
    pub signalled: Signalled,
}

/// Why a serving process could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// No runtime.
    #[error("starting the async runtime")]
    Runtime(#[source] std::io::Error),
    /// No signal handlers.
    #[error("installing the SIGTERM/SIGINT handlers")]
    Signals(#[source] std::io::Error),
}

/// Starts a serving process: a runtime with `threads`, then the SIGTERM/SIGINT handlers.
pub fn serving(threads: Threads) -> Result<Serving, StartError> {
    let runtime = runtime(threads).map_err(StartError::Runtime)?;
    let signalled = {
        let _in_runtime = runtime.enter();
        shutdown_signals().map_err(StartError::Signals)?
    };
    Ok(Serving {
        runtime,
        signalled: Box::pin(signalled),
    })
}

/// The stop future of the process `process`: resolves when `signalled` does, having said
/// `topoalign PROCESS: SIGTERM, stopping` on stderr.
pub async fn say_stopping(process: &'static str, signalled: Signalled) {
    eprintln!("topoalign {process}: {}, stopping", signalled.await);
}

/// The threads of a process's runtime.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Threads {
    /// tokio's defaults: a worker per CPU.
    #[default]
    PerCpu,
    /// A fixed number of workers and of blocking threads (a node agent sharing its node
    /// with the workloads).
    Fixed {
        /// Worker threads.
        workers: usize,
        /// At most this many blocking threads.
        blocking: usize,
    },
}

/// A multi-threaded tokio runtime with I/O and timers enabled.
pub fn runtime(threads: Threads) -> std::io::Result<tokio::runtime::Runtime> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    if let Threads::Fixed { workers, blocking } = threads {
        b.worker_threads(workers).max_blocking_threads(blocking);
    }
    b.enable_all().build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_kubeconfig_names_the_file() {
        let rt = runtime(Threads::Fixed {
            workers: 1,
            blocking: 1,
        })
        .unwrap();
        let Err(e) = rt.block_on(kube_client(Some(Path::new("/nonexistent/kubeconfig")))) else {
            panic!("a client from a missing kubeconfig");
        };
        assert!(matches!(e, ClientError::Kubeconfig { .. }), "{e:?}");
        assert!(
            e.to_string()
                .starts_with("reading kubeconfig /nonexistent/kubeconfig: "),
            "{e}"
        );
    }

    #[test]
    fn a_serving_process_has_its_runtime_and_waits_for_a_signal() {
        let s = serving(Threads::Fixed {
            workers: 1,
            blocking: 1,
        })
        .unwrap();
        let stop = say_stopping("test", s.signalled);
        let waited = s.runtime.block_on(async {
            tokio::time::timeout(std::time::Duration::from_millis(20), stop).await
        });
        assert!(waited.is_err(), "stopped without a signal");
        let stop = say_stopping("test", Box::pin(async { "SIGTERM" }));
        s.runtime.block_on(stop);
    }

    #[test]
    fn the_signal_future_waits_for_a_signal() {
        let rt = runtime(Threads::default()).unwrap();
        rt.block_on(async {
            let signalled = shutdown_signals().unwrap();
            let waited =
                tokio::time::timeout(std::time::Duration::from_millis(20), signalled).await;
            assert!(waited.is_err(), "resolved without a signal");
        });
    }
}
