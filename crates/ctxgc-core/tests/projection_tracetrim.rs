//! tracetrim JSONL traces: detected and lowered through the common front door, turns kept,
//! and the learner on top of them (fixtures in `tests/fixtures/projection/`).

use std::path::PathBuf;

use ctxgc_core::frontend::{detect, lower_conversations};
use ctxgc_core::ir::{Block, Kind, Role};
use ctxgc_core::projection::usage::{UsageOptions, detect_usage};
use ctxgc_core::projection::{Run, measure};
use ctxgc_core::{Format, Options};

fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/projection")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn run_of(name: &str) -> Run {
    let text = fixture(name);
    let conversations = lower_conversations(&text, &Options::default()).unwrap();
    assert_eq!(conversations.len(), 1);
    assert_eq!(conversations[0].format, Format::Tracetrim);
    Run::from_items(name, &conversations[0].items)
}

#[test]
fn traces_are_detected_and_calls_of_a_turn_share_one_message() {
    let text = fixture("billing-1.jsonl");
    assert_eq!(detect(&text).unwrap().format, Format::Tracetrim);
    let items = &lower_conversations(&text, &Options::default()).unwrap()[0].items;
    let shape: Vec<(Role, usize)> = items
        .iter()
        .map(|i| match &i.kind {
            Kind::Message(m) => (
                m.role,
                m.blocks
                    .iter()
                    .filter(|b| matches!(b, Block::ToolCall(_)))
                    .count(),
            ),
            other => panic!("messages only, got {other:?}"),
        })
        .collect();
    assert_eq!(
        shape,
        [
            (Role::System, 0),
            (Role::User, 0),
            (Role::Assistant, 2), // turn 0: both calls in one message
            (Role::Tool, 0),
            (Role::Tool, 0),
            (Role::Assistant, 1), // turn 1
            (Role::Tool, 0),
            (Role::Assistant, 0), // turn 2: the answer
        ]
    );
    // Every item keeps the exact line(s) it came from.
    assert!(
        items[2].raw.contains("stripe_get_customer")
            && items[2].raw.contains("stripe_list_charges")
    );
    assert_eq!(items[3].raw, text.lines().nth(2).unwrap());
}

#[test]
fn the_same_turn_rule_holds_for_tracetrim_turns() {
    let run = run_of("billing-1.jsonl");
    assert_eq!(run.calls[0].turn, run.calls[1].turn);
    let usage = detect_usage(&run, &UsageOptions::default());
    // The charge id reappears in turn 1's arguments: it counts for the charge list of turn 0,
    // and the answer's values count too.
    let charges = &usage[1].used;
    assert!(charges.contains("data[].id"), "{charges:?}");
    assert!(charges.contains("data[].failure_message"), "{charges:?}");
    assert!(run.answer().is_some_and(|a| a.contains("ticket")));
}

#[test]
fn runs_round_trip_through_tracetrim_jsonl() {
    let run = run_of("billing-2.jsonl");
    let text = run.to_tracetrim_jsonl();
    let again = Run::from_items(
        "billing-2.jsonl",
        &lower_conversations(&text, &Options::default()).unwrap()[0].items,
    );
    assert_eq!(again.calls.len(), run.calls.len());
    for (a, b) in again.calls.iter().zip(&run.calls) {
        assert_eq!(
            (&a.tool, &a.arguments, &a.output, a.turn),
            (&b.tool, &b.arguments, &b.output, b.turn)
        );
    }
    assert_eq!(again.answer(), run.answer());
}

#[test]
fn the_fixture_runs_measure_with_no_miss() {
    let runs: Vec<Run> = (1..=5)
        .map(|n| run_of(&format!("billing-{n}.jsonl")))
        .collect();
    let m = measure(&runs, &Default::default());
    assert_eq!(m.overall.calls_total, 15);
    assert!(m.overall.calls > 0, "the charge lists get trimmed");
    assert_eq!(m.overall.misses, 0, "{:?}", m.missed_fields);
    assert!(m.overall.removed_share > m.overall.reserialisation_share);
}

#[test]
fn bad_lines_are_reported_by_item_and_field() {
    let err = lower_conversations(
        "{\"kind\": \"call\", \"tool\": \"t\", \"arguments\": {}}\n{\"kind\": \"prompt\", \"text\": 1}",
        &Options {
            from: Some(Format::Tracetrim),
            ..Options::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("item 0: field \"output\": missing"), "{err}");
    assert!(
        err.contains("item 1: field \"text\": expected a string, found number"),
        "{err}"
    );
}
