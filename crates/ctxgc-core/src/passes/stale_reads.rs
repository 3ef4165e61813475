//! `stale-read`: retires a file read that a later edit of the same file made stale.
//!
//! **What.** A `file_read` of a path is retired when a later `file_edit` changes that path;
//! the receipt names the first such edit. Paths are compared after removing `./` prefixes and
//! doubled slashes.
//!
//! **Why it is safe.** What the read showed is no longer what the file holds; keeping it
//! invites the model to act on the old text. An edit counts even inside an abandoned branch:
//! abandoning a plan does not undo a change made to disk.
//!
//! **Example.**
//! ```text
//! before: [e03] read src/app.py   [e05] edit src/app.py (a1b2)
//! after:  [receipt e03: stale after edit e05]   [e05] edit src/app.py (a1b2)
//! ```
//!
//! **Code.** `stale-read`.

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::pass::{Cx, Pass, PassDoc};
use crate::ir::Kind;
use crate::plan::{Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::StaleRead],
    summary: "retires a file_read of a path that a later file_edit changed",
    doc: include_str!("stale_reads.rs"),
};

/// State: the edits of each path, in order.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StaleReads {
    edits: HashMap<String, Vec<usize>>,
    /// The reads of each path since its latest edit (the reads the next edit makes stale),
    /// for items before `indexed`. Not stored: rebuilt from the items after loading.
    #[serde(skip)]
    unedited: HashMap<String, Vec<usize>>,
    #[serde(skip)]
    indexed: usize,
}

/// A path in the form paths are compared in.
pub fn normalize_path(path: &str) -> String {
    let mut p = path.trim().to_owned();
    while p.contains("//") {
        p = p.replace("//", "/");
    }
    while let Some(rest) = p.strip_prefix("./") {
        p = rest.to_owned();
    }
    p
}

impl Pass for StaleReads {
    fn build(_: &super::pass::Build<'_>) -> Option<Self> {
        Some(Self::default())
    }
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, _changed: &[usize]) -> Vec<usize> {
        let mut moved = Vec::new();
        // Items before `new` not yet indexed (a session just loaded) are replayed first.
        for i in super::pass::catch_up(&mut self.indexed, &new) {
            match &cx.items[i].kind {
                Kind::FileRead { path } => self
                    .unedited
                    .entry(normalize_path(path))
                    .or_default()
                    .push(i),
                Kind::FileEdit { path, .. } => {
                    let path = normalize_path(path);
                    let reads = self.unedited.remove(&path).unwrap_or_default();
                    if i >= new.start {
                        // The reads since the path's previous edit now name this one.
                        moved.extend(reads.into_iter().filter(|&r| r < new.start));
                        self.edits.entry(path).or_default().push(i);
                    }
                }
                _ => {}
            }
        }
        moved
    }

    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        let Kind::FileRead { path } = &cx.items[i].kind else {
            return None;
        };
        let edits = self.edits.get(&normalize_path(path))?;
        let next = edits[edits.partition_point(|&e| e < i)..].first()?;
        Some(Verdict::retire(Reason::StaleRead, vec![*next]))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::passes::testing::run;
    use crate::plan::Reason;

    #[test]
    fn read_before_edit_is_stale_read_after_is_not() {
        let out = run(&[
            json!({"id": "r1", "type": "file_read", "path": "./src/app.py"}),
            json!({"id": "e1", "type": "file_edit", "path": "src/app.py", "diff_hash": "ab12"}),
            json!({"id": "r2", "type": "file_read", "path": "src/app.py"}),
            json!({"id": "r3", "type": "file_read", "path": "src/other.py"}),
        ]);
        assert!(out.retired("r1", Reason::StaleRead, &["e1"]));
        assert!(out.kept("r2") && out.kept("r3") && out.kept("e1"));
    }
}
