//! The words a command line uses for request fields (`--gpu-link nvlink`, `--nic-role pf`,
//! `--nic-link-layer ib`), parsed into the request's types.

use std::str::FromStr;

use thiserror::Error;
use topoalign_topology::LinkLayer;

use crate::request::{GpuLinkBound, NicCount, NicRole};

/// A word that is none of the accepted ones.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("`{word}`: expected one of {}", expected.join(", "))]
pub struct UnknownWord {
    /// The word given.
    pub word: String,
    /// The words accepted.
    pub expected: &'static [&'static str],
}

/// The words of [`GpuLinkBound`], in the order help lists them.
pub const GPU_LINK_WORDS: &[&str] = &["nvlink", "any"];
/// The words of [`NicRole`].
pub const NIC_ROLE_WORDS: &[&str] = &["pf", "vf", "any"];
/// The words of a [`LinkLayer`] filter.
pub const LINK_LAYER_WORDS: &[&str] = &["ib", "eth"];

fn unknown(word: &str, expected: &'static [&'static str]) -> UnknownWord {
    UnknownWord {
        word: word.to_string(),
        expected,
    }
}

impl FromStr for GpuLinkBound {
    type Err = UnknownWord;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "nvlink" => Ok(GpuLinkBound::Nvlink),
            "any" => Ok(GpuLinkBound::Any),
            _ => Err(unknown(s, GPU_LINK_WORDS)),
        }
    }
}

impl FromStr for NicRole {
    type Err = UnknownWord;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pf" => Ok(NicRole::Pf),
            "vf" => Ok(NicRole::Vf),
            "any" => Ok(NicRole::Any),
            _ => Err(unknown(s, NIC_ROLE_WORDS)),
        }
    }
}

/// `ib` (InfiniBand) or `eth` (Ethernet, RoCE).
pub fn parse_link_layer(s: &str) -> Result<LinkLayer, UnknownWord> {
    match s {
        "ib" => Ok(LinkLayer::InfiniBand),
        "eth" => Ok(LinkLayer::Ethernet),
        _ => Err(unknown(s, LINK_LAYER_WORDS)),
    }
}

impl NicCount {
    /// From `--nics M` (a total) or `--nics-per-gpu K`; the total wins, none is no NICs.
    pub fn from_flags(total: Option<usize>, per_gpu: Option<usize>) -> NicCount {
        match (total, per_gpu) {
            (Some(m), _) => NicCount::Total(m),
            (None, Some(k)) => NicCount::PerGpu(k),
            (None, None) => NicCount::Total(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_word_parses_and_others_say_what_is_expected() {
        for w in GPU_LINK_WORDS {
            assert!(w.parse::<GpuLinkBound>().is_ok(), "{w}");
        }
        for w in NIC_ROLE_WORDS {
            assert!(w.parse::<NicRole>().is_ok(), "{w}");
        }
        for w in LINK_LAYER_WORDS {
            assert!(parse_link_layer(w).is_ok(), "{w}");
        }
        assert_eq!(
            "NVLink".parse::<GpuLinkBound>().unwrap_err().to_string(),
            "`NVLink`: expected one of nvlink, any"
        );
        assert_eq!(parse_link_layer("ib"), Ok(LinkLayer::InfiniBand));
        assert_eq!("pf".parse(), Ok(NicRole::Pf));
    }

    #[test]
    fn nic_counts_from_flags() {
        assert_eq!(NicCount::from_flags(Some(3), None), NicCount::Total(3));
        assert_eq!(NicCount::from_flags(None, Some(2)), NicCount::PerGpu(2));
        assert_eq!(NicCount::from_flags(None, None), NicCount::Total(0));
    }
}
