//! `replaced-note`: retires a decision, requirement or constraint that a later one replaces.
//!
//! **What.** A `decision`, `requirement` or `constraint` event may list, in `supersedes`, the
//! ids of earlier decisions, requirements or constraints it replaces. Those are retired; the
//! receipt names the replacement. A trace says "replaces" only this way: explicitly, by id.
//!
//! **Why it is safe.** Nothing is inferred from the text, and notes on different subjects are
//! never compared, so a live value cannot be pruned by a note about something else. If the
//! replacement is itself retired (inside an abandoned branch), the original stays.
//!
//! **Example.**
//! ```text
//! before: [d1] decision: use PostgreSQL   [d4] decision: use SQLite (supersedes d1)
//! after:  [receipt d1: replaced by d4]    [d4] decision: use SQLite
//! ```
//!
//! **Code.** `replaced-note`.

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::pass::{Cx, Pass, PassDoc};
use crate::ir::Kind;
use crate::plan::{Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::ReplacedNote],
    summary: "retires a decision/requirement/constraint that a later one names in `supersedes`",
    doc: include_str!("replaced_notes.rs"),
};

/// State: for each replaced note, the notes that replace it, in order.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReplacedNotes {
    replaced_by: HashMap<usize, Vec<usize>>,
}

impl Pass for ReplacedNotes {
    fn build(_: &super::pass::Build<'_>) -> Option<Self> {
        Some(Self::default())
    }
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, changed: &[usize]) -> Vec<usize> {
        let mut moved = Vec::new();
        // A note names the first surviving note that replaced it.
        for &r in changed {
            if let Kind::Note { supersedes, .. } = &cx.items[r].kind {
                moved.extend(supersedes.iter().filter_map(|t| cx.resolve(t)));
            }
        }
        for i in new {
            if let Kind::Note { supersedes, .. } = &cx.items[i].kind {
                for target in supersedes {
                    if let Some(t) = cx.resolve(target) {
                        self.replaced_by.entry(t).or_default().push(i);
                        moved.push(t);
                    }
                }
            }
        }
        moved
    }

    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        let by = self
            .replaced_by
            .get(&i)?
            .iter()
            .copied()
            .find(|&r| cx.survives(r))?;
        cx.survives(i)
            .then(|| Verdict::retire(Reason::ReplacedNote, vec![by]))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::passes::testing::run;
    use crate::plan::Reason;

    #[test]
    fn explicit_supersedes_retires_only_the_named_note() {
        let out = run(&[
            json!({"id": "d1", "type": "decision", "content": "use PostgreSQL"}),
            json!({"id": "r1", "type": "requirement", "content": "p99 under 50 ms"}),
            json!({"id": "d2", "type": "decision", "content": "use SQLite", "supersedes": "d1"}),
            json!({"id": "k1", "type": "constraint", "content": "no network", "supersedes": ["r1"]}),
        ]);
        assert!(out.retired("d1", Reason::ReplacedNote, &["d2"]));
        assert!(out.retired("r1", Reason::ReplacedNote, &["k1"]));
        assert!(out.kept("d2") && out.kept("k1"));
    }

    #[test]
    fn a_replacement_inside_a_dead_branch_does_not_replace() {
        let out = run(&[
            json!({"id": "d1", "type": "decision", "content": "use PostgreSQL"}),
            json!({"id": "b", "type": "decision", "content": "explore"}),
            json!({"id": "d2", "type": "decision", "parent_id": "b", "content": "use SQLite", "supersedes": ["d1"]}),
            json!({"id": "ab", "type": "abandon", "parent_id": "d2", "ref_to": ["b"]}),
        ]);
        assert!(out.kept("d1"));
    }
}
