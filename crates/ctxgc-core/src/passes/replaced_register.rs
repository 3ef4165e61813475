//! `register`: retires a register left in the input by an earlier compile.
//!
//! **What.** A system message (or Anthropic system block) whose text is an
//! `[ACTIVE_AGENT_STATE]` register is retired (or, when the system prompt holds other blocks
//! too, only the register block is removed); the back-end writes one fresh register after the
//! system prompt.
//!
//! **Why it is safe.** Its facts are read back into the ledger before anything is decided
//! (carried over with their provenance), so the fresh register says everything the old one
//! said, updated by any later declaration: registers are replaced, never stacked. Only system
//! content counts as a register — a user or tool message that looks like one is not trusted.
//!
//! **Example.**
//! ```text
//! before: system "policy..."  system "[ACTIVE_AGENT_STATE]\n- cabin_class = \"economy\" (m6, declared)"  user ...
//! after:  system "policy..."  system <fresh register>  user ...
//! ```
//!
//! **Code.** `register`.

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::{Cx, Pass, PassDoc};
use crate::chat::{block_text, message_of, register};
use crate::ir::{Block, Role};
use crate::plan::{Action, BlockRewrite, Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::Register],
    summary: "replaces a register from an earlier compile (its facts are carried over)",
    doc: include_str!("replaced_register.rs"),
};

/// State: registers found, by item: the register blocks, and whether that is all it holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReplacedRegister {
    #[serde(with = "crate::chat::position_map")]
    found: HashMap<usize, (Vec<usize>, bool)>,
}

impl Pass for ReplacedRegister {
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, _changed: &[usize]) -> Vec<usize> {
        for i in new {
            let Some(m) = message_of(&cx.items[i]) else {
                continue;
            };
            if m.role != Role::System {
                continue;
            }
            let blocks: Vec<usize> = m
                .blocks
                .iter()
                .enumerate()
                .filter(|(_, b)| matches!(b, Block::Text { .. }))
                .filter(|(_, b)| block_text(b).and_then(register::parse).is_some())
                .map(|(k, _)| k)
                .collect();
            if !blocks.is_empty() {
                let whole = blocks.len() == m.blocks.len();
                self.found.insert(i, (blocks, whole));
            }
        }
        Vec::new()
    }

    fn verdict(&self, _cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        let (blocks, whole) = self.found.get(&i)?;
        let note = Some("an earlier register, replaced by the fresh one".to_owned());
        Some(if *whole {
            Verdict {
                note,
                ..Verdict::retire(Reason::Register, Vec::new())
            }
        } else {
            Verdict {
                action: Action::Rewrite,
                reason: Reason::Register,
                by: Vec::new(),
                rewrites: blocks
                    .iter()
                    .map(|&b| BlockRewrite {
                        block: b,
                        text: String::new(),
                    })
                    .collect(),
                note,
            }
        })
    }
}
