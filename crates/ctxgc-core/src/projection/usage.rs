//! Which fields of each tool output an agent visibly used in a run.
//!
//! A field is *used* in a call when one of its values, of meaningful length, reappears
//! later in what the agent wrote: the arguments of a tool call of a later model turn, or an
//! agent message of a later turn (its answer included). Values are compared through the
//! normalisers of [`super::words`] (case, accents, whitespace, number formats, dates,
//! times), anywhere inside the later text (a value inside a longer string), and lists of
//! scalars also match when written out as one text (`red, blue and green`).
//!
//! Two rules keep accidental matches out:
//! - a value must be specific (see [`super::words::is_meaningful`]): short numbers and
//!   common words never count;
//! - a value the agent already had before the output arrived (in a user turn, in its own
//!   earlier text or call arguments, the arguments of this very call included) is no
//!   evidence that it read the output: the agent could have written it without. The system
//!   prompt is a policy, not a source of values, and does not count as already known. This
//!   rule can be switched off ([`UsageOptions::discount_known_values`]).
//!
//! Calls of the same model turn never use each other's outputs: their arguments were written
//! before any of those outputs existed.
//!
//! ```
//! use ctxgc_core::projection::{Run, usage::{detect_usage, UsageOptions}};
//! use serde_json::json;
//! let mut run = Run::new("r");
//! run.push_call("get_user", json!({"id": "u1"}), r#"{"email": "mia@example.com", "zip": "78750"}"#, None);
//! run.push_message("I will write to MIA@example.com.", None);
//! let usage = detect_usage(&run, &UsageOptions::default());
//! assert!(usage[0].used.contains("email"));
//! assert!(!usage[0].used.contains("zip"));
//! ```

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::fields::{self, Leaf, Node, OPAQUE_FIELD, Output};
use super::trace::{Author, Run};
use super::words::{for_each_word, is_meaningful};

/// How usage is detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct UsageOptions {
    /// A value that appeared in the conversation (user turns, the agent's earlier text and
    /// arguments) before the output arrived is no evidence that the output was read.
    pub discount_known_values: bool,
}

impl Default for UsageOptions {
    fn default() -> Self {
        UsageOptions {
            discount_known_values: true,
        }
    }
}

/// The fields of one call's output that the agent used.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallUsage {
    /// Generalised paths of used fields ([`OPAQUE_FIELD`] for a non-JSON output).
    pub used: BTreeSet<String>,
}

/// Words that only join items of a list; dropped on both sides so that `a, b and c` reads
/// as the list `[a, b, c]`.
const JOINERS: [&str; 3] = ["and", "or", "und"];

/// One stretch of text of the run, as positions in the word stream.
#[derive(Debug, Clone, Copy)]
struct Segment {
    start: u32,
    end: u32,
    order: u64,
    turn: i64,
    author: Author,
}

/// The run's texts and call arguments as one stream of interned words, indexed.
struct Haystack {
    vocab: HashMap<String, u32>,
    stream: Vec<u32>,
    segments: Vec<Segment>,
    postings: HashMap<u32, Vec<u32>>,
}

impl Haystack {
    fn build(run: &Run) -> Haystack {
        let mut h = Haystack {
            vocab: HashMap::new(),
            stream: Vec::new(),
            segments: Vec::new(),
            postings: HashMap::new(),
        };
        for t in &run.texts {
            h.add_segment(&t.text, t.order, t.turn, t.author);
        }
        for c in &run.calls {
            let mut values = Vec::new();
            scalar_texts(&c.arguments, &mut values);
            for v in values {
                h.add_segment(&v, c.order, c.turn, Author::Agent);
            }
        }
        for (pos, &w) in h.stream.iter().enumerate() {
            h.postings.entry(w).or_default().push(pos as u32);
        }
        h
    }

    fn intern(&mut self, word: String) -> u32 {
        let next = self.vocab.len() as u32;
        *self.vocab.entry(word).or_insert(next)
    }

    fn add_segment(&mut self, text: &str, order: u64, turn: i64, author: Author) {
        let start = self.stream.len() as u32;
        let mut words = Vec::new();
        for_each_word(text, &mut |w| {
            if !JOINERS.contains(&w.as_str()) {
                words.push(w)
            }
        });
        for w in words {
            let id = self.intern(w);
            self.stream.push(id);
        }
        let end = self.stream.len() as u32;
        if end > start {
            self.segments.push(Segment {
                start,
                end,
                order,
                turn,
                author,
            });
        }
    }

    fn segment_of(&self, pos: u32) -> Option<&Segment> {
        // Segments are appended in stream order: binary search on their starts.
        let i = self.segments.partition_point(|s| s.start <= pos);
        self.segments.get(i.checked_sub(1)?).filter(|s| pos < s.end)
    }

    /// Every segment in which `needle` occurs whole.
    fn occurrences(&self, needle: &[u32], mut found: impl FnMut(&Segment) -> bool) {
        // Look up the rarest word, then check the rest around it.
        let Some((offset, postings)) = needle
            .iter()
            .enumerate()
            .map(|(i, w)| (i, self.postings.get(w).map_or(&[][..], Vec::as_slice)))
            .min_by_key(|(_, p)| p.len())
        else {
            return;
        };
        let len = needle.len() as u32;
        for &p in postings {
            let Some(start) = p.checked_sub(offset as u32) else {
                continue;
            };
            let Some(seg) = self.segment_of(start) else {
                continue;
            };
            if start + len > seg.end {
                continue;
            }
            if self.stream[start as usize..(start + len) as usize] == *needle && found(seg) {
                return;
            }
        }
    }
}

/// Texts of every scalar inside a JSON value (each string, number, boolean), in order.
pub fn scalar_texts(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => map.values().for_each(|v| scalar_texts(v, out)),
        Value::Array(items) => items.iter().for_each(|v| scalar_texts(v, out)),
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Bool(_) | Value::Null => {}
    }
}

/// Texts longer than this many words are matched by overlapping windows (quoted in part).
const WHOLE_VALUE_WORDS: usize = 8;
/// Window length, in words, for long texts.
const WINDOW: usize = 5;
/// At most this many windows are tried per value.
const MAX_WINDOWS: usize = 400;

/// The word sequences that show a value reappearing.
fn needles_of_text(text: &str, out: &mut Vec<Vec<String>>) {
    let mut words = Vec::new();
    for_each_word(text, &mut |w| {
        if !JOINERS.contains(&w.as_str()) {
            words.push(w)
        }
    });
    if words.is_empty() {
        return;
    }
    if words.len() <= WHOLE_VALUE_WORDS {
        if words.iter().any(|w| is_meaningful(w)) {
            // A date with a time also counts when only its date reappears; a date with a
            // year also when written without one.
            if words.len() == 2 && words[0].starts_with("date:") && words[1].starts_with("time:") {
                out.push(vec![words[0].clone()]);
                out.push(vec![month_day(&words[0])]);
            } else if words.len() == 1 && words[0].starts_with("date:") {
                out.push(vec![month_day(&words[0])]);
            }
            out.push(words);
        }
        return;
    }
    // A long text: any window of it quoted, or any identifier-like word of it.
    for window in words.windows(WINDOW).take(MAX_WINDOWS) {
        if window.iter().filter(|w| is_meaningful(w)).count() >= 2 {
            out.push(window.to_vec());
        }
    }
    let mut distinct = BTreeSet::new();
    for w in &words {
        if is_distinctive(w) && distinct.insert(w.clone()) {
            out.push(vec![w.clone()]);
        }
    }
}

/// `date:2024-05-20` → `md:05-20`.
fn month_day(date: &str) -> String {
    format!("md:{}", date.get(10..).unwrap_or_default())
}

/// A word that names one thing: an identifier with letters and digits or underscores, a
/// long number, a date.
fn is_distinctive(word: &str) -> bool {
    if word.starts_with("date:") {
        return true;
    }
    let letters = word.chars().any(char::is_alphabetic);
    let digits = word.chars().filter(char::is_ascii_digit).count();
    (letters && (digits > 0 || word.contains('_')) && word.chars().count() >= 5)
        || (!letters && digits >= 5)
}

fn needles_of_leaf(leaf: &Leaf<'_>, out: &mut Vec<Vec<String>>) {
    match leaf.value {
        Some(Value::String(s)) => needles_of_text(s, out),
        Some(Value::Number(n)) => needles_of_text(&n.to_string(), out),
        _ => {}
    }
}

/// Detects, for every call of a run, which fields of its output the agent used.
/// Calls without an output get an empty usage.
pub fn detect_usage(run: &Run, options: &UsageOptions) -> Vec<CallUsage> {
    let haystack = Haystack::build(run);
    let mut result = vec![CallUsage::default(); run.calls.len()];
    for (index, call) in run.calls.iter().enumerate() {
        let Some(raw) = &call.output else {
            continue;
        };
        let parsed = fields::parse_output(raw);
        let used = &mut result[index].used;
        let check = |needle_words: &[String]| -> bool {
            let Some(needle) = needle_words
                .iter()
                .map(|w| haystack.vocab.get(w).copied())
                .collect::<Option<Vec<u32>>>()
            else {
                return false;
            };
            let (mut evidence, mut known) = (false, false);
            haystack.occurrences(&needle, |seg| {
                if seg.order < call.output_order {
                    if options.discount_known_values && seg.author != Author::Prompt {
                        known = true;
                    }
                } else if seg.author == Author::Agent && seg.turn > call.turn {
                    evidence = true;
                }
                known
            });
            evidence && !known
        };
        match &parsed {
            Output::Opaque(text) => {
                let mut needles = Vec::new();
                needles_of_text(text, &mut needles);
                if needles.iter().any(|n| check(n)) {
                    used.insert(OPAQUE_FIELD.to_owned());
                }
            }
            Output::Structured(_) => {
                let mut needles = Vec::new();
                for leaf in fields::leaves(&parsed) {
                    if used.contains(&leaf.path) {
                        continue;
                    }
                    needles.clear();
                    needles_of_leaf(&leaf, &mut needles);
                    if needles.iter().any(|n| check(n)) {
                        used.insert(leaf.path);
                    }
                }
                for list in fields::scalar_lists(&parsed) {
                    if used.contains(&list.path) {
                        continue;
                    }
                    let joined: Vec<String> = list
                        .items
                        .iter()
                        .map(|v| match v {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        })
                        .collect();
                    let mut words = Vec::new();
                    for_each_word(&joined.join(" "), &mut |w| {
                        if !JOINERS.contains(&w.as_str()) {
                            words.push(w)
                        }
                    });
                    let meaningful = words.len() >= 3 || words.iter().any(|w| is_meaningful(w));
                    if meaningful && check(&words) {
                        used.insert(list.path);
                    }
                }
            }
        }
    }
    for expansion in &run.expansions {
        let Some(call) = run.calls.get(expansion.call) else {
            continue;
        };
        let Some(raw) = &call.output else {
            continue;
        };
        let parsed = fields::parse_output(raw);
        let used = &mut result[expansion.call].used;
        match &parsed {
            Output::Opaque(_) => {
                used.insert(OPAQUE_FIELD.to_owned());
            }
            Output::Structured(_) => {
                for leaf in fields::leaves(&parsed) {
                    if expansion.fields.iter().any(|f| {
                        f == "*"
                            || fields::is_under(&leaf.path, f)
                            || fields::is_under(&leaf.concrete, f)
                    }) {
                        used.insert(leaf.path);
                    }
                }
            }
        }
    }
    result
}

/// True when every value of a leaf looks like an identifier (no spaces, letters and
/// digits, not a date).
pub fn is_id_like(node: &Node) -> bool {
    let Node::Scalar(Value::String(s)) = node else {
        return false;
    };
    let s = s.trim();
    let len = s.chars().count();
    if !(4..=64).contains(&len) || s.contains(char::is_whitespace) || s.contains("://") {
        return false;
    }
    let letters = s.chars().any(char::is_alphabetic);
    let digits = s.chars().any(|c| c.is_ascii_digit());
    // A long run of digits written as a string is a number that names something (an
    // account, a product), not a quantity.
    if !letters && len >= 6 && s.chars().all(|c| c.is_ascii_digit()) {
        return true;
    }
    if !(letters && digits) {
        return false;
    }
    // Dates and times have letters (T, Z) and digits but name no record.
    let mut words = Vec::new();
    for_each_word(s, &mut |w| words.push(w));
    !words
        .iter()
        .any(|w| w.starts_with("date:") || w.starts_with("time:") || w.starts_with("md:"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn used_after(output: &str, later: &str) -> BTreeSet<String> {
        let mut run = Run::new("r");
        run.push_call("t", json!({}), output, None);
        run.push_message(later, None);
        detect_usage(&run, &UsageOptions::default()).remove(0).used
    }

    #[test]
    fn windows_of_long_text_and_identifiers_count() {
        let text = "The quick brown fox jumps over the lazy dog near the riverbank in springtime";
        assert!(used_after(text, "as it said: fox jumps over the lazy dog").contains(OPAQUE_FIELD));
        assert!(
            used_after(
                "see ticket ABC_123 for the full story of what happened here today",
                "ABC_123"
            )
            .contains(OPAQUE_FIELD)
        );
        assert!(used_after(text, "a dog").is_empty());
    }

    #[test]
    fn id_like_values() {
        for s in ["HAT069", "credit_card_4421486", "B0BW8Z3N7R", "1808611083"] {
            assert!(is_id_like(&Node::Scalar(json!(s))), "{s}");
        }
        for s in [
            "2024-05-15T15:00:00",
            "hello world 1",
            "7447",
            "78750",
            "economy",
            "https://x.io/a1",
        ] {
            assert!(!is_id_like(&Node::Scalar(json!(s))), "{s}");
        }
    }
}
