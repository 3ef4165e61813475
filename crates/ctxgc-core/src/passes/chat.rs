//! The chat passes, run together so that one message can carry several decisions.
//!
//! **What.** The engine takes one verdict per item, but a chat message holds blocks: an
//! Anthropic user message may carry three tool results, one a duplicate, one compactable, one
//! with a stray state block. This pass runs the chat passes in order and merges their claims:
//! a retirement wins outright; otherwise each block takes the rewrite of the first pass that
//! claims it, and the verdict lists every pass's code in its note.
//!
//! **Why it is safe.** Each rewrite is computed from the block's own text with state blocks
//! already removed, so the first claim on a block is complete on its own; merging never
//! combines two rewrites of one block.
//!
//! **Example.**
//! ```text
//! before: user [tool_result t1: same as t0] [tool_result t2: {"rows": [...] } pretty-printed]
//! after:  user [t1: duplicate-result stub] [t2: compact-json]   (reason duplicate-result,
//!         note "block 0: duplicate-result; block 1: compact-json")
//! ```
//!
//! **Code.** None of its own: the merged verdict carries the first claiming pass's code.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::{AnyPass, Cx, Pass, PassDoc};
use crate::plan::{Action, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[],
    summary: "runs the chat passes together and merges their per-block claims",
    doc: include_str!("chat.rs"),
};

/// The chat passes, in merge order.
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
}

impl Pass for ChatPasses {
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, changed: &[usize]) -> Vec<usize> {
        // Each pass changes only itself; a large batch runs them side by side.
        let spread = super::side_by_side(cx.items, &new);
        let reports = crate::parallel::each_mut(self.passes.iter_mut().collect(), spread, |pass| {
            pass.update(cx, new.clone(), changed)
        });
        let mut moved: Vec<usize> = reports.into_iter().flatten().collect();
        moved.sort_unstable();
        moved.dedup();
        moved
    }

    /// The first withheld rewrite in merge order, unless a pass before it claims the item (a
    /// retired or stubbed output would not have been sampled or folded either).
    fn withheld(&self, cx: &Cx<'_>, i: usize) -> usize {
        for pass in &self.passes {
            let w = pass.withheld(cx, i);
            if w > 0 {
                return w;
            }
            if pass.verdict(cx, i).is_some() {
                return 0;
            }
        }
        0
    }

    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        let mut merged: Option<Verdict> = None;
        let mut parts: Vec<String> = Vec::new();
        let mut notes: Vec<String> = Vec::new();
        for pass in &self.passes {
            let Some(v) = pass.verdict(cx, i) else {
                continue;
            };
            if v.action == Action::Retire {
                return Some(v);
            }
            let merged = merged.get_or_insert_with(|| Verdict {
                action: Action::Rewrite,
                reason: v.reason,
                by: Vec::new(),
                rewrites: Vec::new(),
                note: None,
            });
            let mut took = Vec::new();
            let offered = v.rewrites.len();
            for rw in v.rewrites {
                if !merged.rewrites.iter().any(|m| m.block == rw.block) {
                    took.push(rw.block);
                    merged.rewrites.push(rw);
                }
            }
            if took.is_empty() {
                continue;
            }
            for b in v.by {
                if !merged.by.contains(&b) {
                    merged.by.push(b);
                }
            }
            let blocks: Vec<String> = took.iter().map(|b| b.to_string()).collect();
            parts.push(format!("block {}: {}", blocks.join(", "), v.reason.code()));
            // A pass's note speaks of all its blocks; it is kept only when all were taken.
            if took.len() == offered
                && let Some(note) = v.note
            {
                notes.push(note);
            }
        }
        let mut merged = merged?;
        if merged.rewrites.is_empty() {
            return None;
        }
        merged.rewrites.sort_by_key(|r| r.block);
        if parts.len() > 1 {
            notes.insert(0, parts.join("; "));
        }
        if !notes.is_empty() {
            merged.note = Some(notes.join("; "));
        }
        Some(merged)
    }
}
