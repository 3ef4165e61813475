//! `cycle`: collapses each strongly connected component of sequence edges to one receipt.
//!
//! **What.** Traces assembled from out-of-order logs, or with injected edges, can contain
//! cycles, and a cycle has no order to render in. Each strongly connected component of more
//! than one event is retired as a unit and rendered as one receipt stub at its place in a
//! topological order of the rest. Every member names the same justification, the component's
//! first member (which reports none), so a cycle of any length costs one id per member.
//!
//! **Why it is safe.** Every member stays recoverable by id. Protected members (retention)
//! are not collapsed: they are rendered at the component's place. An event that names itself
//! as parent is not a cycle: the self-edge is ignored and reported, and the event is kept
//! (it does not silently disappear).
//!
//! **Example.**
//! ```text
//! before: [c1] call poll({})  [c2] result of c1: retry  [c3] call poll({})   (c3 → c1 injected)
//! after:  [receipts c1 c2 c3: cycle collapsed]
//! ```
//!
//! **Code.** `cycle`.

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::pass::{Cx, Pass, PassDoc};
use crate::plan::{Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::Cycle],
    summary: "collapses each cycle of sequence edges (strongly connected component) to one receipt",
    doc: include_str!("cycles.rs"),
};

/// State: the component each cyclic item belongs to (by its first member).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Cycles {
    head_of: HashMap<usize, usize>,
    components: Vec<Vec<usize>>,
}

impl Pass for Cycles {
    fn build(_: &super::pass::Build<'_>) -> Option<Self> {
        Some(Self::default())
    }
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn structural(&self) -> bool {
        true
    }

    fn update(&mut self, cx: &Cx<'_>, _new: Range<usize>, _changed: &[usize]) -> Vec<usize> {
        let now = cx.graph.cycles();
        if now == self.components.as_slice() {
            return Vec::new();
        }
        let mut changed: Vec<usize> = self.head_of.keys().copied().collect();
        self.components = now.to_vec();
        self.head_of.clear();
        for members in &self.components {
            for &m in members {
                self.head_of.insert(m, members[0]);
                changed.push(m);
            }
        }
        changed.sort_unstable();
        changed.dedup();
        changed
    }

    fn verdict(&self, _cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        // One id, the same for the whole component (its first member, which names itself):
        // listing every other member would make the report quadratic in the cycle's length.
        let head = *self.head_of.get(&i)?;
        Some(Verdict::retire(Reason::Cycle, vec![head]))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::passes::testing::run;
    use crate::plan::Reason;

    #[test]
    fn injected_edge_cycle_collapses_to_one_stub() {
        let out = run(&[
            json!({"id": "c1", "type": "decision", "content": "poll"}),
            json!({"id": "c2", "type": "decision", "parent_id": "c1", "content": "retry"}),
            json!({"id": "c3", "type": "decision", "parent_id": "c2", "content": "poll again"}),
            json!({"id": "x", "type": "edge_injection", "src": "c3", "dst": "c1"}),
            json!({"id": "after", "type": "decision", "parent_id": "c3", "content": "done"}),
        ]);
        assert!(out.retired("c1", Reason::Cycle, &[]));
        assert!(out.retired("c3", Reason::Cycle, &["c1"]));
        assert!(out.kept("after"));
        assert_eq!(
            out.output,
            "[receipts c1 c2 c3: cycle collapsed]\n[after] decision: done\n"
        );
    }

    #[test]
    fn critical_members_are_not_collapsed() {
        let out = run(&[
            json!({"id": "c1", "type": "decision", "content": "poll"}),
            json!({"id": "c2", "type": "decision", "parent_id": "c1", "content": "vital", "tags": ["critical"]}),
            json!({"id": "x", "type": "edge_injection", "src": "c2", "dst": "c1"}),
        ]);
        assert!(out.kept("c2"));
        assert!(out.retired("c1", Reason::Cycle, &[]));
        assert!(out.output.contains("[c2] decision: vital"));
    }

    #[test]
    fn self_parent_event_is_kept_with_a_warning() {
        let text = r#"{"id":"s","type":"decision","timestamp":1,"parent_id":"s","content":"me"}"#;
        let out = crate::compile(text, &Default::default()).unwrap();
        assert_eq!(out.output, "[s] decision: me\n");
        assert_eq!(out.warnings.len(), 1);
        assert!(out.warnings[0].to_string().contains("ignored"));
    }
}
