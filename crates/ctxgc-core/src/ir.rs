//! The Session IR: one ordered list of items that every front-end lowers to.
//!
//! Format quirks stay in the front-ends; passes only see these types. Every item keeps the
//! exact bytes it was lowered from (`raw`), so a receipt can give the original back byte for
//! byte whatever is decided for it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One item of a session: an event, or a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// Stable id: the event's own id, or one the front-end assigns (`m0`, `m1`, ...).
    pub id: String,
    /// The exact bytes the item was lowered from.
    pub raw: String,
    /// What the item is, with the structure passes need.
    pub kind: Kind,
    /// Sequence edge: the item this one follows from (event traces).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The event's timestamp, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<f64>,
    /// Retention metadata: what protects this item from every pass.
    #[serde(default, skip_serializing_if = "Retention::is_empty")]
    pub retention: Retention,
    /// Fields of the source item outside its schema, kept so rendering drops nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// Boxed: few items have any, and every item of a large trace pays for the field.
    pub extra: Option<Box<Value>>,
}

/// Retention metadata of an item (`importance`, `tags`, `retain_until`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Retention {
    /// Importance on a 0–10 scale (strings `low`, `normal`, `high`, `critical` map to 2, 5, 8, 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub importance: Option<f64>,
    /// Free-form tags; a tag listed in the retention policy protects the item.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// Protection until a point of the trace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retain_until: Option<RetainUntil>,
}

impl Retention {
    /// True when no retention metadata is set.
    pub fn is_empty(&self) -> bool {
        self.importance.is_none() && self.tags.is_empty() && self.retain_until.is_none()
    }
}

/// The point until which `retain_until` protects an item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetainUntil {
    /// Protected while no event of the trace has a timestamp greater than this.
    Timestamp(f64),
    /// Protected until the event with this id is in the trace.
    Event(String),
}

/// What an item is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Kind {
    /// A state variable set to a value.
    SetVar {
        /// The variable.
        key: String,
        /// Its new value.
        value: Value,
    },
    /// A tool call as its own event.
    ToolCall(Call),
    /// A tool result as its own event.
    ToolResult(ToolOutput),
    /// Abandons the branches rooted at `targets`.
    Abandon {
        /// Roots of the abandoned branches.
        targets: Vec<String>,
    },
    /// A decision, requirement or constraint.
    Note {
        /// Which of the three.
        note: NoteKind,
        /// Its text.
        content: String,
        /// Ids of earlier notes this one explicitly replaces.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        supersedes: Vec<String>,
    },
    /// A file was read.
    FileRead {
        /// The file.
        path: String,
    },
    /// A file was edited.
    FileEdit {
        /// The file.
        path: String,
        /// Hash of the change.
        diff_hash: String,
    },
    /// A command, test, build or verification was run.
    Run(Run),
    /// A repository diff was shown.
    GitDiff {
        /// Hash of the diff.
        diff_hash: String,
        /// Files it touches.
        files_changed: Vec<String>,
    },
    /// A commit was made.
    GitCommit {
        /// The commit.
        commit_hash: String,
        /// Its message.
        message: String,
    },
    /// An error was reported.
    Error {
        /// The error text.
        message: String,
        /// The event that caused it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        related_to: Option<String>,
    },
    /// An artifact was created.
    Artifact {
        /// Its type.
        artifact_type: String,
        /// Where it is.
        path: String,
    },
    /// An extra sequence edge `src → dst` between two existing events (out-of-order logs).
    EdgeInjection {
        /// The parent end.
        src: String,
        /// The child end.
        dst: String,
    },
    /// A chat message (any provider format).
    Message(Message),
    /// An event of a type ctxgc does not know, let through by option; never pruned.
    Opaque {
        /// The event's `type`.
        type_name: String,
    },
}

impl Kind {
    /// True for the agent's own output (an assistant message, a tool call, a decision): what
    /// answers a request rather than what the next request carries.
    ///
    /// ```
    /// use ctxgc_core::ir::{Kind, Message, Role};
    /// let said = |role| Kind::Message(Message { role, blocks: Vec::new() });
    /// assert!(said(Role::Assistant).is_agent_turn());
    /// assert!(!said(Role::User).is_agent_turn());
    /// ```
    pub fn is_agent_turn(&self) -> bool {
        match self {
            Kind::Message(m) => m.role == Role::Assistant,
            Kind::ToolCall(_) => true,
            Kind::Note { note, .. } => *note == NoteKind::Decision,
            _ => false,
        }
    }
}

/// decision, requirement or constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoteKind {
    /// `decision`
    Decision,
    /// `requirement`
    Requirement,
    /// `constraint`
    Constraint,
}

impl NoteKind {
    /// The event type name.
    pub fn name(self) -> &'static str {
        match self {
            NoteKind::Decision => "decision",
            NoteKind::Requirement => "requirement",
            NoteKind::Constraint => "constraint",
        }
    }
}

/// A tool call: by event or inside a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// The id results refer to (the event id for events).
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, parsed where they were JSON text.
    pub arguments: Value,
}

/// A tool's output: by event or inside a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// The call it answers.
    pub call_id: String,
    /// The output as given (a string, or any JSON value).
    pub output: Value,
    /// The provider marked it as an error.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
}

/// A run of a command, test suite, build or verification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Which kind of run.
    pub run: RunKind,
    /// What was run, as one line for people (`cargo test`, `tests: a, b`).
    pub subject: String,
    /// True when the run succeeded (exit code 0, no failed test, verification passed).
    pub success: bool,
    /// The outcome, as one line for people (`exit 0`, `3 passed, 0 failed`).
    pub outcome: String,
    /// Identity of what was run, for "the same command or test" (whitespace-normalised).
    pub identity: String,
    /// Identity plus outcome plus every other field: two runs with equal signatures are identical.
    pub signature: String,
}

/// command_run, test_run, build_run or verification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunKind {
    /// `command_run`
    Command,
    /// `test_run`
    Test,
    /// `build_run`
    Build,
    /// `verification`
    Verification,
}

/// A chat message, lowered from any provider format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// The content, block by block, in order.
    pub blocks: Vec<Block>,
}

/// Message roles across providers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// System prompt (or developer message): the policy, never altered.
    System,
    /// The user (or a simulated user).
    User,
    /// The model.
    Assistant,
    /// A tool's output message (OpenAI `tool`/`function` roles).
    Tool,
}

/// One block of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "block", rename_all = "snake_case")]
pub enum Block {
    /// Visible text.
    Text {
        /// The text.
        text: String,
    },
    /// A tool call made by this message.
    ToolCall(Call),
    /// A tool output carried by this message.
    ToolResult(ToolOutput),
    /// Model reasoning that the provider requires back unedited.
    Thinking,
    /// Anything else (images, audio, ...): kept as it is.
    Other,
}

impl Item {
    /// The tool call this item is, if it is a tool_call event.
    pub fn as_call(&self) -> Option<&Call> {
        match &self.kind {
            Kind::ToolCall(call) => Some(call),
            _ => None,
        }
    }

    /// The tool output this item is, if it is a tool_result event.
    pub fn as_result(&self) -> Option<&ToolOutput> {
        match &self.kind {
            Kind::ToolResult(out) => Some(out),
            _ => None,
        }
    }

    /// Calls `f(field, id)` for every other item this item refers to.
    pub fn for_each_reference<'a>(&'a self, mut f: impl FnMut(&'static str, &'a str)) {
        if let Some(parent) = &self.parent {
            f("parent_id", parent);
        }
        match &self.kind {
            Kind::ToolResult(out) => f("call_id", &out.call_id),
            Kind::Abandon { targets } => targets.iter().for_each(|t| f("ref_to", t)),
            Kind::Note { supersedes, .. } => supersedes.iter().for_each(|t| f("supersedes", t)),
            Kind::Error {
                related_to: Some(r),
                ..
            } => f("related_to", r),
            Kind::EdgeInjection { src, dst } => {
                f("src", src);
                f("dst", dst);
            }
            _ => {}
        }
    }

    /// Ids of other items this item refers to, with the field that names them.
    pub fn references(&self) -> Vec<(&'static str, &str)> {
        let mut refs = Vec::new();
        self.for_each_reference(|field, id| refs.push((field, id)));
        refs
    }
}

/// Canonical text of a JSON value: object keys sorted, no whitespace. Two values that mean the
/// same compare equal through it whatever their key order or spacing.
///
/// ```
/// use serde_json::json;
/// assert_eq!(
///     ctxgc_core::ir::canonical_json(&json!({"b": 1, "a": [true, null]})),
///     r#"{"a":[true,null],"b":1}"#
/// );
/// ```
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

/// Appends [`canonical_json`] of `value` to `out`.
pub(crate) fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&str, &Value)> =
                map.iter().map(|(k, v)| (k.as_str(), v)).collect();
            write_canonical_entries(&mut entries, out);
        }
        Value::Array(items) => write_joined(out, '[', ']', items, write_canonical),
        other => out.push_str(&other.to_string()),
    }
}

/// Writes `items` between `open` and `close`, comma-separated, each with `write_item`: the
/// layout of a JSON array or object that every compact writer of the crate shares.
pub(crate) fn write_joined<T>(
    out: &mut String,
    open: char,
    close: char,
    items: impl IntoIterator<Item = T>,
    mut write_item: impl FnMut(T, &mut String),
) {
    out.push(open);
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_item(item, out);
    }
    out.push(close);
}

/// Writes the object of `entries` as [`canonical_json`] writes an object (it sorts them by
/// key; keys are distinct), for a caller holding an object's members rather than a map.
///
/// ```
/// use serde_json::json;
/// let (b, a) = (json!([1]), json!({"y": 1, "x": 2}));
/// let mut out = String::new();
/// ctxgc_core::ir::write_canonical_entries(&mut [("b", &b), ("a", &a)], &mut out);
/// assert_eq!(out, r#"{"a":{"x":2,"y":1},"b":[1]}"#);
/// ```
pub fn write_canonical_entries(entries: &mut [(&str, &Value)], out: &mut String) {
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    out.push('{');
    for (i, (key, value)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_json_string(key, out);
        out.push(':');
        write_canonical(value, out);
    }
    out.push('}');
}

/// Appends `text` as a JSON string literal, escaped as serde_json escapes it.
pub(crate) fn write_json_string(text: &str, out: &mut String) {
    // Serialising a string cannot fail.
    out.push_str(&serde_json::to_string(text).unwrap_or_default());
}

/// A value as people read it: strings without quotes, anything else as compact JSON.
pub fn plain_value(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
