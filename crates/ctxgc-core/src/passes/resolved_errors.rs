//! `resolved-error`: retires an error whose cause later succeeded.
//!
//! **What.** An `error` event names its cause with `related_to`. When the cause is a run
//! (command, test, build or verification) and a later run of the *same* command or test
//! succeeds, the error is retired; the receipt names the success.
//!
//! **Why it is safe.** The error described a state that no longer holds. "The same" means the
//! whole command after whitespace normalisation (`python a.py` is not resolved by
//! `python -c 1`), the same set of test names, the same build, the same verification text;
//! an error without `related_to`, or whose cause is not a run, is never resolved, and a
//! passing verification does not resolve unrelated errors.
//!
//! **Example.**
//! ```text
//! before: [e20] $ make → exit 2   [e21] error: undefined symbol (cause e20)   [e25] $ make → exit 0
//! after:  [e20] $ make → exit 2   [receipt e21: resolved by e25]              [e25] $ make → exit 0
//! ```
//!
//! **Code.** `resolved-error`.

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::{Cx, Pass, PassDoc};
use crate::ir::Kind;
use crate::plan::{Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::ResolvedError],
    summary: "retires an error whose cause (related_to) later succeeded: same command or test",
    doc: include_str!("resolved_errors.rs"),
};

/// State: successful runs by identity (kind + what was run), in order.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ResolvedErrors {
    successes: HashMap<String, Vec<usize>>,
}

impl Pass for ResolvedErrors {
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, _changed: &[usize]) -> Vec<usize> {
        for i in new {
            if let Kind::Run(run) = &cx.items[i].kind
                && run.success
            {
                self.successes
                    .entry(run.identity.clone())
                    .or_default()
                    .push(i);
            }
        }
        Vec::new()
    }

    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        let Kind::Error {
            related_to: Some(cause),
            ..
        } = &cx.items[i].kind
        else {
            return None;
        };
        let cause = cx.resolve(cause)?;
        let Kind::Run(run) = &cx.items[cause].kind else {
            return None;
        };
        let after = i.max(cause);
        let successes = self.successes.get(&run.identity)?;
        let success = successes[successes.partition_point(|&s| s <= after)..]
            .iter()
            .copied()
            .find(|&s| cx.survives(s))?;
        Some(Verdict::retire(Reason::ResolvedError, vec![success]))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::passes::testing::run;
    use crate::plan::Reason;

    #[test]
    fn same_command_success_resolves() {
        let out = run(&[
            json!({"id": "c1", "type": "command_run", "command": "python a.py", "exit_code": 1}),
            json!({"id": "err", "type": "error", "message": "ImportError", "related_to": "c1"}),
            json!({"id": "c2", "type": "command_run", "command": "python  a.py", "exit_code": 0}),
        ]);
        assert!(out.retired("err", Reason::ResolvedError, &["c2"]));
    }

    #[test]
    fn first_word_match_or_unrelated_success_does_not_resolve() {
        let out = run(&[
            json!({"id": "c1", "type": "command_run", "command": "python a.py", "exit_code": 1}),
            json!({"id": "err", "type": "error", "message": "ImportError", "related_to": "c1"}),
            json!({"id": "c2", "type": "command_run", "command": "python -c 1", "exit_code": 0}),
            json!({"id": "loose", "type": "error", "message": "disk full"}),
            json!({"id": "v", "type": "verification", "content": "all good", "passed": true}),
        ]);
        assert!(out.kept("err"));
        assert!(out.kept("loose"), "no related_to: nothing resolves it");
    }

    #[test]
    fn test_errors_resolve_on_the_same_tests_passing() {
        let out = run(&[
            json!({"id": "t1", "type": "test_run", "test_names": ["a"], "exit_code": 1, "passed_count": 0, "failed_count": 1}),
            json!({"id": "err", "type": "error", "message": "a failed", "related_to": "t1"}),
            json!({"id": "t2", "type": "test_run", "test_names": ["b"], "exit_code": 0, "passed_count": 1, "failed_count": 0}),
            json!({"id": "t3", "type": "test_run", "test_names": ["a"], "exit_code": 0, "passed_count": 1, "failed_count": 0}),
        ]);
        assert!(out.retired("err", Reason::ResolvedError, &["t3"]));
    }
}
