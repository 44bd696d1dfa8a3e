//! The one policy of the node agents' rescans of the NICs' neighbours (the agent's and
//! the driver's): a read that fails after start keeps the last good neighbours (a
//! warning names the source; the caller counts it under [`REREAD_COMPONENT`]), and
//! neighbours equal to the last good ones bring nothing.

use std::fmt::Display;

use topoalign_topology::Neighbours;

use crate::facts::Wiring;

/// The `component` label the agent's and the driver's error counters give a failed
/// re-read of the NICs' neighbours.
pub const REREAD_COMPONENT: &str = "neighbours";

/// What a read of the neighbours after start brings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reread {
    /// The same neighbours as the last good ones (or no source to read).
    Same,
    /// New neighbours.
    Changed(Wiring),
    /// The read failed (logged): the last good neighbours stay.
    Failed,
}

/// Judges `read` (what [`crate::read_wiring`] gave after start) against the `last` good
/// neighbours (`None`: none known).
pub fn reread<E: Display>(read: Result<Option<Wiring>, E>, last: Option<&Neighbours>) -> Reread {
    match read {
        Ok(None) => Reread::Same,
        Ok(Some(w)) if Some(&w.neighbours) == last => Reread::Same,
        Ok(Some(w)) => Reread::Changed(w),
        Err(e) => {
            tracing::warn!(error = %e, "reading the NICs' neighbours again failed; keeping the last good ones");
            Reread::Failed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_new_neighbours_count_and_a_failure_keeps_the_last() {
        let other = Neighbours {
            sources: vec!["lldpctl -f json".to_string()],
            ..Neighbours::default()
        };
        let wiring = |n: &Neighbours| Wiring {
            neighbours: n.clone(),
            warnings: Vec::new(),
        };
        let last = Neighbours::default();
        assert_eq!(reread::<String>(Ok(None), Some(&last)), Reread::Same);
        assert_eq!(
            reread::<String>(Ok(Some(wiring(&last))), Some(&last)),
            Reread::Same
        );
        assert_eq!(
            reread::<String>(Ok(Some(wiring(&other))), Some(&last)),
            Reread::Changed(wiring(&other))
        );
        assert_eq!(
            reread::<String>(Ok(Some(wiring(&last))), None),
            Reread::Changed(wiring(&last)),
            "no last good neighbours: any read is new"
        );
        assert_eq!(reread(Err("gone"), Some(&last)), Reread::Failed);
    }
}
