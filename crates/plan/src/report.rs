//! What `topoalign plan` prints: a plan, or the bound it could not meet, each naming the
//! machine it is for and, when the planner was timed, the timing.

use serde::Serialize;
use topoalign_topology::Topology;

use crate::{Plan, PlanError, PlanTiming};

/// A plan with its machine (`machine` after the plan's fields) and the timing, if any.
#[derive(Debug, Serialize)]
pub struct PlanReport<'a> {
    /// The plan.
    #[serde(flatten)]
    pub plan: &'a Plan,
    /// The machine's name.
    pub machine: &'a str,
    /// The `--time-iterations` timing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing: Option<&'a PlanTiming>,
}

impl PlanReport<'_> {
    /// The table: a `Machine:` line, the plan's table, the timing line.
    pub fn table(&self, topo: &Topology) -> String {
        let text = format!("Machine:    {}\n{}", self.machine, self.plan.table(topo));
        with_timing(text, self.timing)
    }
}

/// A request the machine cannot satisfy, as a finding (not an error of the command).
#[derive(Debug, Serialize)]
pub struct Refusal<'a> {
    /// The machine's name.
    pub machine: &'a str,
    /// `on `MACHINE`: ` and the planner's reason.
    pub error: String,
    /// Always true: what a reader tests.
    pub unsatisfiable: bool,
    /// The `--time-iterations` timing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timing: Option<&'a PlanTiming>,
}

impl<'a> Refusal<'a> {
    /// The refusal of `error` on `machine`.
    pub fn new(machine: &'a str, error: &PlanError, timing: Option<&'a PlanTiming>) -> Self {
        Refusal {
            machine,
            error: format!("on `{machine}`: {error}"),
            unsatisfiable: true,
            timing,
        }
    }

    /// The table: only the timing line, if any (the reason goes to stderr).
    pub fn table(&self) -> String {
        with_timing(String::new(), self.timing)
    }
}

/// `text` with the timing line after it, if any.
fn with_timing(mut text: String, timing: Option<&PlanTiming>) -> String {
    if let Some(t) = timing {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&t.text());
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CallTimes, NicCount, Planner, Request, Usage};

    fn timing() -> PlanTiming {
        let c = CallTimes {
            median_ms: 1.0,
            min_ms: 0.5,
            max_ms: 2.0,
        };
        PlanTiming {
            reps: 3,
            new_and_plan: c,
            plan_only: c,
        }
    }

    fn request(gpus: usize) -> Request {
        Request::new(gpus, NicCount::PerGpu(1))
    }

    #[test]
    fn the_report_names_the_machine_after_the_plan_and_the_timing_last() {
        let topo = topoalign_profiles::get("gb300-4").unwrap();
        let plan = Planner::new(&topo)
            .plan(&request(1), &Usage::empty())
            .unwrap();
        let t = timing();
        let r = PlanReport {
            plan: &plan,
            machine: &topo.name,
            timing: Some(&t),
        };
        let v = serde_json::to_value(&r).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys[keys.len() - 2..], ["machine", "timing"]);
        assert_eq!(v["gpus"], serde_json::to_value(&plan).unwrap()["gpus"]);
        let table = r.table(&topo);
        assert!(table.starts_with("Machine:    gb300-4\n"), "{table}");
        assert!(table.ends_with(&format!("\n{}\n", t.text())), "{table}");
        let untimed = PlanReport { timing: None, ..r };
        assert!(
            serde_json::to_value(&untimed)
                .unwrap()
                .get("timing")
                .is_none()
        );
        assert_eq!(
            untimed.table(&topo),
            format!("Machine:    gb300-4\n{}", plan.table(&topo))
        );
    }

    #[test]
    fn a_refusal_names_the_machine_and_prints_only_the_timing() {
        let topo = topoalign_profiles::get("gb300-4").unwrap();
        let e = Planner::new(&topo)
            .plan(&request(99), &Usage::empty())
            .unwrap_err();
        let r = Refusal::new(&topo.name, &e, None);
        assert_eq!(r.error, format!("on `gb300-4`: {e}"));
        assert_eq!(r.table(), "");
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["unsatisfiable"], true);
        let t = timing();
        let timed = Refusal::new(&topo.name, &e, Some(&t));
        assert_eq!(timed.table(), format!("{}\n", t.text()));
    }
}
