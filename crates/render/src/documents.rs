//! Shapes of the CLI's printed documents that several commands share: a document with
//! its MIG instances appended, the Topology Manager merge cases' table.

use serde::Serialize;
use topoalign_tm::MergeResult;

use crate::{MigRow, Table};

/// `value` (a JSON/YAML object) with the MIG instances appended as its `mig` list; with
/// no instances exactly `value`'s own document.
#[derive(Debug, Serialize)]
pub struct WithMig<'a, T: Serialize> {
    /// The document.
    #[serde(flatten)]
    pub value: &'a T,
    /// The MIG instances shown on it.
    #[serde(skip_serializing_if = "<[MigRow]>::is_empty")]
    pub mig: &'a [MigRow],
}

/// The merge results of `topoalign tm merge-cases` as a table: one row per case, the
/// refusal in place of a hint.
pub fn merge_table(results: &[MergeResult]) -> String {
    let mut t = Table::new(&["ID", "AFFINITY", "PREFERRED", "ADMIT", "ERROR"]);
    for r in results {
        let affinity = match &r.affinity {
            None => "nil".to_string(),
            Some(ids) => {
                let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
                format!("{{{}}}", ids.join(","))
            }
        };
        let yes_no = |b: bool| if b { "yes" } else { "no" }.to_string();
        t.row(vec![
            r.id.clone(),
            affinity,
            yes_no(r.preferred),
            yes_no(r.admit),
            r.error.clone().unwrap_or_else(|| "-".to_string()),
        ]);
    }
    t.render(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: &str, affinity: Option<Vec<u32>>, error: Option<&str>) -> MergeResult {
        MergeResult {
            id: id.into(),
            error: error.map(String::from),
            affinity,
            preferred: error.is_none(),
            admit: error.is_none(),
        }
    }

    #[test]
    fn merge_rows_show_the_mask_or_nil_and_the_refusal() {
        let text = merge_table(&[
            result("r", Some(vec![0, 1]), None),
            result("bad", None, Some("unknown policy")),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        let words = |l: &str| l.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(
            words(lines[0]),
            ["ID", "AFFINITY", "PREFERRED", "ADMIT", "ERROR"]
        );
        assert_eq!(words(lines[1]), ["r", "{0,1}", "yes", "yes", "-"]);
        assert_eq!(
            words(lines[2]),
            ["bad", "nil", "no", "no", "unknown", "policy"]
        );
    }

    #[test]
    fn mig_rows_are_appended_only_when_there_are_some() {
        #[derive(Serialize)]
        struct Doc {
            name: &'static str,
        }
        let doc = Doc { name: "n" };
        let bare = WithMig {
            value: &doc,
            mig: &[],
        };
        assert_eq!(serde_json::to_string(&bare).unwrap(), r#"{"name":"n"}"#);
        let rows = [MigRow {
            label: "MIG0".into(),
            parent: 0,
            parent_bus_id: "0000:18:00.0".into(),
            parent_uuid: None,
            model: "H100-80GB".into(),
            profile: "1g.10gb".into(),
            start: 0,
            size: 1,
            gi: None,
            ci: None,
            uuid: None,
            pcie_root: None,
            numa_node: Some(0),
            closest_nic: None,
            cells: None,
        }];
        let v = serde_json::to_value(WithMig {
            value: &doc,
            mig: &rows,
        })
        .unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["name", "mig"]);
        assert_eq!(v["mig"], serde_json::to_value(&rows).unwrap());
    }
}
