//! The tracegc fixtures' own probes (recall, artifact, continuation, decision), scored on the
//! context a strategy gives for the whole trace.
//!
//! A fixture holds, beside its `events`, an object `probes` of named probes, each with
//! `contains` and `excludes` lists of strings and, for `artifact`, `recovered: {node_id, key,
//! value}`. How each is computed, the same way for every strategy:
//!
//! - The *haystack* is the text of the context without its receipt stubs
//!   ([`crate::context::Context::visible_text`]). A stub names removed items and says why
//!   (`[receipts a01 a02: inside branch abandoned by ab01]`); it shows the model none of their
//!   content, so it neither satisfies a `contains` nor violates an `excludes` (an `excludes`
//!   entry such as `a03` names an event of a dead branch; a stub that lists `a03` as removed is
//!   the opposite of that event surviving).
//! - `contains`: every string occurs in the haystack; `excludes`: none does. *Occurs* is
//!   tracegc's exact, case-sensitive substring match, with one refinement applied to every
//!   strategy alike: the match must not sit inside a longer word (no letter or digit right
//!   before or after it; [`crate::values::occurs`]). Without it, `excludes: ["phase = Phase
//!   II"]` would be violated by the live line `phase = Phase III`, and `contains: ["10"]`
//!   satisfied by `1010`.
//! - `recovered`: the event `node_id` exists, its field `key` holds `value` (strings compared as
//!   they are, other values as compact JSON), and the model can get it back from this context:
//!   the event's line is in it unchanged, or a receipt stub in it names `node_id` and the
//!   strategy holds its original (so `ctxgc receipt` gives it back byte for byte).
//! - A probe passes when all its parts hold.

use serde::Serialize;
use serde_json::Value;

use crate::context::Context;
use crate::prepare::Prepared;
use crate::values::occurs;

/// The probes of one fixture, in the fixture's order.
#[derive(Debug, Clone, PartialEq)]
pub struct Probes {
    /// `(name, probe)` pairs.
    pub probes: Vec<(String, Probe)>,
}

/// One probe.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// Strings that must be visible.
    pub contains: Vec<String>,
    /// Strings that must not be visible.
    pub excludes: Vec<String>,
    /// An event field that must be recoverable.
    pub recovered: Option<Recovered>,
}

/// `recovered`: the receipt (or the kept line) of `node_id` gives back `key` = `value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Recovered {
    /// The event.
    pub node_id: String,
    /// Its field.
    pub key: String,
    /// The value that field must hold.
    pub value: String,
}

/// How one probe scored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeResult {
    /// The probe's name.
    pub name: String,
    /// True when every part holds.
    pub passed: bool,
    /// True when `contains` and `recovered` hold, whatever `excludes` says (what a benchmark
    /// that checks survival only would score).
    pub passed_without_excludes: bool,
    /// `contains` strings not visible.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// `excludes` strings still visible.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub present: Vec<String>,
    /// Whether the `recovered` part holds (absent when the probe has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovered: Option<bool>,
}

fn string_list(value: Option<&Value>, at: &str) -> Result<Vec<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(n, v)| match v {
                Value::String(s) => Ok(s.clone()),
                _ => Err(format!("{at}[{n}]: expected a string")),
            })
            .collect(),
        Some(_) => Err(format!("{at}: expected a list of strings")),
    }
}

fn required_string(
    map: &serde_json::Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<String, String> {
    match map.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("{at}.{key}: expected a string")),
        None => Err(format!("{at}.{key}: missing")),
    }
}

impl Probes {
    /// Reads `probes` from a fixture document; `Ok(None)` when it has none.
    ///
    /// ```
    /// use ctxgc_bench::probes::Probes;
    /// let doc = r#"{"events": [], "probes": {"recall": {"contains": ["100MB"], "excludes": []}}}"#;
    /// let probes = Probes::from_document(doc).unwrap().unwrap();
    /// assert_eq!(probes.probes[0].0, "recall");
    /// assert!(Probes::from_document(r#"{"events": []}"#).unwrap().is_none());
    /// assert!(Probes::from_document(r#"{"events": [], "probes": {"recall": {"contains": [1]}}}"#)
    ///     .unwrap_err().contains("probes.recall.contains[0]"));
    /// ```
    pub fn from_document(text: &str) -> Result<Option<Probes>, String> {
        let Ok(Value::Object(doc)) = serde_json::from_str::<Value>(text) else {
            return Ok(None);
        };
        let Some(probes) = doc.get("probes") else {
            return Ok(None);
        };
        let Value::Object(map) = probes else {
            return Err("probes: expected an object of named probes".into());
        };
        let mut out = Vec::new();
        for (name, probe) in map {
            let at = format!("probes.{name}");
            let Value::Object(p) = probe else {
                return Err(format!("{at}: expected an object"));
            };
            let recovered = match p.get("recovered") {
                None | Some(Value::Null) => None,
                Some(Value::Object(r)) => {
                    let at = format!("{at}.recovered");
                    Some(Recovered {
                        node_id: required_string(r, "node_id", &at)?,
                        key: required_string(r, "key", &at)?,
                        value: required_string(r, "value", &at)?,
                    })
                }
                Some(_) => return Err(format!("{at}.recovered: expected an object")),
            };
            out.push((
                name.clone(),
                Probe {
                    contains: string_list(p.get("contains"), &format!("{at}.contains"))?,
                    excludes: string_list(p.get("excludes"), &format!("{at}.excludes"))?,
                    recovered,
                },
            ));
        }
        Ok(Some(Probes { probes: out }))
    }
}

/// Scores every probe of `input` on `context` (the strategy's output for the whole trace).
pub fn score(input: &Prepared, probes: &Probes, context: &Context) -> Vec<ProbeResult> {
    let haystack = context.visible_text();
    probes
        .probes
        .iter()
        .map(|(name, probe)| {
            let missing: Vec<String> = probe
                .contains
                .iter()
                .filter(|s| !occurs(&haystack, s))
                .cloned()
                .collect();
            let present: Vec<String> = probe
                .excludes
                .iter()
                .filter(|s| occurs(&haystack, s))
                .cloned()
                .collect();
            let recovered = probe
                .recovered
                .as_ref()
                .map(|r| recovers(input, context, r));
            ProbeResult {
                name: name.clone(),
                passed: missing.is_empty() && present.is_empty() && recovered != Some(false),
                passed_without_excludes: missing.is_empty() && recovered != Some(false),
                missing,
                present,
                recovered,
            }
        })
        .collect()
}

fn recovers(input: &Prepared, context: &Context, r: &Recovered) -> bool {
    let Some(&i) = input.index_of.get(&r.node_id) else {
        return false;
    };
    let holds = match serde_json::from_str::<Value>(&input.conversation.items[i].raw) {
        Ok(Value::Object(event)) => match event.get(&r.key) {
            Some(Value::String(s)) => *s == r.value,
            Some(other) => serde_json::to_string(other).is_ok_and(|text| text == r.value),
            None => false,
        },
        _ => false,
    };
    if !holds {
        return false;
    }
    let line = &input.texts[i];
    context.recoverable.contains(&r.node_id)
        || context
            .segments
            .iter()
            .any(|s| s.kind != crate::context::SegmentKind::Stub && s.text == *line)
}
