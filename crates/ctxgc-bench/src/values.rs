//! Values an agent turn uses, and where they occur.
//!
//! A *value* is a string or number of meaningful length, found in what the agent wrote:
//! - in a tool call's arguments: every string leaf of at least [`MIN_STRING_CHARS`] characters
//!   (the whole string), every number with at least [`MIN_NUMBER_DIGITS`] digits; when a whole
//!   string never appeared before (a shell command, a sentence), its value-like words count
//!   instead;
//! - in an assistant message's text (or a decision's content): its value-like words: a word (a
//!   run of letters, digits and `_ - . @ /`, trimmed of those four at its ends) with a digit and
//!   at least 4 characters or 3 digits (`0U4NPP`, `2024-05-01`, `500`), or with an inner `_`,
//!   `.`, `@` or `/` and at least 5 characters (`test_cache`, `file.py`, `a@b.io`). Plain words
//!   and short numbers are left out: they match by accident.
//!
//! A value *occurs* in a text when it appears there as written (case-sensitive) and not inside
//! a longer word: the characters around the match are not letters or digits.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use serde_json::Value;

/// Shortest string argument counted as a value.
pub const MIN_STRING_CHARS: usize = 4;
/// Fewest digits a number argument needs to count as a value.
pub const MIN_NUMBER_DIGITS: usize = 3;
/// Longest string argument matched whole; longer ones are matched by their words.
pub const MAX_WHOLE_CHARS: usize = 2_000;

/// One use of a value by a turn, before checking that it appeared earlier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Candidate {
    /// A whole string or number argument, with its value-like words as a fallback.
    Whole {
        /// The whole value.
        value: String,
        /// Its value-like words.
        words: Vec<String>,
    },
    /// A value-like word of the text.
    Word(String),
}

fn is_joiner(c: char) -> bool {
    matches!(c, '_' | '-' | '.' | '@' | '/')
}

/// The value-like words of a text, in order, repeats included.
///
/// ```
/// use ctxgc_bench::values::value_words;
/// let words = value_words("Reservation 0U4NPP is on flight HAT123 for $500, see test_cache.");
/// assert_eq!(words, vec!["0U4NPP", "HAT123", "500", "test_cache"]);
/// ```
pub fn value_words(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || is_joiner(c)))
        .map(|w| w.trim_matches(is_joiner))
        .filter(|w| is_value_like(w))
        .collect()
}

fn is_value_like(word: &str) -> bool {
    let chars = word.chars().count();
    let digits = word.chars().filter(|c| c.is_ascii_digit()).count();
    if digits > 0 {
        chars >= 4 || digits >= MIN_NUMBER_DIGITS
    } else {
        chars >= 5 && word.chars().any(is_joiner) && word.chars().any(char::is_alphabetic)
    }
}

/// The candidates of a tool call's arguments, leaf by leaf.
///
/// ```
/// use ctxgc_bench::values::{argument_candidates, Candidate};
/// let args = serde_json::json!({"reservation_id": "0U4NPP", "count": 2, "price": 1250, "ok": true});
/// let c = argument_candidates(&args);
/// assert_eq!(c.len(), 2);
/// assert!(matches!(&c[0], Candidate::Whole { value, .. } if value == "0U4NPP"));
/// assert!(matches!(&c[1], Candidate::Whole { value, .. } if value == "1250"));
/// ```
pub fn argument_candidates(arguments: &Value) -> Vec<Candidate> {
    let mut out = Vec::new();
    collect_leaves(arguments, &mut out);
    out
}

fn collect_leaves(value: &Value, out: &mut Vec<Candidate>) {
    match value {
        Value::String(s) => {
            let s = s.trim();
            let chars = s.chars().count();
            let words: Vec<String> = value_words(s).into_iter().map(str::to_owned).collect();
            if (MIN_STRING_CHARS..=MAX_WHOLE_CHARS).contains(&chars) {
                out.push(Candidate::Whole {
                    value: s.to_owned(),
                    words,
                });
            } else {
                out.extend(words.into_iter().map(Candidate::Word));
            }
        }
        Value::Number(n) => {
            let text = n.to_string();
            if text.chars().filter(|c| c.is_ascii_digit()).count() >= MIN_NUMBER_DIGITS {
                out.push(Candidate::Whole {
                    value: text,
                    words: Vec::new(),
                });
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_leaves(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect_leaves(v, out)),
        Value::Bool(_) | Value::Null => {}
    }
}

/// The candidates of a text the agent wrote.
pub fn text_candidates(text: &str) -> Vec<Candidate> {
    value_words(text)
        .into_iter()
        .map(|w| Candidate::Word(w.to_owned()))
        .collect()
}

/// A fixed vocabulary of values, searched for in many texts at once.
///
/// ```
/// use ctxgc_bench::values::ValueIndex;
/// let index = ValueIndex::new(vec!["HAT123".into(), "500".into()]);
/// assert_eq!(index.scan("flight HAT123 costs 500 (not 1500)"), vec![0, 1]);
/// assert_eq!(index.scan("flight HAT1234 costs 1500"), Vec::<u32>::new());
/// ```
#[derive(Debug, Clone)]
pub struct ValueIndex {
    values: Vec<String>,
    automaton: Option<AhoCorasick>,
}

impl ValueIndex {
    /// An index over these values (ids are positions in the list).
    pub fn new(values: Vec<String>) -> Self {
        let automaton = if values.is_empty() {
            None
        } else {
            // The patterns are plain strings of bounded length; building cannot fail short of
            // exhausting the automaton's state ids, in which case values are simply not found.
            AhoCorasickBuilder::new()
                .match_kind(MatchKind::Standard)
                .build(&values)
                .ok()
        };
        ValueIndex { values, automaton }
    }

    /// The value with this id.
    pub fn value(&self, id: u32) -> &str {
        &self.values[id as usize]
    }

    /// How many values the index holds.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when the index holds no value.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Ids of the values that occur in `text` (not inside a longer word), sorted.
    pub fn scan(&self, text: &str) -> Vec<u32> {
        let Some(automaton) = &self.automaton else {
            return Vec::new();
        };
        let mut found: Vec<u32> = automaton
            .find_overlapping_iter(text)
            .filter(|m| bounded(text, m.start(), m.end()))
            .map(|m| m.pattern().as_u32())
            .collect();
        found.sort_unstable();
        found.dedup();
        found
    }
}

/// True when `needle` occurs in `text` not inside a longer word (the rule [`ValueIndex::scan`]
/// applies).
///
/// ```
/// use ctxgc_bench::values::occurs;
/// assert!(occurs("phase = Phase II\n", "phase = Phase II"));
/// assert!(!occurs("phase = Phase III\n", "phase = Phase II"));
/// assert!(occurs("[a04_retry] call", "a04"));
/// ```
pub fn occurs(text: &str, needle: &str) -> bool {
    !needle.is_empty()
        && text
            .match_indices(needle)
            .any(|(start, m)| bounded(text, start, start + m.len()))
}

/// True when `text[start..end]` is not part of a longer word: a match that begins (ends) with
/// a letter or digit must not have one just before (after) it.
fn bounded(text: &str, start: usize, end: usize) -> bool {
    let inner = &text[start..end];
    let first_alnum = inner.chars().next().is_some_and(char::is_alphanumeric);
    let last_alnum = inner.chars().next_back().is_some_and(char::is_alphanumeric);
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    let glued_before = first_alnum && before.is_some_and(char::is_alphanumeric);
    let glued_after = last_alnum && after.is_some_and(char::is_alphanumeric);
    !glued_before && !glued_after
}
