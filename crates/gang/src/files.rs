//! A job as `topoalign gang` reads it: the job file, the release it is written for, and
//! the fleet's nodes when given.

use std::path::Path;

use topoalign_kube_types::KubeVersion;

use crate::{GangError, Job, fit_fleet, parse_job, parse_nodes};

/// Reads the job at `job` for the release `kubernetes` (default: 1.36 or newer) and, when
/// `nodes` names the fleet's nodes (`kubectl get nodes -o yaml`), fits its domain to them.
pub fn read_job(
    job: &Path,
    kubernetes: Option<KubeVersion>,
    nodes: Option<&Path>,
) -> Result<Job, GangError> {
    let read = |path: &Path| {
        let file = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => Ok((text, file)),
            Err(source) => Err(GangError::Read { file, source }),
        }
    };
    let (text, file) = read(job)?;
    let mut job = parse_job(&text, &file)?;
    job.kubernetes = kubernetes;
    if let Some(path) = nodes {
        let (text, file) = read(path)?;
        fit_fleet(&mut job, &parse_nodes(&text, &file)?, &file)?;
    }
    Ok(job)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_and_its_nodes_are_read_and_a_missing_file_named() {
        let dir = std::env::temp_dir().join(format!("gang-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let job = dir.join("job.yaml");
        std::fs::write(
            &job,
            "name: j\npods: 2\npairsPerPod: 4\ndomain: {level: leaf}\n",
        )
        .unwrap();
        let v: KubeVersion = "1.35".parse().unwrap();
        let j = read_job(&job, Some(v), None).unwrap();
        assert_eq!((j.name.as_str(), j.kubernetes), ("j", Some(v)));
        let m = crate::manifests(&j, crate::Dialect::Kube).unwrap();
        let list = m.list();
        assert_eq!(
            (list["apiVersion"].as_str(), list["kind"].as_str()),
            (Some("v1"), Some("List"))
        );
        assert_eq!(list["items"].as_array().unwrap(), &m.objects);
        let missing = dir.join("none.yaml");
        let e = read_job(&missing, None, None).unwrap_err();
        assert!(matches!(e, GangError::Read { .. }), "{e:?}");
        assert_eq!(e.to_string(), format!("reading {}", missing.display()));
        let e = read_job(&job, None, Some(&missing)).unwrap_err();
        assert!(matches!(e, GangError::Read { .. }), "{e:?}");
        let nodes = dir.join("nodes.yaml");
        std::fs::write(&nodes, "kind: List\nitems: []\n").unwrap();
        let e = read_job(&job, None, Some(&nodes)).unwrap_err();
        assert!(e.to_string().contains("no Node"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
