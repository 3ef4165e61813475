//! `compact-json`: re-encodes a JSON tool output without losing anything.
//!
//! **What.** A tool output that is a JSON object or array is re-written in plain notation:
//! JSON's brackets, colons and commas with no spaces, and quotes only around keys and strings
//! that would otherwise be misread (see [`crate::chat::plain`]). Every list of two or more
//! records with the same keys — top level, in a field, or deeper — becomes a header of keys
//! plus rows, and a field with the same value in every row of a longer table is written once
//! (see [`crate::chat::compact`]). The result is used only when it costs fewer tokens than
//! the output.
//!
//! **Why it is safe.** Nothing is dropped: every key, value and row is still there, and
//! [`crate::chat::plain::from_plain`] then [`crate::chat::compact::decode_tables`] give the
//! original value back exactly. A string that reads as a number, `true`, `false` or `null`
//! keeps its quotes, so `"42"` stays text. Outputs with duplicate keys, or that already hold
//! an object shaped like a table, are not turned into tables. The decision depends only on
//! the output itself (compact on arrival), so it never changes once made. Outputs of
//! `--keep-tool` tools and of the recall tool are never touched.
//!
//! **Example.**
//! ```text
//! before: {"flights": [{"flight_number": "HAT069", "price": 121}, {"flight_number": "HAT083", "price": 87}]}
//! after:  {flights:{columns:[flight_number,price],rows:[[HAT069,121],[HAT083,87]]}}
//! ```
//!
//! **Code.** `compact-json`.

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::pass::{Cx, Pass, PassDoc};
use crate::chat::ChatConfig;
use crate::chat::pairing::ResultView;
use crate::plan::{Action, BlockRewrite, Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::CompactJson],
    summary: "re-encodes JSON tool output losslessly: plain notation, lists of records as header + rows",
    doc: include_str!("compact_json.rs"),
};

/// Re-encoding an output costs about this many times lowering the same bytes (a parse, the
/// candidate encodings and an exact token count of each): measured in instructions on the
/// tau-bench transcripts, about 250 per byte against 85.
const REENCODE_COST: usize = 3;

/// State: the rewrites decided on arrival, with their notes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CompactJson {
    config: ChatConfig,
    #[serde(with = "crate::chat::position_map")]
    rewrites: HashMap<usize, (Vec<BlockRewrite>, Vec<String>)>,
}

impl CompactJson {
    /// The pass, configured.
    pub fn new(config: ChatConfig) -> Self {
        CompactJson {
            config,
            ..Default::default()
        }
    }
}

impl Pass for CompactJson {
    fn build(build: &super::pass::Build<'_>) -> Option<Self> {
        Some(Self::new(build.config.clone()))
    }
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, _changed: &[usize]) -> Vec<usize> {
        if !self.config.compact_json {
            return Vec::new();
        }
        let candidates: Vec<ResultView<'_>> = new
            .flat_map(|i| cx.results(i))
            .filter(|r| !self.config.tool_protected(&r.call.name) && !r.written_by_ctxgc())
            .collect();
        // Re-encoding an output (parse, candidate encodings, exact counts) is the costliest
        // step of a chat compile, and no output's depends on another's: a large batch has them
        // all computed on every core first. The tool index keeps each result, so the loop
        // below reads them in order and decides exactly as it would alone.
        let tokenizer = self.config.tokenizer;
        let text_bytes: usize = candidates
            .iter()
            .map(|r| r.text().map_or(0, str::len))
            .sum();
        crate::parallel::map_in_order(&candidates, text_bytes * REENCODE_COST, |_, r| {
            r.compacted(tokenizer);
        });
        for r in candidates {
            let Some(c) = r.compacted(tokenizer) else {
                continue;
            };
            let entry = self.rewrites.entry(r.slot.item).or_default();
            entry.1.push(format!(
                "{}: {} -> {} tokens",
                if c.tables {
                    "header + rows"
                } else {
                    "plain notation"
                },
                c.tokens_before,
                c.tokens_after
            ));
            entry.0.push(BlockRewrite {
                block: r.slot.block,
                text: c.into_owned().text,
            });
        }
        Vec::new()
    }

    fn verdict(&self, _cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        let (rewrites, notes) = self.rewrites.get(&i)?;
        Some(Verdict {
            action: Action::Rewrite,
            reason: Reason::CompactJson,
            by: Vec::new(),
            rewrites: rewrites.clone(),
            note: Some(notes.join("; ")),
        })
    }
}
