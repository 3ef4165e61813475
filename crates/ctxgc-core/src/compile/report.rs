//! What a compile reports: the output, its decisions and receipts, and for a chat the
//! register, declarations, orphan check, tokens per payload and validation. Plain data that every
//! format's report hook fills in and every surface prints.

use serde::Serialize;
use serde_json::Value;

use crate::chat::Preset;
use crate::chat::state::{StateEvent, Status};
use crate::error::Diagnostic;
use crate::formats::key::Format;
use crate::plan::{Action, Decision, Reason};
use crate::session::CompactionStep;
use crate::validate::Violation;

/// The receipt of one retired or rewritten item: its original is recoverable by id.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Receipt {
    /// The item's id.
    pub id: String,
    /// retire or rewrite.
    pub action: Action,
    /// Why.
    pub reason: Reason,
    /// What replaced it or justified it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by: Vec<String>,
    /// blake3 of the original bytes (the receipt store's content address).
    pub hash: String,
    /// Size of the original in bytes.
    pub bytes: usize,
}

/// A compiled input.
#[derive(Debug, Clone, Serialize)]
pub struct Compiled {
    /// The input format (and so the output format).
    pub format: Format,
    /// What the model receives.
    pub output: String,
    /// Exact tokens of the input rendered without compaction.
    pub tokens_before: usize,
    /// Exact tokens of `output`.
    pub tokens_after: usize,
    /// Tokens that lossy rewrites withheld for want of a recall tool (the `default` preset
    /// without `expand_tool`: sampling, folding, a projection) would have saved on outputs the
    /// agent has answered, measured against what was sent instead. 0 when none was withheld.
    #[serde(skip_serializing_if = "is_zero")]
    pub would_save_tokens: usize,
    /// The tokenizer that counted.
    pub tokenizer: &'static str,
    /// One decision per item, in input order.
    pub decisions: Vec<Decision>,
    /// One receipt per retired or rewritten item.
    pub receipts: Vec<Receipt>,
    /// Problems that did not stop compilation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Diagnostic>,
    /// For chats: register, declarations, orphan check, tokens per payload, validation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chat: Option<ChatReport>,
    /// For JSONL of conversation records: each record's own report.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<RecordCompiled>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One live fact of the register, with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RegisterEntry {
    /// The key.
    pub key: String,
    /// The value.
    pub value: Value,
    /// declared, pinned or unsure.
    pub status: Status,
    /// The id of the message that supports it (or the provenance an earlier register gave).
    pub support: String,
    /// True when carried over from a register in the input.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub carried: bool,
    /// Schema problems it was accepted with.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

/// The orphan check: no live fact without a supporting turn that is still sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OrphanCheck {
    /// True when every live fact is supported.
    pub ok: bool,
    /// Keys whose supporting turn was retired.
    pub orphaned: Vec<String>,
    /// Turns kept because they are the only support of a live fact although another of their
    /// facts was superseded: `(turn id, keys it still supports)`.
    pub still_required: Vec<(String, Vec<String>)>,
}

/// Tokens of one payload (message), before and after.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PayloadTokens {
    /// The item's id.
    pub id: String,
    /// Its role.
    pub role: &'static str,
    /// keep, retire or rewrite.
    pub action: Action,
    /// Why, when not kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    /// Tokens as given.
    pub before: usize,
    /// Tokens as sent (0 when retired).
    pub after: usize,
    /// For a tool output sent as it was: why nothing was done to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untouched: Option<&'static str>,
}

/// Structural validation of the output against its API's rules.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Validation {
    /// True when the output breaks no rule the input did not already break.
    pub ok: bool,
    /// Violations of the output that the input did not have (always empty unless ctxgc has a
    /// defect).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub new_violations: Vec<Violation>,
    /// Violations the input already had (an unanswered call at the end, calls on user
    /// messages, ...), kept as they were.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub input_violations: Vec<Violation>,
}

/// What a chat compile reports beyond the decisions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatReport {
    /// The preset used.
    pub preset: Preset,
    /// The input's format (the output's is [`Compiled::format`]).
    pub input_format: Format,
    /// The register: live facts with provenance.
    pub register: Vec<RegisterEntry>,
    /// Tokens of the register block.
    pub register_tokens: usize,
    /// Declarations rejected, untrusted, malformed, flagged or capped.
    pub declarations: Vec<StateEvent>,
    /// The orphan check.
    pub orphan_check: OrphanCheck,
    /// Tokens per payload.
    pub payloads: Vec<PayloadTokens>,
    /// Structural validation of the output.
    pub validation: Validation,
    /// Cache-stable mode: every compaction step taken, with what it saved and invalidated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction_steps: Option<Vec<CompactionStep>>,
}

/// A compiled record of a JSONL input.
#[derive(Debug, Clone, Serialize)]
pub struct RecordCompiled {
    /// The record's id.
    pub id: String,
    /// Its line in the input.
    pub line: usize,
    /// The compiled record (`output` is the record with its messages compiled).
    #[serde(flatten)]
    pub compiled: Compiled,
}
