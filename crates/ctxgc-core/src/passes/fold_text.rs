//! `fold-text`: a long plain-text tool output keeps its head, tail, errors and warnings, and
//! marks every gap.
//!
//! **What.** A text output (logs, test runs, file listings) with more lines than the preset's
//! `max_lines` keeps its first and last lines, every line carrying a safety signal (errors,
//! failures, warnings, ...: the same word list as row sampling) and whole Python tracebacks;
//! runs of identical lines collapse to one line and a count. Each gap is marked where it is
//! (`[ctxgc: 44 lines omitted here: lines 6-49]`) and a note at the top says what was omitted
//! and where the original is.
//!
//! **Why it is safe.** The output says, in place, which lines are missing, so it never reads
//! as the whole answer; failures are never folded away. The note names a receipt id only when
//! the model has a recall tool (`--expand-tool`). JSON outputs are left to the JSON passes.
//! It never applies to an output the agent has not answered yet (no assistant turn after it:
//! the agent has not read it whole), and in the `default` preset only when the model has a
//! recall tool; without one it is withheld and reported as `would_save_tokens` (see
//! [`super::lossy`]). Off in the lossless preset; outputs of `--keep-tool` tools and of the recall tool are never
//! touched; used only when smaller.
//!
//! **Example.**
//! ```text
//! before: 400 lines of test output, "FAILED tests/test_io.py::test_read" on line 233
//! after:  [ctxgc: long output folded: 310 of 400 lines omitted, ...]
//!         lines 1-50, [ctxgc: 182 lines omitted here: lines 51-232], line 233, ..., last 30 lines
//! ```
//!
//! **Code.** `fold-text`.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::lossy::{LossyGate, Rewrites, decide_on_arrival, verdict_of};
use super::pass::{Cx, Pass, PassDoc};
use crate::chat::ChatConfig;
use crate::chat::compact::fold_unless_json;
use crate::plan::{Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::FoldText],
    summary: "folds long plain-text output: head, tail, error lines kept, repeats collapsed, gaps marked",
    doc: include_str!("fold_text.rs"),
};

/// State: the rewrites decided on arrival, with their notes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FoldText {
    config: ChatConfig,
    #[serde(with = "crate::chat::position_map")]
    rewrites: Rewrites,
    /// When the rewrites apply (after the agent's answer; never when withheld).
    #[serde(default)]
    gate: LossyGate,
}

impl FoldText {
    /// The pass, configured.
    pub fn new(config: ChatConfig) -> Self {
        FoldText {
            gate: LossyGate::new(config.withhold_lossy),
            config,
            ..Default::default()
        }
    }
}

impl Pass for FoldText {
    fn build(build: &super::pass::Build<'_>) -> Option<Self> {
        Some(Self::new(build.config.clone()))
    }
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, _changed: &[usize]) -> Vec<usize> {
        let Some(folding) = self.config.folding else {
            return Vec::new();
        };
        let config = &self.config;
        decide_on_arrival(
            cx,
            new,
            config,
            (&mut self.gate, &mut self.rewrites),
            |r| {
                let text = r.text()?;
                let hint = config.recovery_hint(&cx.items[r.slot.item].id);
                fold_unless_json(
                    text,
                    || r.json().is_some(),
                    folding,
                    &config.safety,
                    &hint,
                    config.tokenizer,
                )
                .map(|f| (f.text, f.note))
            },
            // A folded text's lossless form is the text itself.
            |r, tok| r.tokens(tok),
        )
    }

    fn verdict(&self, _cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        verdict_of(&self.gate, &self.rewrites, i, Reason::FoldText)
    }

    fn withheld(&self, _cx: &Cx<'_>, i: usize) -> usize {
        self.gate.withheld(i)
    }
}
