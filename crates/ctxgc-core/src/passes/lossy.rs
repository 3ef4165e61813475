//! When a lossy rewrite (sampling, folding) may apply: shared by the passes that make one.
//!
//! Two rules, both about what the model can still get:
//!
//! - **Never before the agent has answered.** A tool output the agent has not yet read in full
//!   (no assistant turn after it) is sent whole: the next request is the one in which the agent
//!   reads it, and a fold made then would hide lines it has never seen (a freshly opened file
//!   window folded before the agent's next turn). Once an assistant turn follows it, the
//!   rewrite applies; in cache-stable mode that is a change to history, taken in a compaction
//!   step only when the step pays.
//! - **Never where nobody can recall.** When the rewrite is withheld (the `default` preset
//!   without a recall tool), it is computed but not applied, and the tokens it would have
//!   saved are reported instead.
//!
//! ```
//! use ctxgc_core::passes::lossy::LossyGate;
//! let mut gate = LossyGate::new(false);
//! gate.record(3, || 120);
//! assert!(!gate.applies(3));   // no assistant turn after the output yet
//! gate.saw_assistant(4);
//! assert!(gate.applies(3) && !gate.applies(4));
//! assert_eq!(gate.withheld(3), 0); // applied, so nothing is withheld
//! let mut withheld = LossyGate::new(true);
//! withheld.record(3, || 120);
//! withheld.saw_assistant(4);
//! assert!(!withheld.applies(3));
//! assert_eq!(withheld.withheld(3), 120);
//! ```

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::pass::Cx;
use crate::chat::ChatConfig;
use crate::chat::pairing::ResultView;
use crate::ir::{Item, Kind, Role};
use crate::plan::{Action, BlockRewrite, Reason, Verdict};
use crate::tokens::Tokenizer;

/// The rewrites a lossy pass decided on arrival, by item: each block's rewrite, and the notes
/// that say what was omitted.
pub type Rewrites = HashMap<usize, (Vec<BlockRewrite>, Vec<String>)>;

/// The arrival step of a lossy pass: for each tool output in `new` that is not protected nor
/// written by ctxgc, `rewrite` gives its lossy text and note (or `None`); the rewrite is kept
/// in `rewrites` and its saving against `lossless_tokens` recorded in `gate`. Returns the
/// earlier items whose rewrites an assistant turn in `new` let through.
pub(crate) fn decide_on_arrival<'a>(
    cx: &Cx<'a>,
    new: Range<usize>,
    config: &ChatConfig,
    (gate, rewrites): (&mut LossyGate, &mut Rewrites),
    mut rewrite: impl FnMut(&ResultView<'a>) -> Option<(String, String)>,
    lossless_tokens: impl Fn(&ResultView<'a>, Tokenizer) -> usize,
) -> Vec<usize> {
    let (start, answered) = (new.start, gate.answered_before());
    let tok = config.tokenizer;
    for i in new {
        gate.observe(i, &cx.items[i]);
        for r in cx.results(i) {
            if config.tool_protected(&r.call.name) || r.written_by_ctxgc() {
                continue;
            }
            let Some((text, note)) = rewrite(&r) else {
                continue;
            };
            gate.record(i, || {
                lossless_tokens(&r, tok).saturating_sub(tok.count(&text))
            });
            let entry = rewrites.entry(i).or_default();
            entry.1.push(note);
            entry.0.push(BlockRewrite {
                block: r.slot.block,
                text,
            });
        }
    }
    gate.released(answered, start, rewrites)
}

/// The verdict of a lossy pass on item `i`: its rewrites, once the gate lets them apply.
pub(crate) fn verdict_of(
    gate: &LossyGate,
    rewrites: &Rewrites,
    i: usize,
    reason: Reason,
) -> Option<Verdict> {
    if !gate.applies(i) {
        return None;
    }
    let (rewrites, notes) = rewrites.get(&i)?;
    Some(Verdict {
        action: Action::Rewrite,
        reason,
        by: Vec::new(),
        rewrites: rewrites.clone(),
        note: Some(notes.join("; ")),
    })
}

/// The state a lossy pass keeps to decide when its rewrites apply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LossyGate {
    /// Computed, never applied: reported as what they would save.
    #[serde(default)]
    withhold: bool,
    /// One past the position of the latest assistant message (0: none yet).
    #[serde(default)]
    answered_before: usize,
    /// Tokens each rewritten item's rewrite saves against its lossless form.
    #[serde(default, with = "crate::chat::position_map")]
    saved: HashMap<usize, usize>,
}

impl LossyGate {
    /// A gate; `withhold` when no rewrite may ever apply.
    pub fn new(withhold: bool) -> Self {
        LossyGate {
            withhold,
            ..Default::default()
        }
    }

    /// Notes item `i` if it is an assistant message (call for every item, in order).
    pub fn observe(&mut self, i: usize, item: &Item) {
        if matches!(&item.kind, Kind::Message(m) if m.role == Role::Assistant) {
            self.saw_assistant(i);
        }
    }

    /// Notes an assistant message at position `i`.
    pub fn saw_assistant(&mut self, i: usize) {
        self.answered_before = self.answered_before.max(i);
    }

    /// The items before `start` (the first new one) that have a rewrite in `rewrites` and
    /// that assistant turns since `before` (the value of [`LossyGate::answered_before`] then)
    /// let through: their rewrites apply from now on. In order.
    pub fn released<V>(
        &self,
        before: usize,
        start: usize,
        rewrites: &HashMap<usize, V>,
    ) -> Vec<usize> {
        let range = before..self.answered_before.min(start).max(before);
        let mut released: Vec<usize> = if range.len() <= rewrites.len() {
            range.filter(|i| rewrites.contains_key(i)).collect()
        } else {
            (rewrites.keys().copied())
                .filter(|i| range.contains(i))
                .collect()
        };
        released.sort_unstable();
        released
    }

    /// One past the position of the latest assistant message (0: none yet).
    pub fn answered_before(&self) -> usize {
        self.answered_before
    }

    /// True when an assistant turn follows item `i`.
    pub fn answered(&self, i: usize) -> bool {
        i < self.answered_before
    }

    /// Records that item `i` has a lossy rewrite saving `tokens()` (added up over its
    /// blocks). The saving is only ever reported for a withheld rewrite, so it is counted
    /// only then: a gate that lets rewrites apply never tokenizes for it.
    pub fn record(&mut self, i: usize, tokens: impl FnOnce() -> usize) {
        if self.withhold {
            *self.saved.entry(i).or_default() += tokens();
        }
    }

    /// True when item `i`'s rewrite is in force.
    pub fn applies(&self, i: usize) -> bool {
        !self.withhold && self.answered(i)
    }

    /// Tokens item `i`'s withheld rewrite would have saved (0 when it applies, waits for the
    /// agent's answer, or there is none).
    pub fn withheld(&self, i: usize) -> usize {
        if self.withhold && self.answered(i) {
            self.saved.get(&i).copied().unwrap_or(0)
        } else {
            0
        }
    }
}
