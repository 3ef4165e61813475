//! A group of passes run as one: how the chat passes were stored before the engine merged
//! claims per block itself.
//!
//! **What.** Nothing of its own. Sessions stored by an earlier version hold the chat passes
//! inside this group; loading one opens the group in place ([`super::flatten`]), each pass with
//! its state, so a stored session compiles on as it did. A group that is run anyway (built by
//! hand with [`ChatPasses::new`]) decides exactly as its passes would in the pipeline: the
//! engine's per-block merge, in order.
//!
//! **Why it is safe.** The passes and their state are unchanged; only where their claims are
//! merged moved, and the merge is the same code.
//!
//! **Example.**
//! ```text
//! stored:  [chat [superseded-fact, register, ..., state-block]]
//! loaded:  [superseded-fact, register, ..., state-block]
//! ```
//!
//! **Code.** None of its own.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::AnyPass;
use super::pass::{Cx, Pass, PassDoc};
use crate::plan::Verdict;
use crate::session::claims;

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[],
    summary: "a group of passes stored as one by an earlier version, opened on load",
    doc: include_str!("chat.rs"),
};

/// Passes stored as one group, in merge order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChatPasses {
    passes: Vec<AnyPass>,
}

impl ChatPasses {
    /// Runs `passes` together, earlier ones winning a block.
    pub fn new(passes: Vec<AnyPass>) -> Self {
        ChatPasses { passes }
    }

    /// The passes it runs.
    pub fn passes(&self) -> &[AnyPass] {
        &self.passes
    }

    /// The passes, taken out of the group.
    pub fn into_passes(self) -> Vec<AnyPass> {
        self.passes
    }
}

impl Pass for ChatPasses {
    fn build(_: &super::pass::Build<'_>) -> Option<Self> {
        // Only read from sessions an earlier version stored; never built.
        None
    }
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, changed: &[usize]) -> Vec<usize> {
        let spread = super::pass::side_by_side(cx.items, &new);
        let reports = crate::parallel::each_mut(self.passes.iter_mut().collect(), spread, |pass| {
            pass.update(cx, new.clone(), changed)
        });
        let mut moved: Vec<usize> = reports.into_iter().flatten().collect();
        moved.sort_unstable();
        moved.dedup();
        moved
    }

    fn withheld(&self, cx: &Cx<'_>, i: usize) -> usize {
        claims::withheld(&self.passes, cx, i)
    }

    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        claims::verdict(&self.passes, cx, i)
    }
}
