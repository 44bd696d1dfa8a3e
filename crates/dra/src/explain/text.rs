//! An [`Explanation`] in words, as `topoalign claims --explain` prints it below the claim.

use topoalign_topology::PcieClass;

use crate::explain::claim::{Explanation, Side};

impl Side {
    /// `title: worst CLASS, rank sum N`, then one line per GPU with its NICs and classes.
    pub fn text(&self, title: &str) -> String {
        let worst = self.worst.map_or("-", PcieClass::as_str);
        let mut out = format!("{title}: worst {worst}, rank sum {}\n", self.rank_sum);
        for p in &self.pairs {
            let nics: Vec<String> = p
                .nics
                .iter()
                .zip(&p.classes)
                .map(|(n, c)| format!("{n} ({c})"))
                .collect();
            out += &format!("  GPU {} → {}\n", p.gpu, nics.join(", "));
        }
        out
    }
}

impl Explanation {
    /// The allocator's pick, the planner's optimum and the verdict, in words.
    pub fn text(&self) -> String {
        let steps = self.outcome.steps;
        let mut out = match &self.allocator {
            Some(a) => a.text("stock allocator (first fit)"),
            None if self.outcome.gave_up => format!(
                "stock allocator: gave up after trying {steps} devices without a solution (the scheduler's Filter would time out)\n"
            ),
            None => format!("stock allocator: no solution ({steps} devices tried)\n"),
        };
        out += &match (&self.planner, &self.planner_error) {
            (Some(p), _) => p.text("topoalign plan (optimum)"),
            (None, Some(err)) => format!("topoalign plan: {err}\n"),
            (None, None) => "topoalign plan: no answer\n".to_string(),
        };
        if !self.cpus.is_empty() {
            out += "CPUs (dra-driver-cpu):\n";
            out += &crate::explain::cpus::cpu_text(&self.cpus);
        }
        let verdict = if self.as_good {
            "the allocator's choice is as good as the optimum"
        } else {
            "the allocator's choice is WORSE than the optimum"
        };
        out + &format!("{verdict} ({steps} devices tried by the allocator)\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::claim::ChosenPair;

    #[test]
    fn the_explanation_says_which_side_is_worse() {
        let gpu = "0000:11:00.0".parse().unwrap();
        let nic = "0000:0c:00.0".parse().unwrap();
        let side = |class| Side {
            pairs: vec![ChosenPair {
                gpu,
                nics: vec![nic],
                classes: vec![class],
                devices: vec![],
            }],
            worst: Some(class),
            rank_sum: class.rank(),
        };
        let e = Explanation {
            outcome: crate::alloc::Outcome {
                allocation: None,
                consumed: vec![],
                steps: 7,
                gave_up: false,
            },
            allocator: Some(side(PcieClass::Node)),
            planner: Some(side(PcieClass::Pix)),
            planner_error: None,
            cpus: vec![],
            as_good: false,
        };
        assert_eq!(
            e.text(),
            "stock allocator (first fit): worst NODE, rank sum 3\n  GPU 0000:11:00.0 → 0000:0c:00.0 (NODE)\n\
             topoalign plan (optimum): worst PIX, rank sum 0\n  GPU 0000:11:00.0 → 0000:0c:00.0 (PIX)\n\
             the allocator's choice is WORSE than the optimum (7 devices tried by the allocator)\n"
        );
    }
}
