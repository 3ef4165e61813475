//! `superseded-var`: per `set_var` key, only the latest surviving value stays.
//!
//! **What.** When a key is set several times, every value but the latest surviving one is
//! retired, its receipt naming the value that replaced it. "Surviving" matters: if the latest
//! value was set inside an abandoned branch, the value before it is live again.
//!
//! **Why it is safe.** A variable has one current value; older ones only compete with it.
//! Keys are compared exactly: `port` and `db.port` are different keys, and no pass infers a
//! key from prose.
//!
//! **Example.**
//! ```text
//! before: [e02] port = 8080   [e05] port = 9090
//! after:  [receipt e02: superseded by e05]   [e05] port = 9090
//! ```
//!
//! **Code.** `superseded-var`.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::{Cx, Pass, PassDoc};
use crate::ir::Kind;
use crate::plan::{Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::SupersededVar],
    summary: "keeps only the latest surviving value of each set_var key",
    doc: include_str!("superseded_vars.rs"),
};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct KeyHistory {
    members: Vec<usize>,
    live: Option<usize>,
}

/// State: every key's assignments, and which one is live.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SupersededVars {
    keys: HashMap<String, KeyHistory>,
}

fn key_of<'a>(cx: &'a Cx<'_>, i: usize) -> Option<&'a str> {
    match &cx.items[i].kind {
        Kind::SetVar { key, .. } => Some(key),
        _ => None,
    }
}

impl Pass for SupersededVars {
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, changed: &[usize]) -> Vec<usize> {
        let start = new.start;
        let mut dirty: BTreeSet<&str> = BTreeSet::new();
        for i in new {
            if let Some(key) = key_of(cx, i) {
                match self.keys.get_mut(key) {
                    Some(history) => history.members.push(i),
                    None => {
                        self.keys.insert(
                            key.to_owned(),
                            KeyHistory {
                                members: vec![i],
                                live: None,
                            },
                        );
                    }
                }
                dirty.insert(key);
            }
        }
        dirty.extend(changed.iter().filter_map(|&i| key_of(cx, i)));
        let mut moved = Vec::new();
        for key in dirty {
            if let Some(history) = self.keys.get_mut(key) {
                let live = history
                    .members
                    .iter()
                    .rev()
                    .copied()
                    .find(|&m| cx.survives(m));
                // Every earlier value names the live one as its superseder.
                if live != history.live {
                    moved.extend(history.members.iter().copied().filter(|&m| m < start));
                }
                history.live = live;
            }
        }
        moved
    }

    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        let live = self.keys.get(key_of(cx, i)?)?.live?;
        (live > i && cx.survives(i)).then(|| Verdict::retire(Reason::SupersededVar, vec![live]))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::passes::testing::run;
    use crate::plan::Reason;

    #[test]
    fn latest_value_wins() {
        let out = run(&[
            json!({"id": "e1", "type": "set_var", "key": "x", "value": 10}),
            json!({"id": "e2", "type": "set_var", "key": "y", "value": {"nested": [1, 2]}}),
            json!({"id": "e3", "type": "set_var", "key": "x", "value": 20}),
            json!({"id": "e4", "type": "set_var", "key": "x", "value": 30}),
        ]);
        assert!(out.retired("e1", Reason::SupersededVar, &["e4"]));
        assert!(out.retired("e3", Reason::SupersededVar, &["e4"]));
        assert!(out.kept("e2") && out.kept("e4"));
        assert!(
            out.output
                .starts_with("[receipts e1 e3: superseded by e4]\n")
        );
    }

    #[test]
    fn a_value_set_in_an_abandoned_branch_does_not_supersede() {
        let out = run(&[
            json!({"id": "e1", "type": "set_var", "key": "cache", "value": "redis"}),
            json!({"id": "b1", "type": "decision", "content": "try memcached"}),
            json!({"id": "b2", "type": "set_var", "parent_id": "b1", "key": "cache", "value": "memcached"}),
            json!({"id": "ab", "type": "abandon", "parent_id": "b2", "ref_to": ["b1"]}),
        ]);
        assert!(out.kept("e1"), "redis is live again");
        assert!(out.retired("b2", Reason::DeadBranch, &["ab"]));
    }

    #[test]
    fn keys_are_exact() {
        let out = run(&[
            json!({"id": "e1", "type": "set_var", "key": "port", "value": 1}),
            json!({"id": "e2", "type": "set_var", "key": "db.port", "value": 2}),
        ]);
        assert!(out.kept("e1") && out.kept("e2"));
    }
}
