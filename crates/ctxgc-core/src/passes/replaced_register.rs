//! `register`: retires a register left in the input by an earlier compile.
//!
//! **What.** A register an earlier compile wrote — the system message holding exactly the
//! rendered `[ACTIVE_AGENT_STATE]` block, in the leading run of system messages, or the last
//! block of an Anthropic `system` list — is retired (or, when the system prompt holds other
//! blocks too, only that block is removed); the back-end writes one fresh register after the
//! system prompt.
//!
//! **Why it is safe.** Its facts are read back into the ledger before anything is decided
//! (carried over with their provenance), so the fresh register says everything the old one
//! said, updated by any later declaration: registers are replaced, never stacked. Only what
//! ctxgc itself writes counts as a register: a user or tool message that looks like one, a
//! later system or developer message, a block other than the last, or a system text that
//! opens with the header but holds anything else is the caller's and stays byte for byte.
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

use super::pass::{Cx, Pass, PassDoc};
use crate::chat::register;
use crate::plan::{Action, BlockRewrite, Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::Register],
    summary: "replaces a register from an earlier compile (its facts are carried over)",
    doc: include_str!("replaced_register.rs"),
};

/// State: registers found, by item: the register block, and whether that is all it holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReplacedRegister {
    #[serde(with = "crate::chat::position_map")]
    found: HashMap<usize, (usize, bool)>,
    /// Where the back-end writes the register (the only place one is replaced).
    #[serde(default)]
    leading: register::LeadingSystem,
}

impl Pass for ReplacedRegister {
    fn build(_: &super::pass::Build<'_>) -> Option<Self> {
        Some(Self::default())
    }
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, _changed: &[usize]) -> Vec<usize> {
        for i in new {
            let item = &cx.items[i];
            let leading = self.leading.next(item);
            if let Some(w) = register::written_block(item, leading) {
                self.found.insert(i, (w.block, w.whole));
            }
        }
        Vec::new()
    }

    fn verdict(&self, _cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        let (block, whole) = self.found.get(&i)?;
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
                rewrites: vec![BlockRewrite {
                    block: *block,
                    text: String::new(),
                }],
                note,
            }
        })
    }
}
