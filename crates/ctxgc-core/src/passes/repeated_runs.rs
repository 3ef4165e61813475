//! `repeated-run`: retires a successful run that a later identical run repeats.
//!
//! **What.** A successful `command_run`, `test_run`, `build_run` or `verification` is retired
//! when a later run is identical to it (same command or tests, same outcome, same other
//! fields) and no `file_edit` happened in between. The latest such run is kept; the receipt
//! names it.
//!
//! **Why it is safe.** With no edit in between, the later run re-verified the same code and
//! said the same thing. Failed runs are never retired here (failures carry detail), and an
//! edit in between makes the runs different evidence, so both stay.
//!
//! **Example.**
//! ```text
//! before: [e10] $ cargo test → exit 0   [e11] read README.md   [e12] $ cargo test → exit 0
//! after:  [receipt e10: repeated by e12]  [e11] read README.md  [e12] $ cargo test → exit 0
//! ```
//!
//! **Code.** `repeated-run`.

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::pass::{Cx, Pass, PassDoc};
use crate::ir::Kind;
use crate::plan::{Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::RepeatedRun],
    summary: "retires a successful run repeated later, identically, with no file_edit in between",
    doc: include_str!("repeated_runs.rs"),
};

/// State: successful runs by signature, each with the number of edits before it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RepeatedRuns {
    edits_seen: u32,
    /// signature → `(run, edits before it)`, in order.
    groups: HashMap<String, Vec<(usize, u32)>>,
}

impl Pass for RepeatedRuns {
    fn build(_: &super::pass::Build<'_>) -> Option<Self> {
        Some(Self::default())
    }
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, changed: &[usize]) -> Vec<usize> {
        let start = new.start;
        let mut moved = Vec::new();
        // An earlier run of the same epoch names the latest surviving one.
        for &m in changed {
            if let Kind::Run(run) = &cx.items[m].kind
                && let Some(group) = self.groups.get(&run.signature)
                && let Ok(pos) = group.binary_search_by_key(&m, |&(g, _)| g)
            {
                let epoch = group[pos].1;
                moved.extend(
                    group[..pos]
                        .iter()
                        .filter(|&&(_, e)| e == epoch)
                        .map(|&(g, _)| g),
                );
            }
        }
        for i in new {
            match &cx.items[i].kind {
                Kind::FileEdit { .. } => self.edits_seen += 1,
                Kind::Run(run) if run.success => {
                    let group = self.groups.entry(run.signature.clone()).or_default();
                    // The earlier runs since the last edit now name this one as the latest.
                    moved.extend(
                        group
                            .iter()
                            .rev()
                            .take_while(|&&(_, e)| e == self.edits_seen)
                            .map(|&(m, _)| m)
                            .filter(|&m| m < start),
                    );
                    group.push((i, self.edits_seen));
                }
                _ => {}
            }
        }
        moved
    }

    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        let Kind::Run(run) = &cx.items[i].kind else {
            return None;
        };
        if !run.success || !cx.survives(i) {
            return None;
        }
        let group = self.groups.get(&run.signature)?;
        let pos = group.binary_search_by_key(&i, |&(m, _)| m).ok()?;
        let epoch = group[pos].1;
        let end = group.partition_point(|&(_, e)| e <= epoch);
        let latest = group[pos + 1..end]
            .iter()
            .rev()
            .map(|&(m, _)| m)
            .find(|&m| cx.survives(m))?;
        Some(Verdict::retire(Reason::RepeatedRun, vec![latest]))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::passes::testing::run;
    use crate::plan::Reason;

    #[test]
    fn identical_successes_keep_the_latest() {
        let out = run(&[
            json!({"id": "t1", "type": "command_run", "command": "cargo  test", "exit_code": 0}),
            json!({"id": "x", "type": "file_read", "path": "README.md"}),
            json!({"id": "t2", "type": "command_run", "command": "cargo test", "exit_code": 0}),
            json!({"id": "t3", "type": "command_run", "command": "cargo test", "exit_code": 0}),
        ]);
        assert!(out.retired("t1", Reason::RepeatedRun, &["t3"]));
        assert!(out.retired("t2", Reason::RepeatedRun, &["t3"]));
        assert!(out.kept("t3"));
    }

    #[test]
    fn an_edit_in_between_or_a_failure_keeps_both() {
        let out = run(&[
            json!({"id": "t1", "type": "test_run", "test_names": ["a", "b"], "exit_code": 0, "passed_count": 2, "failed_count": 0}),
            json!({"id": "e", "type": "file_edit", "path": "a.rs", "diff_hash": "1"}),
            json!({"id": "t2", "type": "test_run", "test_names": ["b", "a"], "exit_code": 0, "passed_count": 2, "failed_count": 0}),
            json!({"id": "f1", "type": "build_run", "exit_code": 2}),
            json!({"id": "f2", "type": "build_run", "exit_code": 2}),
            json!({"id": "v1", "type": "verification", "content": "api up", "passed": true}),
            json!({"id": "v2", "type": "verification", "content": "api up", "passed": true}),
        ]);
        assert!(out.kept("t1") && out.kept("t2"));
        assert!(
            out.kept("f1") && out.kept("f2"),
            "failures are never retired here"
        );
        assert!(out.retired("v1", Reason::RepeatedRun, &["v2"]));
    }
}
