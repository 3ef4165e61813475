//! `duplicate-result`: an identical repeated call with an identical result points at the
//! earlier one instead of repeating it.
//!
//! **What.** When a call is made again with the same tool name and the same arguments
//! (compared as canonical JSON) and its result is identical to the result of the previous
//! such call, the later result is rewritten to a short stub naming the message that holds the
//! earlier one. The call and its (stubbed) result both stay, so pairing stays valid.
//!
//! **Why it is safe.** The earlier result is still there, word for word: nothing is lost, which
//! is why this pass runs in the lossless preset. Only back-to-back repeats count: if the same
//! call came back different in between, the world changed and the later result is not a
//! duplicate. Error results are stubbed the same way (pointing at the identical error, never
//! saying it was resolved). Outputs of `--keep-tool` tools and of the recall tool are never
//! touched, and a stub is used only when it costs fewer tokens than the output. A stub or note
//! an earlier compile wrote is never a twin and is never stubbed again.
//!
//! **Example.**
//! ```text
//! before: m5 tool (get_user {"id":7}) {"name":"Ada",...}   m9 tool (get_user {"id":7}) {"name":"Ada",...}
//! after:  m5 kept   m9 "[ctxgc: same output as the identical call answered in m5]"
//! ```
//!
//! **Code.** `duplicate-result`.

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::{Cx, Pass, PassDoc};
use crate::chat::ChatConfig;
use crate::chat::pairing::Slot;
use crate::plan::{Action, BlockRewrite, Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::DuplicateResult],
    summary: "stubs a result identical to the previous result of the same call (pointing at it)",
    doc: include_str!("duplicate_results.rs"),
};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Last {
    hash: String,
    first: Slot,
}

/// State: the previous result of each call signature, and the stubs decided on arrival.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DuplicateResults {
    config: ChatConfig,
    last: HashMap<String, Last>,
    /// item → (block, stub, the item holding the twin).
    #[serde(with = "crate::chat::position_map")]
    stubs: HashMap<usize, Vec<(usize, String, usize)>>,
}

impl DuplicateResults {
    /// The pass, configured.
    pub fn new(config: ChatConfig) -> Self {
        DuplicateResults {
            config,
            ..Default::default()
        }
    }
}

impl Pass for DuplicateResults {
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, changed: &[usize]) -> Vec<usize> {
        // A stub stands while its twin survives. Survival moves rarely (retention that
        // expires), so every stubbed item is named then.
        let mut moved: Vec<usize> = if changed.is_empty() {
            Vec::new()
        } else {
            self.stubs
                .keys()
                .copied()
                .filter(|&i| i < new.start)
                .collect()
        };
        moved.sort_unstable();
        for i in new {
            for r in cx.results(i) {
                if self.config.tool_protected(&r.call.name) {
                    continue;
                }
                if r.written_by_ctxgc() {
                    // What it stands for is unknown here, so the next result is not a
                    // back-to-back repeat of anything before it.
                    self.last.remove(&r.call.signature);
                    continue;
                }
                let hash = r.output_hash().to_owned();
                let signature = r.call.signature.clone();
                let first = match self.last.get(&signature) {
                    Some(last) if last.hash == hash => last.first,
                    _ => r.slot,
                };
                self.last.insert(signature, Last { hash, first });
                if first == r.slot || !self.config.stub_duplicate_results {
                    continue;
                }
                if r.text.is_none() {
                    continue;
                }
                let stub = format!(
                    "[ctxgc: same output as the identical call answered in {}]",
                    cx.items[first.item].id
                );
                let tokenizer = self.config.tokenizer;
                if tokenizer.count(&stub) < r.tokens(tokenizer) {
                    self.stubs
                        .entry(i)
                        .or_default()
                        .push((r.slot.block, stub, first.item));
                }
            }
        }
        moved
    }

    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        let stubs = self.stubs.get(&i)?;
        let live: Vec<&(usize, String, usize)> = stubs
            .iter()
            .filter(|(_, _, twin)| cx.survives(*twin))
            .collect();
        if live.is_empty() {
            return None;
        }
        let mut by: Vec<usize> = live.iter().map(|(_, _, t)| *t).collect();
        by.dedup();
        Some(Verdict {
            action: Action::Rewrite,
            reason: Reason::DuplicateResult,
            by,
            rewrites: live
                .iter()
                .map(|(b, stub, _)| BlockRewrite {
                    block: *b,
                    text: stub.clone(),
                })
                .collect(),
            note: None,
        })
    }
}
