//! What the learner knows: per tool and per field, how often it was seen and used, in how
//! many calls and runs, and how many tokens it cost. Counts add up run by run and subtract
//! the same way, so leave-one-out learns once and takes each held-out run's counts away
//! instead of relearning from scratch.
//!
//! ```
//! use ctxgc_core::projection::{Run, counts::observe_run, usage::UsageOptions};
//! use ctxgc_core::Tokenizer;
//! use serde_json::json;
//! let mut run = Run::new("r");
//! run.push_call("get", json!({}), r#"{"id": "A1B2", "note": "x"}"#, None);
//! let seen = observe_run(&run, &UsageOptions::default(), Tokenizer::default());
//! let mut total = seen.counts.clone();
//! total.add(&seen.counts);
//! total.subtract(&seen.counts);
//! assert_eq!(total, seen.counts);
//! assert_eq!(total.tools["get"].fields["note"].seen, 1);
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::fields::{self, OPAQUE_FIELD, Output};
use super::trace::Run;
use super::usage::{CallUsage, UsageOptions, detect_usage, is_id_like};
use crate::tokens::Tokenizer;

/// Counts behind one field's decision.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FieldCounts {
    /// Calls whose output had the field.
    pub seen: u64,
    /// Calls in which the agent used it.
    pub used: u64,
    /// Runs in which it was seen.
    pub runs_seen: u64,
    /// Runs in which it was used.
    pub runs_used: u64,
    /// Calls in which every value of it looked like an identifier.
    pub id_like: u64,
    /// Tokens its keys and values cost, over all calls.
    pub tokens: u64,
    /// Per path `B`: calls in which every value of this field was also in `B` of the same
    /// output (see [`super::echo`]).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub echoed: BTreeMap<String, u64>,
}

/// Counts of one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolCounts {
    /// Calls with an output.
    pub calls: u64,
    /// Runs that called it.
    pub runs: u64,
    /// Calls whose output was an error.
    pub failed: u64,
    /// Calls whose output was a JSON object or list.
    pub structured: u64,
    /// Exact tokens of the outputs as they were.
    pub tokens: u64,
    /// Exact tokens of the outputs re-serialised compactly (as they are for opaque ones).
    pub compact_tokens: u64,
    /// Per field (generalised path).
    pub fields: BTreeMap<String, FieldCounts>,
    /// Failures by message (digits folded to `#`, first line, at most 160 characters).
    pub failures: BTreeMap<String, u64>,
}

/// Counts over a set of runs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Counts {
    /// Runs counted.
    pub runs: u64,
    /// Runs that ended with an agent message (an answer).
    pub runs_with_answer: u64,
    /// Per tool.
    pub tools: BTreeMap<String, ToolCounts>,
}

impl FieldCounts {
    fn add(&mut self, o: &FieldCounts) {
        self.seen += o.seen;
        self.used += o.used;
        self.runs_seen += o.runs_seen;
        self.runs_used += o.runs_used;
        self.id_like += o.id_like;
        self.tokens += o.tokens;
        for (path, n) in &o.echoed {
            *self.echoed.entry(path.clone()).or_default() += n;
        }
    }
    fn subtract(&mut self, o: &FieldCounts) {
        self.seen = self.seen.saturating_sub(o.seen);
        self.used = self.used.saturating_sub(o.used);
        self.runs_seen = self.runs_seen.saturating_sub(o.runs_seen);
        self.runs_used = self.runs_used.saturating_sub(o.runs_used);
        self.id_like = self.id_like.saturating_sub(o.id_like);
        self.tokens = self.tokens.saturating_sub(o.tokens);
        for (path, n) in &o.echoed {
            if let Some(mine) = self.echoed.get_mut(path) {
                *mine = mine.saturating_sub(*n);
                if *mine == 0 {
                    self.echoed.remove(path);
                }
            }
        }
    }
}

impl ToolCounts {
    fn add(&mut self, o: &ToolCounts) {
        self.calls += o.calls;
        self.runs += o.runs;
        self.failed += o.failed;
        self.structured += o.structured;
        self.tokens += o.tokens;
        self.compact_tokens += o.compact_tokens;
        for (k, f) in &o.fields {
            self.fields.entry(k.clone()).or_default().add(f);
        }
        for (k, n) in &o.failures {
            *self.failures.entry(k.clone()).or_default() += n;
        }
    }
    fn subtract(&mut self, o: &ToolCounts) {
        self.calls = self.calls.saturating_sub(o.calls);
        self.runs = self.runs.saturating_sub(o.runs);
        self.failed = self.failed.saturating_sub(o.failed);
        self.structured = self.structured.saturating_sub(o.structured);
        self.tokens = self.tokens.saturating_sub(o.tokens);
        self.compact_tokens = self.compact_tokens.saturating_sub(o.compact_tokens);
        for (k, f) in &o.fields {
            if let Some(mine) = self.fields.get_mut(k) {
                mine.subtract(f);
                if mine.seen == 0 {
                    self.fields.remove(k);
                }
            }
        }
        for (k, n) in &o.failures {
            if let Some(mine) = self.failures.get_mut(k) {
                *mine = mine.saturating_sub(*n);
                if *mine == 0 {
                    self.failures.remove(k);
                }
            }
        }
    }
}

impl Counts {
    /// Adds another set of counts to these.
    pub fn add(&mut self, o: &Counts) {
        self.runs += o.runs;
        self.runs_with_answer += o.runs_with_answer;
        for (k, t) in &o.tools {
            self.tools.entry(k.clone()).or_default().add(t);
        }
    }

    /// Takes counts added earlier away again (saturating; tools and fields left with nothing
    /// disappear).
    pub fn subtract(&mut self, o: &Counts) {
        self.runs = self.runs.saturating_sub(o.runs);
        self.runs_with_answer = self.runs_with_answer.saturating_sub(o.runs_with_answer);
        for (k, t) in &o.tools {
            if let Some(mine) = self.tools.get_mut(k) {
                mine.subtract(t);
                if mine.calls == 0 {
                    self.tools.remove(k);
                }
            }
        }
    }

    /// These counts without `o`'s (a copy).
    pub fn without(&self, o: &Counts) -> Counts {
        let mut c = self.clone();
        c.subtract(o);
        c
    }

    /// The sum of many counts.
    pub fn sum<'a>(all: impl IntoIterator<Item = &'a Counts>) -> Counts {
        let mut c = Counts::default();
        for o in all {
            c.add(o);
        }
        c
    }
}

/// One call of an observed run, measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObservedCall {
    /// Index in [`Run::calls`].
    pub index: usize,
    /// Exact tokens of the raw output.
    pub tokens: u64,
    /// Exact tokens after compact re-serialisation alone.
    pub compact_tokens: u64,
    /// The output was an error.
    pub failed: bool,
    /// Fields the agent used.
    pub usage: CallUsage,
}

/// A run observed: its counts and what was measured per call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observed {
    /// This run's counts alone.
    pub counts: Counts,
    /// One entry per call with an output.
    pub calls: Vec<ObservedCall>,
}

/// True when a tool output is an error: flagged by the provider, text starting with
/// `Error`, or a JSON object whose `error`/`errors` field is set while nothing else is.
pub fn is_failure(output: &str, flagged: bool) -> bool {
    if flagged {
        return true;
    }
    let t = output.trim_start();
    if t.get(..5)
        .is_some_and(|head| head.eq_ignore_ascii_case("error"))
    {
        return true;
    }
    if t.starts_with('{')
        && let Ok(Value::Object(map)) = serde_json::from_str::<Value>(t)
    {
        let set = |v: &Value| match v {
            Value::String(s) => !s.trim().is_empty(),
            Value::Bool(b) => *b,
            Value::Null => false,
            Value::Array(a) => !a.is_empty(),
            Value::Object(o) => !o.is_empty(),
            Value::Number(_) => true,
        };
        let error = ["error", "errors"]
            .iter()
            .any(|k| map.get(*k).is_some_and(set));
        let other = map
            .iter()
            .any(|(k, v)| k != "error" && k != "errors" && set(v));
        return error && !other;
    }
    false
}

/// A failure message grouped with its like: first line, digits as `#`, 160 characters.
pub fn failure_key(output: &str) -> String {
    let line = output.trim().lines().next().unwrap_or_default();
    let mut key = String::new();
    let mut last_hash = false;
    for c in line.chars() {
        if c.is_ascii_digit() {
            if !last_hash {
                key.push('#');
            }
            last_hash = true;
        } else {
            key.push(c);
            last_hash = false;
        }
        if key.chars().count() >= 160 {
            key.push('…');
            break;
        }
    }
    key
}

/// Compact re-serialisation of an output (JSON objects and lists; anything else as it is).
pub fn compact_output(parsed: &Output, raw: &str) -> String {
    match parsed {
        Output::Structured(node) => fields::compact(node),
        Output::Opaque(_) => raw.to_owned(),
    }
}

/// Observes one run: detects usage and counts every tool and field.
pub fn observe_run(run: &Run, usage: &UsageOptions, tokenizer: Tokenizer) -> Observed {
    let usages = detect_usage(run, usage);
    observe_with_usage(run, usages, tokenizer)
}

/// Observes one run whose usage is already known.
pub fn observe_with_usage(run: &Run, usages: Vec<CallUsage>, tokenizer: Tokenizer) -> Observed {
    let mut counts = Counts {
        runs: 1,
        runs_with_answer: u64::from(run.answer().is_some()),
        tools: BTreeMap::new(),
    };
    let mut calls = Vec::new();
    let mut tool_seen: BTreeSet<&str> = BTreeSet::new();
    let mut field_seen: BTreeSet<(String, String)> = BTreeSet::new();
    let mut field_used: BTreeSet<(String, String)> = BTreeSet::new();
    for ((index, call), usage) in run.calls.iter().enumerate().zip(usages) {
        let Some(raw) = &call.output else {
            continue;
        };
        let parsed = fields::parse_output(raw);
        let failed = is_failure(raw, call.is_error);
        let tokens = tokenizer.count(raw) as u64;
        let compact_tokens = match &parsed {
            Output::Structured(_) => tokenizer.count(&compact_output(&parsed, raw)) as u64,
            Output::Opaque(_) => tokens,
        };
        let tool = counts.tools.entry(call.tool.clone()).or_default();
        tool.calls += 1;
        tool.tokens += tokens;
        tool.compact_tokens += compact_tokens;
        if tool_seen.insert(&call.tool) {
            tool.runs += 1;
        }
        if failed {
            tool.failed += 1;
            *tool.failures.entry(failure_key(raw)).or_default() += 1;
        }
        // Per field, within this call: tokens, and whether every value looked like an id.
        let mut per_field: BTreeMap<String, (u64, bool)> = BTreeMap::new();
        let echoes = super::echo::echoes(&parsed);
        match &parsed {
            Output::Structured(_) => {
                tool.structured += 1;
                for leaf in fields::leaves(&parsed) {
                    let piece = match (leaf.key, leaf.value) {
                        (Some(k), Some(v)) => format!("{}:{}", Value::String(k.into()), v),
                        (None, Some(v)) => v.to_string(),
                        (Some(k), None) => {
                            format!("{}:{}", Value::String(k.into()), fields::compact(leaf.node))
                        }
                        (None, None) => fields::compact(leaf.node),
                    };
                    let entry = per_field.entry(leaf.path.clone()).or_insert((0, true));
                    entry.0 += tokenizer.count(&piece) as u64;
                    entry.1 &= is_id_like(leaf.node);
                }
            }
            Output::Opaque(_) => {
                per_field.insert(OPAQUE_FIELD.to_owned(), (tokens, false));
            }
        }
        for (path, (field_tokens, id_like)) in per_field {
            let used = usage.used.contains(&path);
            let f = tool.fields.entry(path.clone()).or_default();
            f.seen += 1;
            f.tokens += field_tokens;
            f.id_like += u64::from(id_like);
            f.used += u64::from(used);
            for echoed in echoes.get(&path).into_iter().flatten() {
                *f.echoed.entry(echoed.clone()).or_default() += 1;
            }
            let key = (call.tool.clone(), path);
            if used && field_used.insert(key.clone()) {
                f.runs_used += 1;
            }
            if field_seen.insert(key) {
                f.runs_seen += 1;
            }
        }
        calls.push(ObservedCall {
            index,
            tokens,
            compact_tokens,
            failed,
            usage,
        });
    }
    Observed { counts, calls }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_recognised_and_grouped() {
        assert!(is_failure("Error: payment amount does not add up", false));
        assert!(is_failure(
            r#"{"error": "No such function", "response": ""}"#,
            false
        ));
        assert!(!is_failure(r#"{"error": "", "response": "[1]"}"#, false));
        assert!(!is_failure(
            r#"{"error": "partial", "response": "[1]"}"#,
            false
        ));
        assert!(is_failure("anything", true));
        assert!(!is_failure("᤬㨉ᓺ㜽 not ascii", false));
        assert_eq!(
            failure_key("Error: total is 305, paid 255\nmore"),
            "Error: total is #, paid #"
        );
    }
}
