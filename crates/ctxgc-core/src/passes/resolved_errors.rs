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

use super::pass::{Cx, Pass, PassDoc};
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
    /// Errors by the identity of their cause, for items before `indexed`: the errors a new
    /// success may resolve. Not stored: rebuilt from the items after loading.
    #[serde(skip)]
    errors: HashMap<String, Vec<usize>>,
    /// The errors of `errors` that no surviving success has resolved yet: those a new success
    /// resolves.
    #[serde(skip)]
    open: HashMap<String, Vec<usize>>,
    /// Errors whose cause has not arrived yet, by the cause's id.
    #[serde(skip)]
    waiting: HashMap<String, Vec<usize>>,
    #[serde(skip)]
    indexed: usize,
}

/// The position after which a success resolves error `e`: the later of the error and its
/// cause.
fn after_of(cx: &Cx<'_>, e: usize) -> usize {
    match &cx.items[e].kind {
        Kind::Error {
            related_to: Some(cause),
            ..
        } => cx.resolve(cause).map_or(e, |c| c.max(e)),
        _ => e,
    }
}

impl Pass for ResolvedErrors {
    fn build(_: &super::pass::Build<'_>) -> Option<Self> {
        Some(Self::default())
    }
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, changed: &[usize]) -> Vec<usize> {
        let mut moved = Vec::new();
        // Items before `new` not yet indexed (a session just loaded) are replayed first.
        for i in self.indexed.min(new.start)..new.end {
            let item = &cx.items[i];
            if let Some(errors) = self.waiting.remove(&item.id)
                && let Kind::Run(run) = &item.kind
            {
                self.errors
                    .entry(run.identity.clone())
                    .or_default()
                    .extend(&errors);
                self.open
                    .entry(run.identity.clone())
                    .or_default()
                    .extend(errors);
            }
            match &item.kind {
                Kind::Error {
                    related_to: Some(cause),
                    ..
                } => match cx.resolve(cause).filter(|&c| c < i) {
                    Some(c) => {
                        if let Kind::Run(run) = &cx.items[c].kind {
                            self.errors.entry(run.identity.clone()).or_default().push(i);
                            self.open.entry(run.identity.clone()).or_default().push(i);
                        }
                    }
                    None => self.waiting.entry(cause.clone()).or_default().push(i),
                },
                Kind::Run(run) if run.success => {
                    if i >= new.start {
                        self.successes
                            .entry(run.identity.clone())
                            .or_default()
                            .push(i);
                    }
                    // The open errors of this cause now name it; the others keep naming an
                    // earlier success.
                    if cx.survives(i)
                        && let Some(open) = self.open.remove(&run.identity)
                    {
                        moved.extend(open.into_iter().filter(|&e| e < new.start));
                    }
                }
                _ => {}
            }
        }
        self.indexed = new.end;
        // An error names the first surviving success after it. When success `s` of a cause
        // starts or stops surviving, the errors that move are those after the surviving
        // success before `s` and before `s`; the open ones are those after the last surviving
        // success. (`errors` is in order of `after`: an error is indexed when both it and its
        // cause have arrived.)
        for &s in changed {
            let Kind::Run(run) = &cx.items[s].kind else {
                continue;
            };
            let (Some(errors), Some(successes)) = (
                self.errors.get(&run.identity),
                self.successes.get(&run.identity),
            ) else {
                continue;
            };
            if !run.success {
                continue;
            }
            let last_surviving_before = |end: usize| {
                successes[..successes.partition_point(|&x| x < end)]
                    .iter()
                    .rev()
                    .copied()
                    .find(|&x| x != s && cx.survives(x))
            };
            let from = last_surviving_before(s)
                .map_or(0, |p| errors.partition_point(|&e| after_of(cx, e) < p));
            let to = errors.partition_point(|&e| after_of(cx, e) < s);
            moved.extend(errors[from..to].iter().copied().filter(|&e| e < new.start));
            let last = successes.iter().rev().copied().find(|&x| cx.survives(x));
            let open_from = last.map_or(0, |l| errors.partition_point(|&e| after_of(cx, e) < l));
            let open = errors[open_from..].to_vec();
            self.open.insert(run.identity.clone(), open);
        }
        moved
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
