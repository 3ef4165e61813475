//! The plan: for every item, keep, retire (with reason) or rewrite (new content, with reason).

use serde::{Deserialize, Serialize};

/// A stable reason code, like a linter's rule code: people read it, machines match on it.
///
/// Each code belongs to one pass; `ctxgc explain --code CODE` prints that pass's doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// Inside a branch that an `abandon` event gave up.
    DeadBranch,
    /// Part of a cycle of sequence edges, collapsed to one receipt.
    Cycle,
    /// A `set_var` whose key was set again later.
    SupersededVar,
    /// A tool call and result identical to an earlier surviving pair.
    DuplicateCall,
    /// A file read made stale by a later edit of that file.
    StaleRead,
    /// A successful run repeated later, identically, with no edit in between.
    RepeatedRun,
    /// An error whose cause later succeeded.
    ResolvedError,
    /// A decision, requirement or constraint that a later one explicitly replaces.
    ReplacedNote,
    /// A chat turn whose every declared fact is dead (superseded or revoked).
    SupersededFact,
    /// A tool result read again later, and the later read came back different.
    SupersededRead,
    /// A chat tool result identical to an earlier one for the same call.
    DuplicateResult,
    /// A declared-state block stripped from the text the model receives.
    StateBlock,
    /// A tool output re-encoded without losing anything (compact JSON, header + rows).
    CompactJson,
    /// A bulky list of records sampled; safety-flagged rows always kept.
    SampleRows,
    /// A long plain-text output with repeated lines folded and head, tail and errors kept.
    FoldText,
    /// A tool output trimmed by a learned projection.
    Projection,
    /// A register of live declared state added (or replaced).
    Register,
    /// A record returned again, changed, by a later call (of any tool): the earlier copy is
    /// stubbed once the agent has answered the newer one, where it can be recalled.
    SupersededRecord,
    /// A tool output older than the last few agent turns, masked behind the recall tool.
    MaskedOutput,
}

impl Reason {
    /// Every code, in pipeline order.
    pub const ALL: [Reason; 19] = [
        Reason::DeadBranch,
        Reason::Cycle,
        Reason::SupersededVar,
        Reason::DuplicateCall,
        Reason::StaleRead,
        Reason::RepeatedRun,
        Reason::ResolvedError,
        Reason::ReplacedNote,
        Reason::SupersededFact,
        Reason::SupersededRead,
        Reason::SupersededRecord,
        Reason::MaskedOutput,
        Reason::DuplicateResult,
        Reason::StateBlock,
        Reason::CompactJson,
        Reason::SampleRows,
        Reason::FoldText,
        Reason::Projection,
        Reason::Register,
    ];

    /// The code as written in reports and on the command line.
    pub fn code(self) -> &'static str {
        match self {
            Reason::DeadBranch => "dead-branch",
            Reason::Cycle => "cycle",
            Reason::SupersededVar => "superseded-var",
            Reason::DuplicateCall => "duplicate-call",
            Reason::StaleRead => "stale-read",
            Reason::RepeatedRun => "repeated-run",
            Reason::ResolvedError => "resolved-error",
            Reason::ReplacedNote => "replaced-note",
            Reason::SupersededFact => "superseded-fact",
            Reason::SupersededRead => "superseded-read",
            Reason::DuplicateResult => "duplicate-result",
            Reason::StateBlock => "state-block",
            Reason::CompactJson => "compact-json",
            Reason::SampleRows => "sample-rows",
            Reason::FoldText => "fold-text",
            Reason::Projection => "projection",
            Reason::Register => "register",
            Reason::SupersededRecord => "superseded-record",
            Reason::MaskedOutput => "masked-output",
        }
    }

    /// Parses a code given by [`Reason::code`].
    pub fn from_code(code: &str) -> Option<Reason> {
        Reason::ALL.into_iter().find(|r| r.code() == code)
    }
}

/// What happens to an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Sent as it is.
    Keep,
    /// Replaced by a receipt stub (or dropped, in message formats); the original is in a receipt.
    Retire,
    /// Sent with new content; the original is in a receipt.
    Rewrite,
}

/// A pass's claim on one item. `by` holds item positions; reports turn them into ids.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Retire or rewrite.
    pub action: Action,
    /// Why.
    pub reason: Reason,
    /// Positions of the items that justify it (the replacement, the abandon, the earlier twin).
    pub by: Vec<usize>,
    /// For rewrites: the new content, block by block.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rewrites: Vec<BlockRewrite>,
    /// A line for people, when the code alone does not say enough.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Verdict {
    /// A retirement for `reason`, justified by the items at `by`.
    pub fn retire(reason: Reason, by: Vec<usize>) -> Self {
        Verdict {
            action: Action::Retire,
            reason,
            by,
            rewrites: Vec::new(),
            note: None,
        }
    }
}

/// New text for one block of an item (block 0 for events).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BlockRewrite {
    /// Which block of the message (its index in [`crate::ir::Message::blocks`]).
    pub block: usize,
    /// The text that replaces the block's content.
    pub text: String,
}

/// The final decision for one item, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The item's id.
    pub id: String,
    /// keep, retire or rewrite.
    pub action: Action,
    /// The reason code, for retire and rewrite.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<Reason>,
    /// Ids of the items that justify it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub by: Vec<String>,
    /// A line for people (also why a pass's claim was overruled, e.g. by retention).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}
