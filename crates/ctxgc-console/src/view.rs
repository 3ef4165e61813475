//! What the API answers for a compile: the compiled report with every item's original bytes
//! beside its decision, the receipts with their exact originals, and tokens per preset.

use std::collections::BTreeMap;

use ctxgc_core::chat::compile::{ChatReport, RegisterEntry};
use ctxgc_core::{Compiled, Decision, Format, Receipt};
use serde::Serialize;

pub use crate::cost::ReplayedCost;

/// One item of the input: its decision (id, action, reason code, `by`, note) and original.
#[derive(Debug, Serialize)]
pub struct ItemView<'a> {
    /// What was decided, with the reason code and the items that justify it.
    #[serde(flatten)]
    pub decision: &'a Decision,
    /// The item's exact original text (absent for items the compiler added, like a register).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original: Option<&'a str>,
}

/// A receipt with the exact original bytes it stands for.
#[derive(Debug, Serialize)]
pub struct ReceiptView<'a> {
    /// Id, action, reason, `by`, blake3 hash and size of the original.
    #[serde(flatten)]
    pub receipt: &'a Receipt,
    /// The original, byte for byte.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub original: Option<&'a str>,
}

/// Tokens and replayed cost of one input under one preset.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PresetTokens {
    /// The preset's name.
    pub preset: &'static str,
    /// Tokens of the input without compaction.
    pub tokens_before: usize,
    /// Tokens of the compiled output.
    pub tokens_after: usize,
    /// What the input costs replayed turn by turn through a prompt cache, as `ctxgc bench`
    /// prices it (absent when the bench could not replay the input: `replay_error` says why).
    pub replayed: Option<ReplayedCost>,
    /// Why the input could not be replayed (the tokens above are still exact).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay_error: Option<String>,
}

/// The answer to a compile.
#[derive(Debug, Serialize)]
pub struct CompileView<'a> {
    /// The input format.
    pub format: Format,
    /// The preset it was compiled with.
    pub preset: &'a str,
    /// The tokenizer that counted.
    pub tokenizer: &'static str,
    /// Tokens of the input without compaction.
    pub tokens_before: usize,
    /// Tokens of the output.
    pub tokens_after: usize,
    /// What the model receives.
    pub output: &'a str,
    /// Every item in input order.
    pub items: Vec<ItemView<'a>>,
    /// One receipt per retired or rewritten item.
    pub receipts: Vec<ReceiptView<'a>>,
    /// Chats: the register of live declared state.
    pub register: &'a [RegisterEntry],
    /// Problems that did not stop compilation.
    pub warnings: Vec<String>,
    /// Tokens and replayed cost under every preset (chats; presets do not apply to event
    /// traces).
    pub presets: &'a [PresetTokens],
    /// Chats: the full report (declarations, orphan check, tokens per payload, validation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat: Option<&'a ChatReport>,
}

impl<'a> CompileView<'a> {
    /// The view of `compiled`, originals looked up by item id.
    pub fn new(
        compiled: &'a Compiled,
        preset: &'a str,
        originals: &'a BTreeMap<String, String>,
        presets: &'a [PresetTokens],
    ) -> CompileView<'a> {
        let original = |id: &str| originals.get(id).map(String::as_str);
        CompileView {
            format: compiled.format,
            preset,
            tokenizer: compiled.tokenizer,
            tokens_before: compiled.tokens_before,
            tokens_after: compiled.tokens_after,
            output: &compiled.output,
            items: compiled
                .decisions
                .iter()
                .map(|decision| ItemView {
                    decision,
                    original: original(&decision.id),
                })
                .collect(),
            receipts: compiled
                .receipts
                .iter()
                .map(|receipt| ReceiptView {
                    receipt,
                    original: original(&receipt.id),
                })
                .collect(),
            register: compiled
                .chat
                .as_ref()
                .map_or(&[][..], |c| c.register.as_slice()),
            warnings: compiled.warnings.iter().map(|w| w.to_string()).collect(),
            presets,
            chat: compiled.chat.as_ref(),
        }
    }
}
