//! Declared state: what an assistant turn says it concluded, as a structured side effect.
//!
//! An assistant turn may carry a block
//! `<contextgc-state>{"assert": {...}, "pin": {...}, "revoke": [...], "unsure": {...}}</contextgc-state>`
//! (the tag `ctxgc-state` is accepted too). Within one block the verbs apply in this order:
//! `revoke`, `assert`, `unsure`, `pin`, so `{"assert": {"k": 1}, "pin": {"k": 1}}` pins `k`.
//!
//! - `assert` sets a key; the last write wins.
//! - `pin` sets a key and makes it immutable: a later write of another value is rejected and
//!   reported (the same value again is accepted and becomes the newest support).
//! - `revoke` stops tracking a key (a pinned key cannot be revoked).
//! - `unsure` records a low-confidence value, flagged as such in the register. An unsure
//!   value never retires the turn of a confident one.
//!
//! **Trust boundary.** Only assistant turns may declare. A block in a user, tool or system
//! message, or inside a tool result, is stripped from what the model receives and reported,
//! never applied: tool output is attacker-controlled. Blocks are always stripped from what the
//! model receives; a malformed block is reported with the message and the parse error, and the
//! text around it is kept. Keys are normalised the same way for every verb (trimmed,
//! lower-cased, runs of spaces and `-` turned into `_`).
//!
//! ```
//! use ctxgc_core::chat::state::{find_blocks, strip_blocks};
//! let text = "Upgrading you now.\n<contextgc-state>{\"assert\": {\"cabin_class\": \"business\"}}</contextgc-state>";
//! let blocks = find_blocks(text);
//! assert_eq!(blocks.len(), 1);
//! assert_eq!(blocks[0].parsed.as_ref().unwrap().assert[0].0, "cabin_class");
//! assert_eq!(strip_blocks(text).unwrap(), "Upgrading you now.");
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::chat::register;
use crate::chat::schema::{Schema, SchemaPolicy};
use crate::chat::{block_text, message_of};
use crate::ir::{Block, Item, Role, canonical_json};

const TAGS: [&str; 2] = ["contextgc-state", "ctxgc-state"];

/// The declarations of one block, keys as written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Declarations {
    /// `assert`: key, value.
    pub assert: Vec<(String, Value)>,
    /// `pin`: key, value.
    pub pin: Vec<(String, Value)>,
    /// `revoke`: keys.
    pub revoke: Vec<String>,
    /// `unsure`: key, value.
    pub unsure: Vec<(String, Value)>,
}

/// A state block found in a text.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundBlock {
    /// Byte offset of the opening tag.
    pub start: usize,
    /// Byte offset just past the closing tag (the end of the text when it is unclosed).
    pub end: usize,
    /// True when a closing tag was found (only closed blocks are stripped).
    pub closed: bool,
    /// The declarations, or why they could not be read.
    pub parsed: Result<Declarations, String>,
}

/// Every state block in `text`, in order.
pub fn find_blocks(text: &str) -> Vec<FoundBlock> {
    let mut found = Vec::new();
    let mut at = 0;
    while at < text.len() {
        let next = TAGS
            .iter()
            .filter_map(|tag| {
                let open = format!("<{tag}>");
                text[at..].find(&open).map(|p| (at + p, *tag, open.len()))
            })
            .min_by_key(|&(p, _, _)| p);
        let Some((start, tag, open_len)) = next else {
            break;
        };
        let close = format!("</{tag}>");
        let body_start = start + open_len;
        match text[body_start..].find(&close) {
            Some(p) => {
                let body = &text[body_start..body_start + p];
                let end = body_start + p + close.len();
                found.push(FoundBlock {
                    start,
                    end,
                    closed: true,
                    parsed: parse_declarations(body),
                });
                at = end;
            }
            None => {
                found.push(FoundBlock {
                    start,
                    end: text.len(),
                    closed: false,
                    parsed: Err(format!("<{tag}> is never closed by </{tag}>")),
                });
                break;
            }
        }
    }
    found
}

fn keyed(verb: &str, value: Option<&Value>) -> Result<Vec<(String, Value)>, String> {
    match value {
        None => Ok(Vec::new()),
        Some(Value::Object(map)) => Ok(map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
        Some(_) => Err(format!("`{verb}` must be an object of key: value")),
    }
}

/// Reads the JSON inside a block.
pub fn parse_declarations(body: &str) -> Result<Declarations, String> {
    let value: Value = serde_json::from_str(body.trim()).map_err(|e| {
        format!(
            "malformed JSON at line {}, column {}: {e}",
            e.line(),
            e.column()
        )
    })?;
    let Value::Object(map) = &value else {
        return Err("the block must hold a JSON object".into());
    };
    if let Some(unknown) = map
        .keys()
        .find(|k| !matches!(k.as_str(), "assert" | "pin" | "revoke" | "unsure"))
    {
        return Err(format!(
            "unknown verb `{unknown}` (use assert, pin, revoke, unsure)"
        ));
    }
    let revoke = match map.get("revoke") {
        None => Vec::new(),
        Some(Value::Array(keys)) => keys
            .iter()
            .map(|k| {
                k.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| "`revoke` must be a list of key names".to_owned())
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("`revoke` must be a list of key names".into()),
    };
    Ok(Declarations {
        assert: keyed("assert", map.get("assert"))?,
        pin: keyed("pin", map.get("pin"))?,
        revoke,
        unsure: keyed("unsure", map.get("unsure"))?,
    })
}

/// `text` with every closed state block removed, or `None` when it has none. At each cut, the
/// whitespace around it shrinks to one separator — a newline when it held one, nothing at the
/// start or end of the text, nothing when the block touched text on both sides.
pub fn strip_blocks(text: &str) -> Option<String> {
    let blocks: Vec<FoundBlock> = find_blocks(text).into_iter().filter(|b| b.closed).collect();
    if blocks.is_empty() {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut cuts = Vec::with_capacity(blocks.len());
    let mut at = 0;
    for block in &blocks {
        out.push_str(&text[at..block.start]);
        cuts.push(out.len());
        at = block.end;
    }
    out.push_str(&text[at..]);
    for &cut in cuts.iter().rev() {
        let before = out[..cut].trim_end();
        let a = before.len();
        let b = cut + (out[cut..].len() - out[cut..].trim_start().len());
        let run = &out[a..b];
        let separator = if a == 0 || b == out.len() || run.is_empty() {
            ""
        } else if run.contains('\n') {
            "\n"
        } else {
            " "
        };
        out.replace_range(a..b, separator);
    }
    Some(out)
}

/// Key normalisation, the same for every verb and for schema keys.
///
/// ```
/// assert_eq!(ctxgc_core::chat::state::normalize_key("  Cabin-Class "), "cabin_class");
/// assert_eq!(ctxgc_core::chat::state::normalize_key("order id"), "order_id");
/// ```
pub fn normalize_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut pending = false;
    for c in key.trim().chars() {
        if c.is_whitespace() || c == '-' || c == '_' {
            pending = true;
        } else {
            if pending && !out.is_empty() {
                out.push('_');
            }
            pending = false;
            out.extend(c.to_lowercase());
        }
    }
    out
}

/// How sure a fact is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Asserted.
    Declared,
    /// Pinned: immutable.
    Pinned,
    /// Low confidence.
    Unsure,
}

impl Status {
    /// The word in the register.
    pub fn word(self) -> &'static str {
        match self {
            Status::Declared => "declared",
            Status::Pinned => "pinned",
            Status::Unsure => "unsure",
        }
    }

    /// Parses [`Status::word`].
    pub fn from_word(word: &str) -> Option<Status> {
        match word {
            "declared" => Some(Status::Declared),
            "pinned" => Some(Status::Pinned),
            "unsure" => Some(Status::Unsure),
            _ => None,
        }
    }
}

/// A live fact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fact {
    /// The value.
    pub value: Value,
    /// declared, pinned or unsure.
    pub status: Status,
    /// Position of the item that supports it (its newest write).
    pub support: usize,
    /// The id shown as its provenance: the supporting message's id, or the provenance an
    /// earlier register gave when the fact was carried over from it.
    pub provenance: String,
    /// True when it was carried over from a register in the input.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub carried: bool,
    /// Schema problems it was accepted with (policy `flag`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
}

/// The verb of an accepted write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verb {
    /// `assert`
    Assert,
    /// `pin`
    Pin,
    /// `revoke`
    Revoke,
    /// `unsure`
    Unsure,
}

impl Verb {
    /// The verb as written in a block.
    pub fn word(self) -> &'static str {
        match self {
            Verb::Assert => "assert",
            Verb::Pin => "pin",
            Verb::Revoke => "revoke",
            Verb::Unsure => "unsure",
        }
    }

    /// Confident writes (everything but `unsure`) supersede earlier writes.
    pub fn confident(self) -> bool {
        self != Verb::Unsure
    }
}

/// Something the ledger reports about a declaration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum StateEventKind {
    /// A block outside an assistant turn: stripped, never applied.
    Untrusted {
        /// The role of the message it was in (`tool` for a tool result inside a user message).
        role: String,
    },
    /// A block that could not be read: nothing of it applied.
    Malformed {
        /// The parse error.
        error: String,
    },
    /// A write to a pinned (or schema-immutable) key with another value: rejected.
    PinConflict {
        /// The key.
        key: String,
        /// The verb attempted.
        verb: Verb,
        /// The pinned value.
        pinned: Value,
        /// The value attempted (null for revoke).
        attempted: Value,
    },
    /// A value that breaks the schema.
    SchemaViolation {
        /// The key.
        key: String,
        /// The verb.
        verb: Verb,
        /// The value.
        value: Value,
        /// What is wrong.
        problems: Vec<String>,
        /// What was done: `flagged`, `rejected` or `reported` (policy off).
        action: String,
    },
    /// A new key beyond the cap on tracked keys: rejected.
    KeyCap {
        /// The key.
        key: String,
        /// The cap.
        cap: usize,
    },
    /// A value longer than the cap: rejected.
    ValueCap {
        /// The key.
        key: String,
        /// Its length as compact JSON.
        length: usize,
        /// The cap.
        cap: usize,
    },
    /// A key that normalises to nothing: rejected.
    InvalidKey {
        /// The key as written.
        key: String,
    },
    /// A revoke of a key that is not tracked: nothing to do.
    RevokeUntracked {
        /// The key.
        key: String,
    },
    /// A system text that opens with the register's header but is not a register ctxgc wrote
    /// (other lines, another shape, or not where ctxgc puts the register): it is the caller's
    /// text, sent as it is, and none of its lines is read as a fact.
    ForeignRegister {
        /// Its first line.
        line: String,
    },
}

/// A report about one message's declarations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateEvent {
    /// Position of the message in the session.
    pub index: usize,
    /// The message's id.
    pub id: String,
    /// What happened.
    #[serde(flatten)]
    pub kind: StateEventKind,
}

/// Declared-state rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateConfig {
    /// Optional entity schema.
    pub schema: Option<Schema>,
    /// What a schema violation does.
    pub schema_policy: SchemaPolicy,
    /// Most keys tracked at once.
    pub max_keys: usize,
    /// Longest value, as compact JSON, in characters.
    pub max_value_chars: usize,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            schema: None,
            schema_policy: SchemaPolicy::Flag,
            max_keys: 64,
            max_value_chars: 256,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct KeyState {
    current: Option<Fact>,
    /// The newest turn with a confident write of this key.
    last_confident: Option<usize>,
    /// Pinned value (a pin, or the first value of a schema-immutable key).
    pinned: Option<Value>,
}

/// The live declared state, built message by message.
///
/// ```
/// use ctxgc_core::chat::state::{Ledger, StateConfig};
/// use ctxgc_core::frontend::openai::lower_messages;
/// let items = lower_messages(r#"[
///   {"role": "assistant", "content": "<ctxgc-state>{\"assert\": {\"x\": 1, \"y\": 2}}</ctxgc-state>"},
///   {"role": "assistant", "content": "<ctxgc-state>{\"assert\": {\"x\": 3}}</ctxgc-state>"}
/// ]"#).unwrap();
/// let mut ledger = Ledger::new(StateConfig::default());
/// for (i, item) in items.iter().enumerate() { ledger.apply(i, item); }
/// assert_eq!(ledger.facts()["x"].support, 1);
/// // m0 still supports y, so it is not dead although x moved on.
/// assert!(ledger.superseding(0).is_none());
/// ```
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Ledger {
    config: StateConfig,
    keys: BTreeMap<String, KeyState>,
    /// Accepted writes per turn: key and verb.
    #[serde(with = "crate::chat::position_btree")]
    turns: BTreeMap<usize, Vec<(String, Verb)>>,
    events: Vec<StateEvent>,
    tracked: usize,
    /// Where the back-end writes the register (the only place one is read back from).
    #[serde(default)]
    leading: register::LeadingSystem,
    /// How many times a key's latest confident write moved (since this value was built or
    /// loaded): when it moves, a turn's facts may have died.
    #[serde(skip)]
    confident_moves: u64,
}

impl Ledger {
    /// An empty ledger.
    pub fn new(config: StateConfig) -> Self {
        Ledger {
            config,
            ..Default::default()
        }
    }

    /// Builds the ledger of a whole session.
    pub fn build(config: StateConfig, items: &[Item]) -> Self {
        let mut ledger = Ledger::new(config);
        for (i, item) in items.iter().enumerate() {
            ledger.apply(i, item);
        }
        ledger
    }

    /// Live facts by key.
    pub fn facts(&self) -> BTreeMap<&str, &Fact> {
        self.keys
            .iter()
            .filter_map(|(k, s)| s.current.as_ref().map(|f| (k.as_str(), f)))
            .collect()
    }

    /// Everything reported so far, in order.
    pub fn events(&self) -> &[StateEvent] {
        &self.events
    }

    /// Accepted writes of turn `i`.
    pub fn writes_of(&self, i: usize) -> &[(String, Verb)] {
        self.turns.get(&i).map_or(&[], Vec::as_slice)
    }

    /// The declared-state rules it applies.
    pub fn config(&self) -> &StateConfig {
        &self.config
    }

    /// The newest turn with a confident write (anything but `unsure`) of `key`, a key as
    /// [`Ledger::writes_of`] gives it.
    pub fn last_confident(&self, key: &str) -> Option<usize> {
        self.keys.get(key)?.last_confident
    }

    /// Counts the moves of any key's latest confident write (a counter, only ever compared
    /// with itself before and after [`Ledger::apply`]).
    pub fn confident_moves(&self) -> u64 {
        self.confident_moves
    }

    /// The turns that wrote a fact, in order.
    pub fn written_turns(&self) -> impl Iterator<Item = usize> + '_ {
        self.turns.keys().copied()
    }

    /// When every fact turn `i` declared (assert, pin or unsure) is dead — a later confident
    /// write in another turn replaced it, or it was revoked — the turns that killed them.
    /// `None` while the turn declared nothing, or still supports a live fact.
    pub fn superseding(&self, i: usize) -> Option<Vec<usize>> {
        let writes = self.turns.get(&i)?;
        if !writes.iter().any(|(_, v)| *v != Verb::Revoke) {
            return None;
        }
        let mut by = Vec::new();
        for (key, _) in writes {
            let state = self.keys.get(key)?;
            match state.last_confident {
                Some(last) if last > i => by.push(last),
                _ => return None,
            }
        }
        by.sort_unstable();
        by.dedup();
        Some(by)
    }

    fn event(&mut self, index: usize, item: &Item, kind: StateEventKind) {
        self.events.push(StateEvent {
            index,
            id: item.id.clone(),
            kind,
        });
    }

    /// Takes message `i` into account (messages must be applied in order).
    pub fn apply(&mut self, i: usize, item: &Item) {
        let Some(message) = message_of(item) else {
            return;
        };
        let leading = self.leading.next(item);
        if message.role == Role::System {
            let written = register::written_block(item, leading);
            if let Some(w) = &written {
                self.carry_over(i, &w.lines);
            }
            for (b, block) in message.blocks.iter().enumerate() {
                if written.as_ref().is_some_and(|w| w.block == b) {
                    continue;
                }
                if let Some(text) = block_text(block)
                    && register::parse(text).is_some()
                {
                    let line = text.trim_start().lines().next().unwrap_or_default();
                    self.event(
                        i,
                        item,
                        StateEventKind::ForeignRegister {
                            line: line.to_owned(),
                        },
                    );
                }
            }
        }
        for block in &message.blocks {
            let Some(text) = block_text(block) else {
                continue;
            };
            let trusted = message.role == Role::Assistant && matches!(block, Block::Text { .. });
            for found in find_blocks(text) {
                if !trusted {
                    let role = if matches!(block, Block::ToolResult(_)) {
                        "tool"
                    } else {
                        crate::chat::role_name(message.role)
                    };
                    self.event(
                        i,
                        item,
                        StateEventKind::Untrusted {
                            role: role.to_owned(),
                        },
                    );
                    continue;
                }
                match found.parsed {
                    Ok(declarations) => self.declare(i, item, &declarations),
                    Err(error) => self.event(i, item, StateEventKind::Malformed { error }),
                }
            }
        }
    }

    fn carry_over(&mut self, i: usize, lines: &[register::Line]) {
        for line in lines {
            match line {
                register::Line::Fact {
                    key,
                    value,
                    provenance,
                    status,
                    flags,
                } => {
                    let key = normalize_key(key);
                    if key.is_empty() {
                        continue;
                    }
                    let state = self.keys.entry(key.clone()).or_default();
                    if state.current.is_none() {
                        self.tracked += 1;
                    }
                    if *status == Status::Pinned {
                        state.pinned = Some(value.clone());
                    }
                    if *status != Status::Unsure {
                        state.last_confident = Some(i);
                        self.confident_moves += 1;
                    }
                    state.current = Some(Fact {
                        value: value.clone(),
                        status: *status,
                        support: i,
                        provenance: provenance.clone(),
                        carried: true,
                        flags: flags.clone(),
                    });
                }
                // A register ctxgc wrote has no such line (see `register::read_written`).
                register::Line::Unreadable(_) => {}
            }
        }
    }

    fn declare(&mut self, i: usize, item: &Item, d: &Declarations) {
        for key in &d.revoke {
            self.write(i, item, key, Verb::Revoke, Value::Null);
        }
        for (key, value) in &d.assert {
            self.write(i, item, key, Verb::Assert, value.clone());
        }
        for (key, value) in &d.unsure {
            self.write(i, item, key, Verb::Unsure, value.clone());
        }
        for (key, value) in &d.pin {
            self.write(i, item, key, Verb::Pin, value.clone());
        }
    }

    fn write(&mut self, i: usize, item: &Item, raw_key: &str, verb: Verb, value: Value) {
        let key = normalize_key(raw_key);
        if key.is_empty() {
            self.event(
                i,
                item,
                StateEventKind::InvalidKey {
                    key: raw_key.to_owned(),
                },
            );
            return;
        }
        let state = self.keys.get(&key);
        let live = state.is_some_and(|s| s.current.is_some());
        let pinned = state.and_then(|s| s.pinned.clone());
        if verb == Verb::Revoke {
            if let Some(pinned) = pinned {
                self.event(
                    i,
                    item,
                    StateEventKind::PinConflict {
                        key,
                        verb,
                        pinned,
                        attempted: Value::Null,
                    },
                );
                return;
            }
            if !live {
                self.event(i, item, StateEventKind::RevokeUntracked { key });
                return;
            }
        } else {
            if let Some(pinned) = &pinned
                && canonical_json(pinned) != canonical_json(&value)
            {
                self.event(
                    i,
                    item,
                    StateEventKind::PinConflict {
                        key,
                        verb,
                        pinned: pinned.clone(),
                        attempted: value,
                    },
                );
                return;
            }
            let length = canonical_json(&value).chars().count();
            if length > self.config.max_value_chars {
                self.event(
                    i,
                    item,
                    StateEventKind::ValueCap {
                        key,
                        length,
                        cap: self.config.max_value_chars,
                    },
                );
                return;
            }
            if !live && self.tracked >= self.config.max_keys {
                self.event(
                    i,
                    item,
                    StateEventKind::KeyCap {
                        key,
                        cap: self.config.max_keys,
                    },
                );
                return;
            }
        }
        let mut flags = Vec::new();
        if verb != Verb::Revoke
            && let Some(schema) = &self.config.schema
        {
            let problems = schema.check(&key, &value);
            if !problems.is_empty() {
                let policy = self.config.schema_policy;
                let action = match policy {
                    SchemaPolicy::Flag => "flagged",
                    SchemaPolicy::Reject => "rejected",
                    SchemaPolicy::Off => "reported",
                };
                self.event(
                    i,
                    item,
                    StateEventKind::SchemaViolation {
                        key: key.clone(),
                        verb,
                        value: value.clone(),
                        problems: problems.clone(),
                        action: action.to_owned(),
                    },
                );
                match policy {
                    SchemaPolicy::Reject => return,
                    SchemaPolicy::Flag => flags = problems,
                    SchemaPolicy::Off => {}
                }
            }
        }
        let immutable = self
            .config
            .schema
            .as_ref()
            .is_some_and(|s| s.is_immutable(&key));
        let state = self.keys.entry(key.clone()).or_default();
        match verb {
            Verb::Revoke => {
                state.current = None;
                self.tracked -= 1;
            }
            _ => {
                if state.current.is_none() {
                    self.tracked += 1;
                }
                let status = match verb {
                    Verb::Pin => Status::Pinned,
                    Verb::Unsure => Status::Unsure,
                    _ if state.pinned.is_some() => Status::Pinned,
                    _ => Status::Declared,
                };
                if verb == Verb::Pin || (immutable && verb != Verb::Unsure) {
                    state.pinned = Some(value.clone());
                }
                state.current = Some(Fact {
                    value,
                    status,
                    support: i,
                    provenance: item.id.clone(),
                    carried: false,
                    flags,
                });
            }
        }
        if verb.confident() {
            state.last_confident = Some(i);
            self.confident_moves += 1;
        }
        let writes = self.turns.entry(i).or_default();
        if let Some(existing) = writes.iter_mut().find(|(k, _)| *k == key) {
            existing.1 = verb;
        } else {
            writes.push((key, verb));
        }
    }
}

/// The orphan check: every live fact must be supported by a turn that is still sent (or be
/// carried by the register itself). Returns the keys left without support.
///
/// ```
/// use ctxgc_core::chat::state::{Ledger, StateConfig, orphans};
/// use ctxgc_core::frontend::openai::lower_messages;
/// let items = lower_messages(r#"[{"role": "assistant", "content": "<ctxgc-state>{\"assert\": {\"x\": 1}}</ctxgc-state>"}]"#).unwrap();
/// let ledger = Ledger::build(StateConfig::default(), &items);
/// assert!(orphans(&ledger, |_| false).is_empty());
/// assert_eq!(orphans(&ledger, |i| i == 0), vec!["x".to_string()]);
/// ```
pub fn orphans(ledger: &Ledger, retired: impl Fn(usize) -> bool) -> Vec<String> {
    ledger
        .facts()
        .into_iter()
        .filter(|(_, fact)| !fact.carried && retired(fact.support))
        .map(|(key, _)| key.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strip_keeps_the_text_around() {
        assert_eq!(
            strip_blocks("a <ctxgc-state>{}</ctxgc-state> b").as_deref(),
            Some("a b")
        );
        assert_eq!(
            strip_blocks("a\n<ctxgc-state>{}</ctxgc-state>\nb").as_deref(),
            Some("a\nb")
        );
        assert_eq!(
            strip_blocks("<ctxgc-state>{}</ctxgc-state>").as_deref(),
            Some("")
        );
        assert_eq!(
            strip_blocks("<ctxgc-state>{}</ctxgc-state>\n\nHello").as_deref(),
            Some("Hello")
        );
        assert_eq!(strip_blocks("no block here"), None);
    }

    #[test]
    fn unclosed_block_is_reported_and_not_stripped() {
        let blocks = find_blocks("text <contextgc-state>{\"assert\": {}}");
        assert_eq!(blocks.len(), 1);
        assert!(!blocks[0].closed);
        assert!(
            blocks[0]
                .parsed
                .as_ref()
                .unwrap_err()
                .contains("never closed")
        );
        assert_eq!(strip_blocks("text <contextgc-state>{\"assert\": {}}"), None);
    }

    #[test]
    fn malformed_json_names_the_position() {
        let err = parse_declarations("{\"assert\": {\"k\": }").unwrap_err();
        assert!(err.starts_with("malformed JSON at line 1, column"), "{err}");
        assert!(
            parse_declarations("{\"set\": {}}")
                .unwrap_err()
                .contains("unknown verb `set`")
        );
        assert!(parse_declarations("{\"revoke\": \"k\"}").is_err());
        assert!(parse_declarations("[1]").is_err());
    }
}
