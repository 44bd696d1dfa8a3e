//! `topoalign plan`'s request flags (the `clap` feature): one clap struct the CLI
//! flattens, turned into a [`Request`] by [`RequestArgs::request`].

use clap::builder::{PossibleValuesParser, TypedValueParser};
use topoalign_kube_types::Quantity;
use topoalign_topology::{LinkLayer, PcieClass};

use crate::words::{
    GPU_LINK_WORDS, LINK_LAYER_WORDS, NIC_ROLE_WORDS, UnknownWord, parse_link_layer,
};
use crate::{GpuLinkBound, NicCount, NicRole, Request};

/// What a pod asks of one node, as flags.
#[derive(Debug, Clone, clap::Args)]
pub struct RequestArgs {
    /// Number of GPUs (0 to 4096).
    #[arg(long, allow_negative_numbers = true, value_parser = count)]
    pub gpus: usize,
    /// Total number of NICs, spread over the GPUs as evenly as possible.
    #[arg(long, conflicts_with = "nics_per_gpu", allow_negative_numbers = true, value_parser = count)]
    pub nics: Option<usize>,
    /// NICs for every GPU.
    #[arg(long, allow_negative_numbers = true, value_parser = count)]
    pub nics_per_gpu: Option<usize>,
    /// Exclusive CPUs.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true, value_parser = count)]
    pub cpus: usize,
    /// Memory, e.g. `64Gi`, `512Mi`, `1G` or plain bytes.
    #[arg(long)]
    pub memory: Option<Quantity>,
    /// Every GPU↔NIC pair at most this class (PIX, PXB, PHB, NODE, SYS).
    #[arg(long)]
    pub max_pair: Option<PcieClass>,
    /// Whether every chosen GPU pair must be NVLink/xGMI connected.
    #[arg(long, value_parser = words(GPU_LINK_WORDS, str::parse::<GpuLinkBound>), default_value = "any")]
    pub gpu_link: GpuLinkBound,
    /// Only GPUs whose vendor contains this (nvidia, amd, …).
    #[arg(long)]
    pub gpu_vendor: Option<String>,
    /// Only GPUs whose model contains this.
    #[arg(long)]
    pub gpu_model: Option<String>,
    /// Only NICs with this link layer.
    #[arg(long, value_parser = words(LINK_LAYER_WORDS, parse_link_layer))]
    pub nic_link_layer: Option<LinkLayer>,
    /// Which SR-IOV functions may be chosen.
    #[arg(long, value_parser = words(NIC_ROLE_WORDS, str::parse::<NicRole>), default_value = "any")]
    pub nic_role: NicRole,
    /// Only NICs with an RDMA device.
    #[arg(long)]
    pub require_rdma: bool,
}

/// A flag value the request cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    /// A count outside 0..=4096.
    #[error("`{0}` is not a count from 0 to 4096")]
    Count(String),
    /// `--memory` zero or negative.
    #[error("--memory `{0}`: expected a positive amount of bytes like 64Gi")]
    Memory(Quantity),
    /// `--memory` beyond 64 bits.
    #[error("--memory does not fit in 64 bits")]
    MemoryTooLarge,
}

/// Accepts `words` (listed in help) and parses them with `parse`.
fn words<T: Clone + Send + Sync + 'static>(
    words: &'static [&'static str],
    parse: fn(&str) -> Result<T, UnknownWord>,
) -> impl TypedValueParser<Value = T> {
    PossibleValuesParser::new(words).try_map(move |s| parse(&s))
}

/// A count 0..=4096.
fn count(s: &str) -> Result<usize, ArgError> {
    match s.parse::<u16>() {
        Ok(n) if n <= 4096 => Ok(usize::from(n)),
        _ => Err(ArgError::Count(s.to_string())),
    }
}

impl RequestArgs {
    /// The request these flags describe.
    pub fn request(&self) -> Result<Request, ArgError> {
        let mut req = Request::new(
            self.gpus,
            NicCount::from_flags(self.nics, self.nics_per_gpu),
        );
        req.cpus = self.cpus;
        req.memory = match self.memory {
            Some(q) if q.is_positive() => {
                Some(u64::try_from(q.value()).map_err(|_| ArgError::MemoryTooLarge)?)
            }
            Some(q) => return Err(ArgError::Memory(q)),
            None => None,
        };
        req.max_pair = self.max_pair;
        req.gpu_link = self.gpu_link;
        req.gpu_vendor = self.gpu_vendor.clone();
        req.gpu_model = self.gpu_model.clone();
        req.nic_link_layer = self.nic_link_layer;
        req.nic_role = self.nic_role;
        req.require_rdma = self.require_rdma;
        Ok(req)
    }
}

#[cfg(test)]
mod tests {
    use clap::{Args, FromArgMatches};

    use super::*;

    fn parse_args(argv: &[&str]) -> Result<RequestArgs, clap::Error> {
        let cmd = RequestArgs::augment_args(clap::Command::new("plan"));
        RequestArgs::from_arg_matches(&cmd.try_get_matches_from(argv)?)
    }

    fn parse(args: &[&str]) -> Result<Request, String> {
        let argv: Vec<&str> = std::iter::once("plan")
            .chain(args.iter().copied())
            .collect();
        let cli = parse_args(&argv).map_err(|e| e.to_string())?;
        cli.request().map_err(|e| e.to_string())
    }

    #[test]
    fn flags_become_the_request_and_bad_values_say_what_was_expected() {
        let r = parse(&["--gpus", "4", "--nics-per-gpu", "1", "--memory", "1Gi"]).unwrap();
        assert_eq!((r.gpus, r.total_nics(), r.memory), (4, 4, Some(1 << 30)));
        assert_eq!(r.gpu_link, GpuLinkBound::Any);
        let e = parse(&["--gpus", "-1"]).unwrap_err();
        assert!(e.contains("`-1` is not a count from 0 to 4096"), "{e}");
        assert!(parse(&["--gpus", "4097"]).is_err());
        let e = parse(&["--gpus", "1", "--memory", "0"]).unwrap_err();
        assert_eq!(
            e,
            "--memory `0`: expected a positive amount of bytes like 64Gi"
        );
        let e = parse(&["--gpus", "1", "--nic-role", "both"]).unwrap_err();
        assert!(e.contains("pf, vf, any"), "{e}");
    }
}
