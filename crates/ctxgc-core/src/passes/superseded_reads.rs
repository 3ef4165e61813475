//! `superseded-read`: an earlier result of a call that was made again and came back
//! different is stubbed.
//!
//! **What.** When the same call (tool name and canonical arguments) is made again later and
//! its result differs, the earlier result is rewritten to a short stub naming the message
//! with the newer result. The call stays, and so does its (stubbed) result, so pairing stays
//! valid; the earlier output is in the receipt.
//!
//! **Why it is safe.** The newer result describes the world as it is now; the older one only
//! competes with it. Error results are never stubbed, and an error never supersedes a
//! success — the record of a failure or of a success is kept either way, and no stub ever says
//! that anything was resolved. Outputs of `--keep-tool` tools and of the recall tool are never
//! touched, and a stub is used only when it costs fewer tokens than the output. A stub or note
//! an earlier compile wrote is not a read: it never supersedes anything and is never stubbed
//! again. Off in the lossless preset.
//!
//! **Example.**
//! ```text
//! before: m3 tool (get_reservation {"id":"ZFA04Y"}) {"cabin":"economy",...}
//!         m9 tool (get_reservation {"id":"ZFA04Y"}) {"cabin":"business",...}
//! after:  m3 "[ctxgc: superseded: the same call was made again in m9 and returned a different result; ...]"
//! ```
//!
//! **Code.** `superseded-read`.

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::{Cx, Pass, PassDoc};
use crate::chat::ChatConfig;
use crate::chat::pairing::Slot;
use crate::plan::{Action, BlockRewrite, Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::SupersededRead],
    summary: "stubs an earlier result of a call that was repeated later and came back different",
    doc: include_str!("superseded_reads.rs"),
};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Read {
    slot: Slot,
    hash: String,
    error: bool,
    /// Tokens of the output text, counted only once a newer, different result of the same
    /// call arrives (most reads are never superseded, and counting every output was a sixth
    /// of a chat compile); `None` before that, and always when it is not text.
    #[serde(default)]
    tokens: Option<usize>,
    /// Whether the output is text (only text is ever stubbed).
    #[serde(default = "yes")]
    text: bool,
}

fn yes() -> bool {
    true
}

/// State: every result of each call signature, in order.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SupersededReads {
    config: ChatConfig,
    reads: HashMap<String, Vec<Read>>,
    /// item → (block, signature, position in its list).
    #[serde(with = "crate::chat::position_map")]
    member: HashMap<usize, Vec<(usize, String, usize)>>,
}

impl SupersededReads {
    /// The pass, configured.
    pub fn new(config: ChatConfig) -> Self {
        SupersededReads {
            config,
            ..Default::default()
        }
    }
}

impl Pass for SupersededReads {
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, changed: &[usize]) -> Vec<usize> {
        let start = new.start;
        let mut moved = Vec::new();
        // An earlier read names the first surviving newer one.
        for n in changed {
            for (_, signature, pos) in self.member.get(n).into_iter().flatten() {
                if let Some(list) = self.reads.get(signature) {
                    moved.extend(list[..*pos].iter().map(|e| e.slot.item));
                }
            }
        }
        for i in new {
            for r in cx.results(i) {
                // A stub of an earlier compile is not a read: it neither supersedes nor is
                // superseded (its original is in that compile's receipt).
                if self.config.tool_protected(&r.call.name) || r.written_by_ctxgc() {
                    continue;
                }
                let hash = r.output_hash().to_owned();
                let error = r.is_error();
                let list = self.reads.entry(r.call.signature.clone()).or_default();
                if !error {
                    // The earlier reads that no surviving read has contradicted yet (the
                    // latest run of one result) now have this one as their newer read, if it
                    // differs. Reads before that run already name a newer one.
                    let mut run_hash: Option<&str> = None;
                    let run: Vec<usize> = list
                        .iter()
                        .rev()
                        .take_while(|e| {
                            if e.error || !cx.survives(e.slot.item) {
                                return true;
                            }
                            *run_hash.get_or_insert(e.hash.as_str()) == e.hash
                        })
                        .map(|e| e.slot.item)
                        .collect();
                    if run_hash != Some(hash.as_str()) {
                        moved.extend(run.into_iter().filter(|&m| m < start));
                    }
                    // Every earlier text read this one differs from may now be stubbed: the
                    // verdict compares its tokens with the stub's, so count them now.
                    for earlier in list
                        .iter_mut()
                        .filter(|e| e.text && e.tokens.is_none() && e.hash != hash)
                    {
                        let slot = earlier.slot;
                        earlier.tokens = cx
                            .results(slot.item)
                            .into_iter()
                            .find(|e| e.slot.block == slot.block)
                            .filter(|e| e.text.is_some())
                            .map(|e| e.tokens(self.config.tokenizer));
                    }
                }
                self.member.entry(i).or_default().push((
                    r.slot.block,
                    r.call.signature.clone(),
                    list.len(),
                ));
                list.push(Read {
                    slot: r.slot,
                    hash,
                    error,
                    tokens: None,
                    text: r.text.is_some(),
                });
            }
        }
        moved.sort_unstable();
        moved.dedup();
        moved
    }

    fn verdict(&self, cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        if !self.config.stub_superseded_reads || !cx.survives(i) {
            return None;
        }
        let mut rewrites = Vec::new();
        let mut by = Vec::new();
        for (block, signature, pos) in self.member.get(&i)? {
            let list = &self.reads[signature];
            let read = &list[*pos];
            let Some(tokens) = read.tokens else { continue };
            if read.error {
                continue;
            }
            let Some(newer) = list[pos + 1..]
                .iter()
                .find(|n| !n.error && n.hash != read.hash && cx.survives(n.slot.item))
            else {
                continue;
            };
            let stub = format!(
                "[ctxgc: superseded: the same call was made again in {} and returned a different result; {}]",
                cx.items[newer.slot.item].id,
                self.config.recovery_hint(&cx.items[i].id)
            );
            if self.config.tokenizer.count(&stub) < tokens {
                rewrites.push(BlockRewrite {
                    block: *block,
                    text: stub,
                });
                if !by.contains(&newer.slot.item) {
                    by.push(newer.slot.item);
                }
            }
        }
        (!rewrites.is_empty()).then_some(Verdict {
            action: Action::Rewrite,
            reason: Reason::SupersededRead,
            by,
            rewrites,
            note: None,
        })
    }
}
