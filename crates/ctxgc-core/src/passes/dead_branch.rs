//! `dead-branch`: retires everything reachable from an `abandon` event's targets.
//!
//! **What.** An `abandon` event names the roots of branches the agent gave up (`ref_to`).
//! Every event reachable from a root along sequence edges (`parent_id`, `edge_injection`) is
//! retired, the root included, whenever it arrives: a child appended after the abandon is as
//! dead as its parent.
//!
//! **Why it is safe.** The agent itself declared the branch dead; what it learned there that
//! still matters lives outside it (the decision to pivot is a sibling of the branch, not a
//! descendant). Protected events (retention) stay.
//!
//! **Example.**
//! ```text
//! before: [a01] decision: Attempt memcached      after: [receipts a01 a02 a03 ab01: inside
//!         [a02] cache_type = memcached                    branch abandoned by ab01]
//!         [a03] call test_cache({})                      [e04] decision: Pivoting to CacheDB
//!         [ab01] abandon a01
//!         [e04] decision: Pivoting to CacheDB
//! ```
//!
//! **Code.** `dead-branch`.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::pass::{Cx, Pass, PassDoc};
use crate::ir::Kind;
use crate::plan::{Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::DeadBranch],
    summary: "retires every event reachable from an abandon event's ref_to targets",
    doc: include_str!("dead_branch.rs"),
};

const NONE: u32 = u32::MAX;

/// State: which abandon killed each item (`NONE` when alive).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DeadBranches {
    killed_by: Vec<u32>,
}

impl DeadBranches {
    fn mark_from(&mut self, cx: &Cx<'_>, root: usize, abandon: usize, changed: &mut Vec<usize>) {
        let mut stack = vec![root];
        while let Some(node) = stack.pop() {
            if self.killed_by[node] != NONE {
                continue;
            }
            self.killed_by[node] = abandon as u32;
            changed.push(node);
            stack.extend(cx.graph.children(node));
        }
    }
}

impl Pass for DeadBranches {
    fn build(_: &super::pass::Build<'_>) -> Option<Self> {
        Some(Self::default())
    }
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn structural(&self) -> bool {
        true
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, _changed: &[usize]) -> Vec<usize> {
        self.killed_by.resize(cx.items.len(), NONE);
        let mut changed = Vec::new();
        for i in new {
            if let Kind::Abandon { targets } = &cx.items[i].kind {
                for target in targets {
                    if let Some(root) = cx.resolve(target) {
                        self.mark_from(cx, root, i, &mut changed);
                    }
                }
            }
        }
        // Edges that reach into a dead branch's descendants after the abandon: new children,
        // injected edges, forward references that resolved.
        for &(parent, child) in cx.fresh_edges {
            let killer = self.killed_by[parent];
            if killer != NONE {
                self.mark_from(cx, child, killer as usize, &mut changed);
            }
        }
        changed.sort_unstable();
        changed.dedup();
        changed
    }

    fn verdict(&self, _cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        match self.killed_by.get(i) {
            Some(&k) if k != NONE => Some(Verdict::retire(Reason::DeadBranch, vec![k as usize])),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::passes::testing::run;
    use crate::plan::Reason;

    #[test]
    fn retires_branch_and_keeps_sibling() {
        let out = run(&[
            json!({"id": "root", "type": "decision", "content": "start"}),
            json!({"id": "a1", "type": "decision", "parent_id": "root", "content": "try A"}),
            json!({"id": "a2", "type": "set_var", "parent_id": "a1", "key": "k", "value": 1}),
            json!({"id": "ab", "type": "abandon", "parent_id": "a2", "ref_to": ["a1"]}),
            json!({"id": "b1", "type": "decision", "parent_id": "root", "content": "try B"}),
        ]);
        for id in ["a1", "a2", "ab"] {
            assert!(out.retired(id, Reason::DeadBranch, &["ab"]), "{id}");
        }
        assert!(out.kept("root") && out.kept("b1"));
        assert!(
            out.output
                .contains("[receipts a1 a2 ab: inside branch abandoned by ab]")
        );
    }

    #[test]
    fn children_arriving_after_the_abandon_are_dead_too() {
        let out = run(&[
            json!({"id": "a1", "type": "decision", "content": "try A"}),
            json!({"id": "ab", "type": "abandon", "ref_to": ["a1"]}),
            json!({"id": "late", "type": "file_read", "parent_id": "a1", "path": "x"}),
        ]);
        assert!(out.retired("late", Reason::DeadBranch, &["ab"]));
        assert!(out.kept("ab"), "an abandon outside its branch stays");
    }

    #[test]
    fn protected_events_in_a_dead_branch_stay() {
        let out = run(&[
            json!({"id": "a1", "type": "decision", "content": "try A"}),
            json!({"id": "a2", "type": "decision", "parent_id": "a1", "content": "key finding", "importance": "critical"}),
            json!({"id": "ab", "type": "abandon", "ref_to": ["a1"]}),
        ]);
        assert!(out.kept("a2"));
        assert_eq!(
            out.of("a2").note.as_deref(),
            Some("protected by retention from dead-branch")
        );
    }
}
