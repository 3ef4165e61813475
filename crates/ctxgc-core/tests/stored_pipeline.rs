//! The engine merges every pass's claims per item and per block, so the chat passes are
//! stored one by one. Sessions stored when they ran as one group (`chat`) must load and
//! compile on exactly as a session that was never stored.

use ctxgc_core::chat::Preset;
use ctxgc_core::chat::compile::session_template;
use ctxgc_core::{Reason, Session};
use serde_json::{Value, json};

mod common;

/// `session` as an earlier version stored it: its passes inside one `chat` group.
fn stored_as_a_group(session: &Session) -> Value {
    let mut stored = serde_json::to_value(session).expect("a session serialises");
    let passes = stored["passes"].take();
    assert!(
        passes.as_array().is_some_and(|p| p.len() > 1),
        "the chat pipeline is stored pass by pass: {passes}"
    );
    stored["passes"] = json!([{ "chat": { "passes": passes } }]);
    stored
}

#[test]
fn a_session_stored_with_its_chat_passes_grouped_compiles_on_alike() {
    let items = common::agent_chat_items(60);
    let (first, rest) = items.split_at(items.len() / 2);
    for preset in [Preset::Default, Preset::Aggressive, Preset::Lossless] {
        let template = session_template(&common::preset_options(preset));
        let mut never_stored = template.clone();
        never_stored.extend(first.to_vec()).expect("extends");
        never_stored.compile();

        let decisions = compiles_on_alike(
            stored_as_a_group(&never_stored),
            never_stored,
            rest,
            &format!("{preset:?}"),
            &["chat"],
        );
        assert!(
            decisions.iter().filter(|d| d.reason.is_some()).count() > 10,
            "{preset:?}: the passes had work to do"
        );
    }
}

/// `session` as an earlier version stored it, with one pass per form where it now has the
/// pass `merged`: `old` is the stored entry (name and state) put in its place.
fn stored_before_merge(session: &Session, merged: &str, old: impl Fn(&Value) -> Value) -> Value {
    let mut stored = serde_json::to_value(session).expect("a session serialises");
    let passes = stored["passes"].as_array_mut().expect("a list of passes");
    let at = passes
        .iter()
        .position(|p| p.get(merged).is_some())
        .unwrap_or_else(|| panic!("the pipeline has the {merged} pass"));
    passes[at] = old(&passes[at][merged]);
    stored
}

/// Loads `stored`, checks that no pass named in `gone` is left in it, then
/// compiles `rest` on it and on `never_stored`: plans and decisions must be equal. Returns
/// the decisions.
fn compiles_on_alike(
    stored: Value,
    mut never_stored: Session,
    rest: &[ctxgc_core::ir::Item],
    what: &str,
    gone: &[&str],
) -> Vec<ctxgc_core::Decision> {
    let mut loaded: Session = serde_json::from_value(stored).expect("the old pipeline loads");
    // Stored again, it names only passes of this version.
    let names: Vec<String> = serde_json::to_value(&loaded).expect("serialises")["passes"]
        .as_array()
        .expect("passes")
        .iter()
        .filter_map(|p| p.as_object()?.keys().next().cloned())
        .collect();
    assert!(
        !names.iter().any(|n| gone.contains(&n.as_str())),
        "{what}: {names:?}"
    );
    for session in [&mut never_stored, &mut loaded] {
        session.extend(rest.to_vec()).expect("extends");
        session.compile();
    }
    assert_eq!(loaded.plans(), never_stored.plans(), "{what}: plans");
    let decisions = loaded.decisions();
    assert_eq!(decisions, never_stored.decisions(), "{what}: decisions");
    decisions
}

/// True when some decision has one of `reasons`.
fn found(decisions: &[ctxgc_core::Decision], reasons: &[Reason]) -> bool {
    decisions
        .iter()
        .any(|d| d.reason.is_some_and(|r| reasons.contains(&r)))
}

const DUPLICATES: &[Reason] = &[Reason::DuplicateCall, Reason::DuplicateResult];
const SUPERSEDED: &[Reason] = &[Reason::SupersededVar, Reason::SupersededFact];
/// The passes each form of `duplicates` and `superseded-value` was before they merged.
const DUPLICATE_FORMS: &[&str] = &["duplicate-call", "duplicate-result"];
const SUPERSEDED_FORMS: &[&str] = &["superseded-var", "superseded-fact"];

#[test]
fn a_chat_session_stored_with_duplicate_result_compiles_on_alike() {
    let items = common::agent_chat_items(60);
    let (first, rest) = items.split_at(items.len() / 2);
    for preset in [Preset::Default, Preset::Aggressive, Preset::Lossless] {
        let mut never_stored = session_template(&common::preset_options(preset));
        never_stored.extend(first.to_vec()).expect("extends");
        never_stored.compile();
        // The state `duplicate-result` stored: its configuration, the last result of each
        // call and the stubs it had decided.
        let stored = stored_before_merge(
            &never_stored,
            "duplicates",
            |now| json!({ "duplicate-result": { "config": now["config"], "last": {}, "stubs": {} } }),
        );
        let decisions = compiles_on_alike(
            stored,
            never_stored,
            rest,
            &format!("{preset:?}"),
            DUPLICATE_FORMS,
        );
        assert!(
            found(&decisions, DUPLICATES),
            "{preset:?}: duplicates found"
        );
    }
}

/// For each TraceGC fixture where `split_at` (given the whole trace, compiled) names a
/// position: the fixture's name, a session of its items up to there, compiled, and the rest.
fn fixtures_split(
    split_at: impl Fn(&Session) -> Option<usize>,
) -> Vec<(String, Session, Vec<ctxgc_core::ir::Item>)> {
    use ctxgc_core::formats::events::{EventOptions, lower_events};
    let mut split = Vec::new();
    for (name, text) in common::tracegc_fixtures() {
        let items = lower_events(&text, &EventOptions::default()).expect("the fixture lowers");
        let mut whole = Session::new(Default::default());
        whole.extend(items.clone()).expect("extends");
        whole.compile();
        let Some(at) = split_at(&whole) else {
            continue;
        };
        let mut first = Session::new(Default::default());
        first.extend(items[..at].to_vec()).expect("extends");
        first.compile();
        split.push((name, first, items[at..].to_vec()));
    }
    split
}

#[test]
fn an_event_session_stored_with_duplicate_call_compiles_on_alike() {
    // Stored just before the first repeat: its twin is in the stored part.
    let split = fixtures_split(|whole| {
        (whole.decisions().iter()).position(|d| d.reason == Some(Reason::DuplicateCall))
    });
    assert!(!split.is_empty(), "some fixture repeats a call");
    for (name, never_stored, rest) in split {
        // The state `duplicate-call` stored: pairs grouped by signature, and each member.
        let stored = stored_before_merge(
            &never_stored,
            "duplicates",
            |_| json!({ "duplicate-call": { "groups": {}, "member": {} } }),
        );
        let decisions = compiles_on_alike(stored, never_stored, &rest, &name, DUPLICATE_FORMS);
        assert!(found(&decisions, DUPLICATES), "{name}: duplicates found");
    }
}

#[test]
fn a_chat_session_stored_with_superseded_fact_compiles_on_alike() {
    let items = common::agent_chat_items(60);
    let (first, rest) = items.split_at(items.len() / 2);
    for preset in [Preset::Default, Preset::Aggressive] {
        let mut never_stored = session_template(&common::preset_options(preset));
        never_stored.extend(first.to_vec()).expect("extends");
        never_stored.compile();
        // The state `superseded-fact` stored: on or off, the ledger of declared facts and
        // the turns it may retire.
        let stored = stored_before_merge(&never_stored, "superseded-value", |now| {
            json!({ "superseded-fact": {
                "enabled": now["enabled"], "ledger": now["ledger"], "eligible": [] } })
        });
        let what = format!("{preset:?}");
        let decisions = compiles_on_alike(stored, never_stored, rest, &what, SUPERSEDED_FORMS);
        assert!(found(&decisions, SUPERSEDED), "{what}: facts superseded");
    }
}

#[test]
fn an_event_session_stored_with_superseded_var_compiles_on_alike() {
    // Stored just before the value that supersedes the first superseded one.
    let split = fixtures_split(|whole| {
        (whole.decisions().iter())
            .find(|d| d.reason == Some(Reason::SupersededVar))
            .and_then(|d| whole.position(&d.by[0]))
    });
    assert!(!split.is_empty(), "some fixture sets a key twice");
    for (name, never_stored, rest) in split {
        // The state `superseded-var` stored: every key's assignments and the live one.
        let stored = stored_before_merge(
            &never_stored,
            "superseded-value",
            |_| json!({ "superseded-var": { "keys": {} } }),
        );
        let decisions = compiles_on_alike(stored, never_stored, &rest, &name, SUPERSEDED_FORMS);
        assert!(found(&decisions, SUPERSEDED), "{name}: values superseded");
    }
}
