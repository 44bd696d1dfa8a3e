//! `topoalign`: topology-aware GPU + NIC placement for Kubernetes.
//!
//! A thin binary: it parses arguments, calls the libraries and formats their results.

mod cmd;
mod output;
mod source;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Topology-aware GPU + NIC placement for Kubernetes.
#[derive(Debug, Parser)]
#[command(name = "topoalign", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Discover a node's topology (sysfs, a profile, or saved vendor tool output).
    Discover(cmd::discover::Args),
    /// Print the pair matrix in `nvidia-smi topo -m` layout, for any vendor.
    Matrix(cmd::matrix::Args),
    /// Draw the machine as SVG or Graphviz DOT.
    Draw(cmd::draw::Args),
    /// List, show or materialise the built-in machine profiles.
    Profile(cmd::profile::Args),
    /// Choose GPUs, NICs and CPUs for a pod, and explain the choice.
    Plan(Box<cmd::plan::Args>),
    /// Simulate a fleet under several placement policies.
    Simulate(Box<cmd::simulate::Args>),
    /// What GPU+NIC pods get with the Topology Manager off, restricted, and with topoalign, on one screen.
    Demo(cmd::demo::Args),
    /// Simulate the kubelet Topology Manager for a pod on a node.
    Tm(Box<cmd::tm::Args>),
    /// Show, change or roll back a KubeletConfiguration file.
    #[command(name = "kubelet-config")]
    KubeletConfig(cmd::kubelet_config::Args),
    /// Check, from inside a pod or on a host, that each GPU has a close NIC.
    Verify(cmd::verify::Args),
    /// Lint Kubernetes manifests for topology-alignment problems.
    Lint(cmd::lint::Args),
    /// Put a VM's passed-through GPUs and NICs on their host NUMA node and PCIe switch.
    Vm(Box<cmd::vm::Args>),
    /// Write a DRA claim for N GPUs each with its own NIC; --explain the allocator's pick.
    Claims(Box<cmd::claims::Args>),
    /// The node agent: publish ResourceSlices and serve the kubelet DRA plugin.
    Driver(Box<cmd::driver::Args>),
    /// The kube-scheduler extender: send each GPU+NIC pod to the node that can align it.
    Extender(Box<cmd::extender::Args>),
    /// The node agent for device-plugin clusters: pod-resources → NodeResourceTopology + labels.
    Agent(Box<cmd::agent::Args>),
    /// Explain a running pod's devices against the live cluster: pairs, classes, the best free choice.
    Explain(cmd::explain::Args),
    /// MIG geometry: plan GPU instances with explicit placements for a request mix.
    Mig(cmd::mig::Args),
    /// A multi-node job as Workload/PodGroup, Kueue or Volcano manifests, its pods on one rail set.
    Gang(cmd::gang::Args),
    /// Each NIC's neighbour switch (LLDP, InfiniBand), its rail, and the node's derived leaf.
    Rails(cmd::rails::Args),
    /// The admission webhook: pods written for device plugins get topoalign's GPU+NIC pairs.
    Webhook(Box<cmd::webhook::Args>),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    install_log_subscriber(&cli.command);
    let result = match cli.command {
        Command::Discover(a) => cmd::discover::run(a),
        Command::Matrix(a) => cmd::matrix::run(a),
        Command::Draw(a) => cmd::draw::run(a),
        Command::Profile(a) => cmd::profile::run(a),
        Command::Plan(a) => cmd::plan::run(*a),
        Command::Simulate(a) => cmd::simulate::run(*a),
        Command::Demo(a) => cmd::demo::run(a),
        Command::Tm(a) => cmd::tm::run(*a),
        Command::KubeletConfig(a) => cmd::kubelet_config::run(a),
        Command::Verify(a) => cmd::verify::run(a),
        Command::Lint(a) => cmd::lint::run(a),
        Command::Vm(a) => cmd::vm::run(*a),
        Command::Claims(a) => cmd::claims::run(*a),
        Command::Driver(a) => cmd::driver::run(*a),
        Command::Extender(a) => cmd::extender::run(*a),
        Command::Agent(a) => cmd::agent::run(*a),
        Command::Explain(a) => cmd::explain::run(a),
        Command::Mig(a) => cmd::mig::run(a),
        Command::Gang(a) => cmd::gang::run(a),
        Command::Rails(a) => cmd::rails::run(a),
        Command::Webhook(a) => cmd::webhook::run(*a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", output::error_text(&e));
            ExitCode::from(2)
        }
    }
}

/// Installs the one log subscriber (stderr), once the arguments are known: a
/// long-running process's as its flags ask (`--log-format`, `--log-filter`, the process's
/// own defaults), a one-shot command's otherwise.
fn install_log_subscriber(command: &Command) {
    match command {
        Command::Driver(a) if !a.dry_run => a.process.install_logging(),
        Command::Agent(a) => a.install_logging(),
        Command::Extender(a) => a.install_logging(),
        Command::Webhook(a) if a.is_server() => a.serve.process.install_logging(),
        _ => topoalign_probes::install_command_logging(),
    }
}
