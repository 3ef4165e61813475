//! `sample-rows`: a bulky list of records keeps its first rows and every safety-flagged row,
//! and says exactly what it left out.
//!
//! **What.** In a JSON tool output, a list of records (or of groups of records) longer than
//! the preset's `max_rows` keeps its first `keep_rows` rows plus every row carrying a safety
//! signal (allergen, warning, severity, critical, expiry, errors, personal data — a
//! documented, configurable word list matched on words, not substrings). A note before the
//! output names each list, how many rows were shown, which safety rows were kept and why,
//! which rows were omitted (1-based), and where the original is. The rest is re-encoded as
//! [`compact-json`](super::compact_json) would.
//!
//! **Why it is safe.** Nothing is omitted silently: the note states the count and the rows.
//! Rows that matter for safety are never sampled away, and rows with personal data are kept
//! and said to hold it. Shown rows keep every field. The note names a receipt id only when the
//! model has a recall tool (`--expand-tool`), and otherwise says the operator keeps the
//! original (`ctxgc receipt`). It never applies to an output the agent has not answered yet
//! (no assistant turn after it), and in the `default` preset only when the model has a recall
//! tool; without one it is withheld and reported as `would_save_tokens` (see
//! [`super::lossy`]). Off in the lossless preset; outputs of `--keep-tool` tools and
//! of the recall tool are never touched; used only when smaller.
//!
//! **Example.**
//! ```text
//! before: {"inventory": [15 rows, row 10 {"name": "Peanut Butter 500g", "warning": "PEANUT_ALLERGEN"}]}
//! after:  [ctxgc: output sampled, row numbers 1-based; $.inventory: 4 of 15 rows shown,
//!          safety-flagged rows kept: 10 (warning allergen); 11 rows omitted: 4-9, 11-15; ...]
//!         {inventory:{columns:[name,warning],rows:[...4 rows...]}}
//! ```
//!
//! **Code.** `sample-rows`.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::lossy::{LossyGate, Rewrites, decide_on_arrival, verdict_of};
use super::pass::{Cx, Pass, PassDoc};
use crate::chat::ChatConfig;
use crate::chat::compact::sample_parsed;
use crate::plan::{Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::SampleRows],
    summary: "samples bulky lists of records, keeping every safety-flagged row and stating what was omitted",
    doc: include_str!("sample_rows.rs"),
};

/// State: the rewrites decided on arrival, with their notes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SampleRows {
    config: ChatConfig,
    #[serde(with = "crate::chat::position_map")]
    rewrites: Rewrites,
    /// When the rewrites apply (after the agent's answer; never when withheld).
    #[serde(default)]
    gate: LossyGate,
}

impl SampleRows {
    /// The pass, configured.
    pub fn new(config: ChatConfig) -> Self {
        SampleRows {
            gate: LossyGate::new(config.withhold_lossy),
            config,
            ..Default::default()
        }
    }
}

impl Pass for SampleRows {
    fn build(build: &super::pass::Build<'_>) -> Option<Self> {
        Some(Self::new(build.config.clone()))
    }
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, _changed: &[usize]) -> Vec<usize> {
        let Some(sampling) = self.config.sampling else {
            return Vec::new();
        };
        let config = &self.config;
        decide_on_arrival(
            cx,
            new,
            config,
            (&mut self.gate, &mut self.rewrites),
            |r| {
                let (text, value) = (r.text()?, r.json()?);
                let hint = config.recovery_hint(&cx.items[r.slot.item].id);
                sample_parsed(
                    text,
                    value,
                    sampling,
                    &config.safety,
                    &hint,
                    config.tokenizer,
                )
                .map(|s| (s.text, s.note))
            },
            // Saved against what compact-json would send in its place (lossless).
            |r, tok| r.lossless_tokens(tok),
        )
    }

    fn verdict(&self, _cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        verdict_of(&self.gate, &self.rewrites, i, Reason::SampleRows)
    }

    fn withheld(&self, _cx: &Cx<'_>, i: usize) -> usize {
        self.gate.withheld(i)
    }
}
