//! `state-block`: strips `<contextgc-state>` / `<ctxgc-state>` blocks from what the model
//! receives.
//!
//! **What.** Every closed state block is cut out of the text of every message — assistant,
//! user, system, and tool output — and the whitespace that set it apart shrinks to one
//! separator; a text or tool output that held nothing else becomes
//! `[ctxgc: this message held only a state block]`, never empty content. Thinking blocks are
//! never touched; neither is the output of a tool protected by
//! `--keep-tool` (or the recall tool), where the block stays and is reported.
//!
//! **Why it is safe.** A block in an assistant turn is the agent's declaration: its content
//! moves into the register, so the model still sees every live fact, once. A block anywhere
//! else is untrusted (tool output is attacker-controlled): it is reported and never applied,
//! and cutting it keeps a forged declaration away from the model. The original text is in the
//! receipt. A malformed block is cut too (and reported); an unclosed tag is left in place,
//! because where it would end cannot be known.
//!
//! **Example.**
//! ```text
//! before: assistant "Upgrading you now.\n<contextgc-state>{"assert":{"cabin_class":"business"}}</contextgc-state>"
//! after:  assistant "Upgrading you now."
//! ```
//!
//! **Code.** `state-block`.

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::pass::{Cx, Pass, PassDoc};
use crate::chat::state::strip_blocks;
use crate::chat::{ChatConfig, message_of};
use crate::ir::{Block, Role};
use crate::plan::{Action, BlockRewrite, Reason, Verdict};

/// This pass's doc.
pub static DOC: PassDoc = PassDoc {
    codes: &[Reason::StateBlock],
    summary: "strips declared-state blocks from what the model receives (assistant ones go to the register)",
    doc: include_str!("state_blocks.rs"),
};

/// State: the rewrites decided on arrival.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StateBlocks {
    config: ChatConfig,
    #[serde(with = "crate::chat::position_map")]
    rewrites: HashMap<usize, (Vec<BlockRewrite>, bool)>,
}

impl StateBlocks {
    /// The pass, configured.
    pub fn new(config: ChatConfig) -> Self {
        StateBlocks {
            config,
            ..Default::default()
        }
    }
}

impl Pass for StateBlocks {
    fn build(build: &super::pass::Build<'_>) -> Option<Self> {
        Some(Self::new(build.config.clone()))
    }
    fn doc(&self) -> &'static PassDoc {
        &DOC
    }

    fn update(&mut self, cx: &Cx<'_>, new: Range<usize>, _changed: &[usize]) -> Vec<usize> {
        for i in new {
            let Some(message) = message_of(&cx.items[i]) else {
                continue;
            };
            let mut rewrites = Vec::new();
            let mut trusted = true;
            for (b, block) in message.blocks.iter().enumerate() {
                let text = match block {
                    Block::Text { text } => text.as_str(),
                    Block::ToolResult(out) => {
                        let protected = cx
                            .tools
                            .pairing()
                            .call_of(i, b)
                            .is_some_and(|c| self.config.tool_protected(&c.name));
                        match crate::chat::output_text(out) {
                            Some(t) if !protected => t,
                            _ => continue,
                        }
                    }
                    _ => continue,
                };
                if let Some(stripped) = strip_blocks(text) {
                    trusted &=
                        message.role == Role::Assistant && matches!(block, Block::Text { .. });
                    // A tool output is never sent empty (the message back-end does the same
                    // for message text).
                    let text = if stripped.is_empty() && matches!(block, Block::ToolResult(_)) {
                        crate::chat::register::EMPTIED.to_owned()
                    } else {
                        stripped
                    };
                    rewrites.push(BlockRewrite { block: b, text });
                }
            }
            if !rewrites.is_empty() {
                self.rewrites.insert(i, (rewrites, trusted));
            }
        }
        Vec::new()
    }

    fn verdict(&self, _cx: &Cx<'_>, i: usize) -> Option<Verdict> {
        let (rewrites, trusted) = self.rewrites.get(&i)?;
        Some(Verdict {
            action: Action::Rewrite,
            reason: Reason::StateBlock,
            by: Vec::new(),
            rewrites: rewrites.clone(),
            note: Some(if *trusted {
                "state block stripped; its facts are in the register".to_owned()
            } else {
                "state block outside an assistant turn stripped and not applied".to_owned()
            }),
        })
    }
}
