//! `tm --matrix`: the policy matrix on one or two SR-IOV pools, with what changes between
//! them, as one result to print as text or to serialize.

use serde::{Serialize, Serializer};
use topoalign_topology::Topology;

use crate::matrix::{MatrixRow, MatrixSpec, seed_matrix};
use crate::simulate::SimError;
use crate::text::{matrix_difference, matrix_text};

/// The matrix run on each pool in turn.
#[derive(Debug, Clone)]
pub struct MatrixRun {
    /// The node's name.
    pub node: String,
    /// Each pool's spec and rows, in run order.
    pub tables: Vec<(MatrixSpec, Vec<MatrixRow>)>,
}

/// Runs `base` (draws, VF resource, sizes) on the VF pool `vfs_per_pf` names: `Some(0)`
/// every enabled VF, `Some(n)` n VFs per PF; `None` the profile's own pool, then one VF
/// per PF, so that the difference a pool makes shows.
pub fn run_matrix(
    topo: &Topology,
    base: &MatrixSpec,
    vfs_per_pf: Option<u32>,
) -> Result<MatrixRun, SimError> {
    let pools: Vec<Option<u32>> = match vfs_per_pf {
        Some(n) => vec![(n > 0).then_some(n)],
        None => vec![None, Some(1)],
    };
    let mut tables = Vec::new();
    for vfs_per_pf in pools {
        let spec = MatrixSpec {
            vfs_per_pf,
            ..base.clone()
        };
        let rows = seed_matrix(topo, &spec)?;
        tables.push((spec, rows));
    }
    Ok(MatrixRun {
        node: topo.name.clone(),
        tables,
    })
}

impl MatrixRun {
    /// Each pool's matrix, the second preceded by what changed from the first.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (i, (spec, rows)) in self.tables.iter().enumerate() {
            if i > 0 {
                let (a, b) = (&self.tables[i - 1], &self.tables[i]);
                let difference = matrix_difference((&a.0, &a.1), (&b.0, &b.1));
                out += &format!("\n{difference}\n");
            }
            out += &matrix_text(&self.node, spec, rows);
        }
        out
    }
}

/// One pool: its rows; several: a list of each pool's rows.
impl Serialize for MatrixRun {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let all: Vec<&Vec<MatrixRow>> = self.tables.iter().map(|(_, rows)| rows).collect();
        match all.as_slice() {
            [one] => one.serialize(s),
            many => many.serialize(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(vfs_per_pf: Option<u32>) -> MatrixRun {
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        let base = MatrixSpec {
            draws: 5,
            ..MatrixSpec::default()
        };
        run_matrix(&topo, &base, vfs_per_pf).unwrap()
    }

    #[test]
    fn without_a_pool_both_pools_run_and_the_text_compares_them() {
        let m = run(None);
        let pools: Vec<_> = m.tables.iter().map(|(s, _)| s.vfs_per_pf).collect();
        assert_eq!(pools, [None, Some(1)]);
        let text = m.text();
        assert_eq!(
            text.matches("Topology Manager policies on mi300x-8")
                .count(),
            2
        );
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(v.as_array().unwrap().len(), 2);
        assert!(v[0].is_array());
    }

    #[test]
    fn zero_means_every_vf_and_one_pool_serializes_as_its_rows() {
        let m = run(Some(0));
        assert_eq!(m.tables.len(), 1);
        assert_eq!(m.tables[0].0.vfs_per_pf, None);
        let v = serde_json::to_value(&m).unwrap();
        assert!(v[0]["policy"].is_string(), "{v}");
        assert!(!m.text().starts_with('\n'));
    }
}
