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

use std::collections::{BTreeSet, HashMap};
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
        let mut dirty: BTreeSet<&str> = BTreeSet::new();
        for i in new {
            if let Some(key) = key_of(cx, i) {
                self.keys.entry(key.to_owned()).or_default().members.push(i);
                dirty.insert(key);
            }
        }
        dirty.extend(changed.iter().filter_map(|&i| key_of(cx, i)));
        for key in dirty {
            if let Some(history) = self.keys.get_mut(key) {
                history.live = history
                    .members
                    .iter()
                    .rev()
                    .copied()
                    .find(|&m| cx.survives(m));
            }
        }
        Vec::new()
    }

    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        let live = self.keys.get(key_of(cx, i)?)?.live?;
        (live > i && cx.survives(i)).then(|| Verdict::retire(Reason::SupersededVar, vec![live]))
    }
}
