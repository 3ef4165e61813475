//! Echoes: fields whose values another part of the same output already shows.
//!
//! Tool outputs often say a thing twice. A reservation names its trip's `origin` and also
//! lists its `flights[].origin`; a wallet keyed by payment id repeats the key inside each
//! entry (`"credit_card_7": {"id": "credit_card_7", ...}`). Hiding the repeat loses no value:
//! every value the agent could quote is still in the text. A field `A` *echoes* `B` in one
//! output when every value of `A` there is a distinctive scalar (a string of three characters
//! or more, or a number written with three or more) and is also found
//!
//! - **as its entry's key**: `A` sits directly in an entry of an object keyed by data
//!   (`payment_methods{}.id`) and each of its values is the key of its own entry; `B` is then
//!   the entry's path (`payment_methods{}`); or
//! - **in a list below it**: `A` occurs once per output (no list or keyed entry above it)
//!   and `B` is a field under the same parent object that lies inside a list or a keyed entry
//!   (`origin` and `flights[].origin`), holding each of `A`'s values somewhere. A field is
//!   never an echo of a sibling in the same record (`flights[].origin` of
//!   `flights[].destination`, as in a round trip): that would hide which leg goes where.
//!
//! The learner counts, per field, the calls in which it echoed each `B`
//! ([`FieldCounts::echoed`](super::counts::FieldCounts)); under the recall-backed rules a
//! field that echoed a kept field in every call it was seen in is hidden, and when the
//! projection is applied the echo is checked again on each output: a field is hidden only in
//! outputs where it echoes, so no value ever leaves the text this way.
//!
//! ```
//! use ctxgc_core::projection::{echo::echoes, fields::parse_output};
//! let out = parse_output(r#"{"origin": "MIA", "flights": [{"origin": "MIA", "destination": "LAX"},
//!     {"origin": "LAX", "destination": "MIA"}], "methods": {"card_7": {"id": "card_7"}}}"#);
//! let found = echoes(&out);
//! assert!(found["origin"].contains("flights[].origin"));
//! assert!(found["methods{}.id"].contains("methods{}"));
//! // Legs of one trip are records of their own: never echoes of each other.
//! assert!(!found.contains_key("flights[].origin"));
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::fields::{Node, Output, Segment, is_keyed_by_data, is_under, push_general};

/// A value as echoes compare it: strings with strings, numbers with numbers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Echoable<'a> {
    Text(&'a str),
    Number(String),
}

/// A distinctive scalar, or `None` (short strings, small numbers, booleans and nulls repeat
/// by chance, so they never make an echo).
fn echoable(value: &Value) -> Option<Echoable<'_>> {
    match value {
        Value::String(s) if s.chars().nth(2).is_some() => Some(Echoable::Text(s)),
        Value::Number(n) => {
            let text = n.to_string();
            (text.len() >= 3).then_some(Echoable::Number(text))
        }
        _ => None,
    }
}

/// What one output holds at one generalised path.
#[derive(Default)]
struct AtPath<'a> {
    /// Every value there, `None` for one that cannot echo.
    values: Vec<Option<Echoable<'a>>>,
    /// Whether every value there sits directly in a keyed entry and equals that entry's key.
    repeats_own_key: bool,
    /// The path of the object the field sits in, when it occurs once per output (no list or
    /// keyed entry above it).
    single_parent: Option<String>,
    /// The path of the keyed entry the field sits directly in.
    entry: Option<String>,
}

struct Walk<'a> {
    at: BTreeMap<String, AtPath<'a>>,
}

impl<'a> Walk<'a> {
    /// `in_list`: a list or keyed entry lies above. `entry`: the path and key of the entry
    /// whose object `node` is, when `node` is directly an entry's value.
    fn go(
        &mut self,
        node: &'a Node,
        path: &mut String,
        in_list: bool,
        entry: Option<(&str, &str)>,
    ) {
        match node {
            Node::Object(fields) => {
                let keyed = is_keyed_by_data(fields);
                for (k, v) in fields {
                    let len = path.len();
                    let segment = Segment::field(k, keyed);
                    push_general(path, &segment);
                    if keyed {
                        let entry_path = path.clone();
                        self.go(v, path, true, Some((&entry_path, k)));
                    } else if let Node::Scalar(value) = v {
                        let parent = &path[..len];
                        let at = self.at.entry(path.clone()).or_insert_with(|| AtPath {
                            repeats_own_key: true,
                            single_parent: (!in_list).then(|| parent.to_owned()),
                            entry: entry.map(|(p, _)| p.to_owned()),
                            ..AtPath::default()
                        });
                        at.values.push(echoable(value));
                        at.repeats_own_key &=
                            entry.is_some_and(|(_, key)| value.as_str() == Some(key));
                        if in_list {
                            at.single_parent = None;
                        }
                    } else {
                        self.go(v, path, in_list, None);
                    }
                    path.truncate(len);
                }
            }
            Node::Array(items) => {
                let len = path.len();
                push_general(path, &Segment::Item(0));
                for item in items {
                    match item {
                        Node::Scalar(value) => self.push_listed(path, value),
                        other => self.go(other, path, true, None),
                    }
                }
                path.truncate(len);
            }
            Node::Embedded { doc, .. } => {
                let len = path.len();
                push_general(path, &Segment::Doc);
                self.go(doc, path, in_list, None);
                path.truncate(len);
            }
            Node::Scalar(_) => {}
        }
    }

    /// A scalar list item: a value `B` can hold, never an echo itself.
    fn push_listed(&mut self, path: &str, value: &'a Value) {
        let at = self.at.entry(path.to_owned()).or_default();
        at.values.push(echoable(value));
    }
}

/// For each field of `output` that echoes, the paths it echoes (see the module doc).
pub fn echoes(output: &Output) -> BTreeMap<String, BTreeSet<String>> {
    let Output::Structured(node) = output else {
        return BTreeMap::new();
    };
    let mut walk = Walk {
        at: BTreeMap::new(),
    };
    walk.go(node, &mut String::new(), false, None);
    // The fields a summary can echo: those inside a list or keyed entry, with their values.
    let listed: Vec<(&str, BTreeSet<&Echoable>)> = walk
        .at
        .iter()
        .filter(|(_, at)| at.single_parent.is_none())
        .map(|(path, at)| (path.as_str(), at.values.iter().flatten().collect()))
        .collect();
    let mut found: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, at) in &walk.at {
        if at.values.is_empty() || at.values.iter().any(Option::is_none) {
            continue;
        }
        let mut echoed = BTreeSet::new();
        if at.repeats_own_key
            && let Some(entry) = &at.entry
        {
            echoed.insert(entry.clone());
        }
        // A single parent holds no list or entry, so a listed field under it lies in a list
        // below it.
        if let Some(parent) = &at.single_parent {
            for (other, values) in &listed {
                if is_under(other, parent)
                    && at
                        .values
                        .iter()
                        .flatten()
                        .all(|value| values.contains(value))
                {
                    echoed.insert((*other).to_owned());
                }
            }
        }
        if !echoed.is_empty() {
            found.insert(path.clone(), echoed);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::projection::fields::parse_output;

    fn found(text: &str) -> BTreeMap<String, BTreeSet<String>> {
        echoes(&parse_output(text))
    }

    #[test]
    fn a_summary_field_echoes_the_list_that_repeats_it() {
        let f = found(
            r#"{"reservation_id": "ZFA04Y", "origin": "MIA", "destination": "LAX",
                "flights": [{"origin": "MIA", "destination": "LAX", "price": 1305}]}"#,
        );
        assert_eq!(f["origin"], BTreeSet::from(["flights[].origin".to_owned()]));
        assert_eq!(
            f["destination"],
            BTreeSet::from(["flights[].destination".to_owned()])
        );
        assert!(!f.contains_key("reservation_id"), "{f:?}");
        // One leg: each field of it is a record's own, never an echo of the top level.
        assert!(!f.contains_key("flights[].origin"), "{f:?}");
    }

    #[test]
    fn a_value_missing_from_the_list_or_not_distinctive_makes_no_echo() {
        let f = found(r#"{"origin": "JFK", "flights": [{"origin": "MIA"}]}"#);
        assert!(f.is_empty(), "{f:?}");
        let f =
            found(r#"{"paid": 12, "legs": [{"paid": 12}], "ok": true, "rows": [{"ok": true}]}"#);
        assert!(
            f.is_empty(),
            "short numbers and booleans repeat by chance: {f:?}"
        );
    }

    #[test]
    fn an_entry_field_repeating_its_own_key_echoes_the_key() {
        let f = found(
            r#"{"payment_methods": {"credit_card_7": {"id": "credit_card_7", "brand": "visa"},
                                     "gift_card_2": {"id": "gift_card_2", "amount": 150}}}"#,
        );
        assert_eq!(
            f["payment_methods{}.id"],
            BTreeSet::from(["payment_methods{}".to_owned()])
        );
        assert_eq!(f.len(), 1, "{f:?}");
        // One entry naming another's key is not repeating its own.
        let f = found(r#"{"m": {"card_1": {"id": "card_2"}, "card_2": {"id": "card_1"}}}"#);
        assert!(f.is_empty(), "{f:?}");
    }

    #[test]
    fn fields_inside_lists_are_never_echoes_of_another_list() {
        let f = found(
            r#"{"trips": [{"origin": "MIA", "legs": [{"origin": "MIA"}]}],
                "codes": ["MIA", "LAX"], "home": "LAX"}"#,
        );
        assert!(!f.contains_key("trips[].origin"), "{f:?}");
        assert_eq!(f["home"], BTreeSet::from(["codes[]".to_owned()]));
    }
}
