//! The projection: per tool, which fields to keep and which to drop, with the counts behind
//! every decision. It is plain JSON meant for review: move a field from `drop` to `keep`
//! (or delete it from `drop`) and it is kept; add a field to `drop` and it is dropped; set
//! `"trim": false` and the tool's outputs are only re-serialised, never trimmed. Fields that
//! appear in neither list (new fields, fields never seen) are always kept. A field listed in
//! both lists is kept.
//!
//! **Rules** ([`LearnOptions`]): a field is dropped when it was seen in at least `min_calls`
//! calls over `min_runs` runs and used in at most `max_used_share` of them (by default:
//! never), unless it identifies a record. Identifying fields are ids, keys, names, titles,
//! numbers and codes by their key name (`id`, `user_id`, `orderId`, `first_name`, `title`,
//! `flight_number`, `sku`...), and fields whose values all look like identifiers
//! (`HAT069`, `credit_card_7`): the agent keeps them to refer to records and ask for more.
//!
//! **Recall-backed rules** ([`LearnOptions::recallable`]): the rules above assume that a
//! hidden value is gone for good, so they keep anything the agent might need. Where the
//! agent can get a hidden value back — a compile that offers a recall tool
//! (`--expand-tool`), the proxy's expand tool, the gateway's recall — hiding a value costs
//! at most one recall in the calls that need it, and the rules can be bolder:
//!
//! - an identifying field that no run used is hidden like any unused field (one that some
//!   run used is still kept: the agent refers to records by it);
//! - any other field used in at most [`RECALLABLE_USED_SHARE`] of the calls that had it is
//!   hidden (reason `rarely_used`): the few calls that need it pay a recall;
//! - a field whose values the same output always shows elsewhere — a trip's `origin` that
//!   its `flights[].origin` repeat, an entry's `id` that repeats the entry's key — is hidden
//!   however often it is used (reason `echoed`, with the field it echoes in `of`), as long
//!   as that field is kept. Each output is checked again when trimmed, so such a field is
//!   hidden only where its values are still in the text ([`super::echo`]). What is lost is
//!   the label, not a value: the recall gives it back.
//!
//! Without a recall channel nothing changes: the default rules are the conservative ones.
//!
//! ```
//! use ctxgc_core::projection::{Projection, Run, learn::LearnOptions, counts::observe_run};
//! use ctxgc_core::Tokenizer;
//! use serde_json::json;
//! let mut total = ctxgc_core::projection::Counts::default();
//! for i in 0..3 {
//!     let mut run = Run::new(format!("r{i}"));
//!     let out = format!(r#"{{"order_id": "A{i}B", "price": 1{i}5, "warehouse": "north wing"}}"#);
//!     run.push_call("get_order", json!({}), out, None);
//!     run.push_message(format!("It costs {}.", 105 + i * 10), None);
//!     total.add(&observe_run(&run, &Default::default(), Tokenizer::default()).counts);
//! }
//! let p = Projection::learn(&total, &LearnOptions::default(), Tokenizer::default());
//! let tool = &p.tools["get_order"];
//! assert_eq!(tool.drop.iter().map(|d| d.field.as_str()).collect::<Vec<_>>(), ["warehouse"]);
//! assert!(tool.keep.iter().any(|d| d.field == "order_id")); // identifying
//! assert!(tool.keep.iter().any(|d| d.field == "price"));    // used
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::counts::{Counts, FieldCounts, ToolCounts};
use super::fields::{OPAQUE_FIELD, last_key};
use crate::tokens::Tokenizer;

/// The format version written in every projection file.
pub const PROJECTION_FORMAT: u32 = 1;

/// How fields are judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LearnOptions {
    /// A field is judged only once seen in this many calls (fewer: kept).
    pub min_calls: u64,
    /// ... and in this many runs.
    pub min_runs: u64,
    /// Dropped when used in at most this share of the calls that had it (0: never used).
    pub max_used_share: f64,
    /// Keep identifying fields (ids, keys, names, titles) even when unused.
    pub keep_identifying: bool,
    /// Hide fields only when that saves at least this many tokens, the footer paid for.
    pub min_saving_tokens: u64,
    /// Let a tool's whole output be hidden when it is not JSON and never used. Off by
    /// default: plain text is read to reason more often than it is quoted, so the learner
    /// only suggests it (reason `whole_output`) and a person decides.
    pub drop_whole_text: bool,
    /// Also re-encode a trimmed output as the `compact-json` pass does, when that is smaller:
    /// plain notation, lists of records as a header of keys plus rows (lossless, but no
    /// longer the tool's JSON; off by default). A compile's projection pass always does,
    /// since the rewrite it has to beat does too.
    pub tables: bool,
    /// Hidden values can be recalled (the compile offers a recall tool, the proxy its expand
    /// tool, the gateway its recall): identifying fields no run used are hidden too, while
    /// identifying fields some run used stay. Off by default; see
    /// [`LearnOptions::recallable`] and the module's doc for the rule and why.
    #[serde(skip_serializing_if = "is_false")]
    pub recallable: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The share of calls in which a field may be used and still be hidden under the
/// recall-backed rules ([`LearnOptions::recallable`]).
///
/// Each use of a hidden value costs one recall (one more request), so the share bounds the
/// recalls a hidden field causes per call that carries it, and the recalls must stay rare for
/// the trim to pay. Measured leave-one-out on multi-turn customer-service transcripts (three
/// files, 882 conversations; each conversation compiled cache-stable with a recall tool and a
/// projection learned from the other conversations of its file), the share of tool-output
/// tokens removed and the recalls per agent turn were, by share: 0 (never used, identifying
/// fields kept): 28–35%, no recall beyond one per file; 0.03: 31–40%, at most 0.1%; 0.05:
/// 31–40%, at most 0.3%; 0.10: 34–41%, at most 0.6%; 0.20: 36–45%, 2.3–4.6%, and a higher
/// bill than at 0.10 (the recalls cost more than the trims save). 0.10 is the largest share
/// that kept recalls under 1% of turns on every file, and its bill was the lowest measured
/// (or within 0.001 of it) on each file.
pub const RECALLABLE_USED_SHARE: f64 = 0.10;

impl LearnOptions {
    /// The recall-backed rules, for agents that can get a hidden value back: identifying
    /// fields no run used are hidden, and fields used in at most [`RECALLABLE_USED_SHARE`]
    /// of their calls are hidden; everything else as the defaults.
    ///
    /// ```
    /// use ctxgc_core::projection::learn::{LearnOptions, RECALLABLE_USED_SHARE};
    /// let rules = LearnOptions::recallable();
    /// assert!(rules.recallable && rules.keep_identifying);
    /// assert_eq!(rules.max_used_share, RECALLABLE_USED_SHARE);
    /// assert!(!LearnOptions::default().recallable);
    /// ```
    pub fn recallable() -> Self {
        LearnOptions {
            recallable: true,
            max_used_share: RECALLABLE_USED_SHARE,
            ..LearnOptions::default()
        }
    }
}

impl Default for LearnOptions {
    fn default() -> Self {
        LearnOptions {
            min_calls: 3,
            min_runs: 2,
            max_used_share: 0.0,
            keep_identifying: true,
            min_saving_tokens: 8,
            tables: false,
            drop_whole_text: false,
            recallable: false,
        }
    }
}

/// Why a field is kept or dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldReason {
    /// It names a record (an id, key, name, title): kept even when unused (under the
    /// recall-backed rules: kept when some run used it).
    Identifying,
    /// The agent used it.
    Used,
    /// Seen too rarely to judge: kept.
    TooFewObservations,
    /// Never used in the calls seen: dropped.
    NeverUsed,
    /// Used, but in no more than the allowed share of calls: dropped.
    RarelyUsed,
    /// A plain-text output that was never used: kept, since hiding it would leave the
    /// agent nothing (see `drop_whole_text`); a candidate for review.
    WholeOutput,
    /// Sometimes empty or null, sometimes holding fields: kept, its fields judged one by one.
    HoldsFields,
    /// Put there by a person (no reason given in the file).
    #[default]
    Reviewed,
    /// Every call that had it showed its values in another kept field too (see `of`):
    /// dropped under the recall-backed rules, in the outputs where that still holds.
    Echoed,
}

/// One field's decision and the counts behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldDecision {
    /// The generalised field path (`flights[].price`).
    pub field: String,
    /// Calls whose output had it.
    #[serde(default)]
    pub seen: u64,
    /// Calls in which the agent used it.
    #[serde(default)]
    pub used: u64,
    /// Average tokens it costs in an output that has it.
    #[serde(default)]
    pub tokens: u64,
    /// Why.
    #[serde(default)]
    pub reason: FieldReason,
    /// For a field dropped as an echo: the field that shows its values (or, for a field that
    /// repeats its entry's key, the entry's path, `payment_methods{}`). Trimming hides the
    /// field only in outputs where that field holds all its values and is not dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub of: Option<String>,
}

/// One tool's projection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolProjection {
    /// When false, outputs are re-serialised but nothing is dropped.
    #[serde(default = "yes")]
    pub trim: bool,
    /// Calls learned from.
    #[serde(default)]
    pub calls: u64,
    /// Runs learned from.
    #[serde(default)]
    pub runs: u64,
    /// Fields kept.
    #[serde(default)]
    pub keep: Vec<FieldDecision>,
    /// Fields dropped.
    #[serde(default)]
    pub drop: Vec<FieldDecision>,
}

fn yes() -> bool {
    true
}

/// What a projection was learned from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnedFrom {
    /// Runs.
    #[serde(default)]
    pub runs: u64,
    /// Runs with an answer.
    #[serde(default)]
    pub runs_with_answer: u64,
    /// Tool calls with an output.
    #[serde(default)]
    pub calls: u64,
}

/// A learned (and possibly reviewed) projection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Projection {
    /// Format version ([`PROJECTION_FORMAT`]).
    pub ctxgc_projection: u32,
    /// Vocabulary that counts tokens when deciding whether hiding is worth it.
    #[serde(default)]
    pub tokenizer: Tokenizer,
    /// What it was learned from.
    #[serde(default)]
    pub learned_from: LearnedFrom,
    /// The rules it was learned with.
    #[serde(default)]
    pub rules: LearnOptions,
    /// Per tool.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolProjection>,
}

/// A projection file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProjectionError {
    /// Not JSON, or not a projection's shape.
    #[error("projection: line {line}, column {column}: {message}")]
    Json {
        /// One-based line.
        line: usize,
        /// One-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A version this build does not read.
    #[error(
        "projection: format version {0} is not supported (this build reads version {PROJECTION_FORMAT})"
    )]
    Version(u32),
    /// A field path that cannot be right.
    #[error("projection: tool {tool:?}: {list}[{index}]: {message}")]
    Field {
        /// The tool.
        tool: String,
        /// `keep` or `drop`.
        list: &'static str,
        /// Position in the list.
        index: usize,
        /// What is wrong.
        message: String,
    },
}

/// Words of a key (`flightNumber`, `flight_number`, `flight-number` → `flight`, `number`).
fn key_words(key: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in key.chars() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !cur.is_empty() {
            words.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        cur.extend(c.to_lowercase());
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// True when a key names a record's id by its last word (`id`, `order_id`, `userId`, `uuid`).
///
/// ```
/// use ctxgc_core::projection::learn::names_an_id;
/// assert!(names_an_id("reservation_id") && names_an_id("orderId") && names_an_id("id"));
/// assert!(!names_an_id("paid") && !names_an_id("first_name"));
/// ```
pub fn names_an_id(key: &str) -> bool {
    // The last word as `key_words` splits it, found without allocating: a compile asks this
    // of every top-level key of every JSON tool output.
    let (mut start, mut end) = (0, 0);
    let (mut in_word, mut prev_lower) = (false, false);
    for (i, c) in key.char_indices() {
        if !c.is_alphanumeric() {
            (in_word, prev_lower) = (false, false);
            continue;
        }
        if !in_word || (c.is_uppercase() && prev_lower) {
            start = i;
        }
        in_word = true;
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        end = i + c.len_utf8();
    }
    let last = &key[start..end];
    ["id", "uuid", "guid"]
        .iter()
        .any(|w| last.eq_ignore_ascii_case(w))
}

/// Last words of key names that identify a record.
const IDENTIFYING_WORDS: [&str; 20] = [
    "id",
    "ids",
    "uuid",
    "guid",
    "key",
    "name",
    "names",
    "title",
    "slug",
    "number",
    "code",
    "sku",
    "asin",
    "isbn",
    "handle",
    "username",
    "login",
    "ref",
    "reference",
    "identifier",
];

/// True when a field identifies a record, by its key name or by its values.
///
/// ```
/// use ctxgc_core::projection::learn::is_identifying;
/// use ctxgc_core::projection::counts::FieldCounts;
/// let unused = FieldCounts { seen: 10, ..Default::default() };
/// assert!(is_identifying("reservations[].reservation_id", &unused));
/// assert!(is_identifying("passengers[].first_name", &unused));
/// assert!(is_identifying("items[].productId", &unused));
/// assert!(!is_identifying("flights[].price", &unused));
/// let ids = FieldCounts { seen: 10, id_like: 10, ..Default::default() };
/// assert!(is_identifying("reservations[]", &ids));
/// ```
pub fn is_identifying(path: &str, counts: &FieldCounts) -> bool {
    let by_name = last_key(path).is_some_and(|k| {
        key_words(k)
            .last()
            .is_some_and(|w| IDENTIFYING_WORDS.contains(&w.as_str()))
    });
    let by_value = counts.seen > 0 && counts.id_like * 10 >= counts.seen * 9;
    by_name || by_value
}

impl Projection {
    /// An empty projection (every tool's outputs re-serialised, nothing dropped).
    pub fn empty(tokenizer: Tokenizer) -> Projection {
        Projection {
            ctxgc_projection: PROJECTION_FORMAT,
            tokenizer,
            learned_from: LearnedFrom::default(),
            rules: LearnOptions::default(),
            tools: BTreeMap::new(),
        }
    }

    /// Learns a projection from counts.
    pub fn learn(counts: &Counts, options: &LearnOptions, tokenizer: Tokenizer) -> Projection {
        Projection::learn_tools(counts, options, tokenizer, |_| true)
    }

    /// Learns the projection of the tools `wanted` selects only.
    pub fn learn_tools(
        counts: &Counts,
        options: &LearnOptions,
        tokenizer: Tokenizer,
        wanted: impl Fn(&str) -> bool,
    ) -> Projection {
        let mut p = Projection::empty(tokenizer);
        p.rules = options.clone();
        p.learned_from = LearnedFrom {
            runs: counts.runs,
            runs_with_answer: counts.runs_with_answer,
            calls: counts.tools.values().map(|t| t.calls).sum(),
        };
        for (name, tool) in &counts.tools {
            if wanted(name) {
                p.tools.insert(name.clone(), learn_tool(tool, options));
            }
        }
        p
    }

    /// Reads a projection file, checking what a person may have got wrong.
    pub fn from_json(text: &str) -> Result<Projection, ProjectionError> {
        let p: Projection = serde_json::from_str(text).map_err(|e| ProjectionError::Json {
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        if p.ctxgc_projection != PROJECTION_FORMAT {
            return Err(ProjectionError::Version(p.ctxgc_projection));
        }
        for (tool, t) in &p.tools {
            for (list, entries) in [("keep", &t.keep), ("drop", &t.drop)] {
                for (index, d) in entries.iter().enumerate() {
                    let wrong = if d.field.trim().is_empty() {
                        Some("the field path is empty")
                    } else if list == "drop"
                        && d.reason == FieldReason::Echoed
                        && d.of.as_deref().is_none_or(|of| of.trim().is_empty())
                    {
                        // Without it the field would be hidden unchecked, values and all.
                        Some("an echoed field names the field that shows its values in \"of\"")
                    } else {
                        None
                    };
                    if let Some(message) = wrong {
                        return Err(ProjectionError::Field {
                            tool: tool.clone(),
                            list,
                            index,
                            message: message.into(),
                        });
                    }
                }
            }
        }
        Ok(p)
    }

    /// The projection as reviewable, pretty-printed JSON.
    pub fn to_json(&self) -> String {
        // Serialising plain data with string keys cannot fail.
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// The fields dropped for `tool` (a field also listed under `keep` is kept), each with
    /// whether it drops only values: a learned decision was made on the values seen there
    /// (scalars, empty lists), so it never removes a list or object that holds fields; a
    /// field a person put in `drop` goes whatever it holds. `None` when the tool is unknown
    /// or not trimmed.
    pub fn dropped(&self, tool: &str) -> Option<BTreeMap<&str, bool>> {
        let t = self.tools.get(tool).filter(|t| t.trim)?;
        let keep: BTreeSet<&str> = t.keep.iter().map(|d| d.field.as_str()).collect();
        Some(
            t.drop
                .iter()
                .filter(|d| !keep.contains(d.field.as_str()))
                .map(|d| {
                    let values_only = matches!(
                        d.reason,
                        FieldReason::NeverUsed | FieldReason::RarelyUsed | FieldReason::Echoed
                    );
                    (d.field.as_str(), values_only)
                })
                .collect(),
        )
    }

    /// The fields of `tool` dropped as echoes, each with the field that shows its values
    /// (see [`FieldDecision::of`]); a field also listed under `keep` is kept.
    pub fn echoes(&self, tool: &str) -> Vec<(&str, &str)> {
        let Some(t) = self.tools.get(tool).filter(|t| t.trim) else {
            return Vec::new();
        };
        t.drop
            .iter()
            .filter(|d| d.reason == FieldReason::Echoed)
            .filter(|d| !t.keep.iter().any(|k| k.field == d.field))
            .filter_map(|d| Some((d.field.as_str(), d.of.as_deref()?)))
            .collect()
    }
}

/// Moves kept fields that echoed a kept field in every call they were seen in to `drop`
/// (reason [`FieldReason::Echoed`]). The field echoed must be kept for another reason than
/// being an echo target: one dropped as unused would take the values with it.
fn drop_echoes(
    tool: &ToolCounts,
    options: &LearnOptions,
    keep: &mut Vec<FieldDecision>,
    drop: &mut Vec<FieldDecision>,
) {
    let dropped: BTreeSet<String> = drop.iter().map(|d| d.field.clone()).collect();
    let mut echoes = Vec::new();
    keep.retain(|d| {
        let judged = matches!(d.reason, FieldReason::Used | FieldReason::Identifying);
        let Some(f) = tool.fields.get(&d.field).filter(|_| judged) else {
            return true;
        };
        if f.seen < options.min_calls || f.runs_seen < options.min_runs {
            return true;
        }
        // In path order, so the choice is the same every time.
        let of = f
            .echoed
            .iter()
            .find(|(of, calls)| **calls >= f.seen && !dropped.contains(*of))
            .map(|(of, _)| of.clone());
        match of {
            Some(of) => {
                echoes.push(FieldDecision {
                    reason: FieldReason::Echoed,
                    of: Some(of),
                    ..d.clone()
                });
                false
            }
            None => true,
        }
    });
    drop.extend(echoes);
}

fn learn_tool(tool: &ToolCounts, options: &LearnOptions) -> ToolProjection {
    let mut keep = Vec::new();
    let mut drop = Vec::new();
    let paths: Vec<&String> = tool.fields.keys().collect();
    for (i, (path, f)) in tool.fields.iter().enumerate() {
        // Paths are sorted, so fields under this one (`a.b` under `a`) follow it closely.
        let holds_fields = paths[i + 1..]
            .iter()
            .take_while(|p| p.starts_with(path.as_str()))
            .any(|p| super::fields::is_under(p, path));
        let decision = |reason| FieldDecision {
            field: path.clone(),
            seen: f.seen,
            used: f.used,
            tokens: f.tokens.checked_div(f.seen).unwrap_or(0),
            reason,
            of: None,
        };
        // Under the recall-backed rules an identifying field no run used is judged like any
        // other field; one that some run used is kept whatever the share.
        let hidden_recallably = options.recallable && f.used == 0;
        if options.keep_identifying && !hidden_recallably && is_identifying(path, f) {
            keep.push(decision(FieldReason::Identifying));
        } else if holds_fields {
            keep.push(decision(FieldReason::HoldsFields));
        } else if f.seen < options.min_calls || f.runs_seen < options.min_runs {
            keep.push(decision(FieldReason::TooFewObservations));
        } else if f.used == 0 || (f.used as f64) <= options.max_used_share * f.seen as f64 {
            let reason = if f.used == 0 {
                FieldReason::NeverUsed
            } else {
                FieldReason::RarelyUsed
            };
            if path == OPAQUE_FIELD && !options.drop_whole_text {
                keep.push(decision(FieldReason::WholeOutput));
            } else {
                drop.push(decision(reason));
            }
        } else {
            keep.push(decision(FieldReason::Used));
        }
    }
    if options.recallable {
        drop_echoes(tool, options, &mut keep, &mut drop);
    }
    // Biggest savings first, for the reviewer.
    drop.sort_by(|a, b| {
        (b.tokens * b.seen)
            .cmp(&(a.tokens * a.seen))
            .then_with(|| a.field.cmp(&b.field))
    });
    ToolProjection {
        trim: true,
        calls: tool.calls,
        runs: tool.runs,
        keep,
        drop,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_an_id_reads_the_last_word_as_key_words_does() {
        for key in [
            "id",
            "ID",
            "userID",
            "user_id",
            "orderId",
            "order-id",
            "paid",
            "idea",
            "uuid",
            "request_guid",
            "Id_",
            "__id__",
            "",
            "_",
            "id2",
            "Ölid",
            "naïve_id",
            "IDs",
        ] {
            let expected = key_words(key)
                .last()
                .is_some_and(|w| matches!(w.as_str(), "id" | "uuid" | "guid"));
            assert_eq!(names_an_id(key), expected, "{key:?}");
        }
    }

    #[test]
    fn key_words_split_every_style() {
        assert_eq!(key_words("flightNumber"), ["flight", "number"]);
        assert_eq!(key_words("first_name"), ["first", "name"]);
        assert_eq!(key_words("ID"), ["id"]);
        assert_eq!(key_words("userID"), ["user", "id"]);
        assert_eq!(key_words("zip-code"), ["zip", "code"]);
    }

    #[test]
    fn reviewed_files_are_read_leniently_and_checked() {
        let p = Projection::from_json(
            r#"{"ctxgc_projection": 1, "tools": {"t": {"drop": [{"field": "a"}], "keep": [{"field": "a"}, {"field": "b"}]}}}"#,
        )
        .unwrap();
        assert!(p.dropped("t").unwrap().is_empty(), "keep wins over drop");
        let p = Projection::from_json(
            r#"{"ctxgc_projection": 1, "tools": {"t": {"drop": [{"field": "a"}, {"field": "b", "reason": "never_used"}]}}}"#,
        )
        .unwrap();
        assert_eq!(
            p.dropped("t").unwrap().into_iter().collect::<Vec<_>>(),
            [("a", false), ("b", true)]
        );
        let err = Projection::from_json(r#"{"ctxgc_projection": 2, "tools": {}}"#).unwrap_err();
        assert!(err.to_string().contains("version 2"));
        let err = Projection::from_json(
            r#"{"ctxgc_projection": 1, "tools": {"t": {"drop": [{"field": " "}]}}}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("drop[0]"), "{err}");
        let err = Projection::from_json(
            r#"{"ctxgc_projection": 1, "tools": {"t": {"drop": [{"field": "a"}, {"field": "origin", "reason": "echoed"}]}}}"#,
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"projection: tool "t": drop[1]: an echoed field names the field that shows its values in "of""#
        );
        let err = Projection::from_json("{").unwrap_err();
        assert!(err.to_string().contains("line 1"), "{err}");
    }
}
