//! Cache-stable sessions price a compaction step from what moved since the last check point,
//! not from the whole session: each pass reports the earlier items whose plan a new item
//! moves. These tests compile sessions one item at a time and check after every item that
//! no plan moved unreported, that a session stored and loaded half-way decides exactly as one
//! that was not, and that the steps are those of a batch compile.

use ctxgc_core::chat::Preset;
use ctxgc_core::chat::compile::session_template;
use ctxgc_core::frontend::events::lower_events;
use ctxgc_core::ir::Item;
use ctxgc_core::session::CacheModel;
use ctxgc_core::{Options, Session};
use serde_json::{Value, json};

mod common;

fn cache_model() -> CacheModel {
    CacheModel {
        // Small enough that the sessions below take several steps.
        min_reclaim_tokens: 40,
        ..CacheModel::default()
    }
}

fn event_session() -> Session {
    let mut session = Session::new(Default::default());
    session.enable_cache_stable(cache_model());
    session
}

fn event_items(events: &[Value]) -> Vec<Item> {
    lower_events(
        &Value::Array(events.to_vec()).to_string(),
        &Default::default(),
    )
    .expect("the trace lowers")
}

/// Compiles `items` one at a time into `session`, checking the tracked plans after each.
fn feed(session: &mut Session, items: &[Item]) {
    for item in items {
        session.append(item.clone()).expect("appends");
        session.compile();
        if let Err(miss) = session.check_tracked_plans() {
            panic!("after {}: {miss}", item.id);
        }
    }
}

/// Asserts that two sessions decided alike: every plan and every step.
fn assert_same_outcome(got: &Session, expected: &Session, what: &str) {
    let (got_plans, expected_plans) = (got.plans(), expected.plans());
    assert_eq!(got_plans.len(), expected_plans.len(), "{what}: items");
    if let Some(i) = (0..got_plans.len()).find(|&i| got_plans[i] != expected_plans[i]) {
        panic!(
            "{what}: item {i} planned {:?}, expected {:?}",
            got_plans[i], expected_plans[i]
        );
    }
    let (got_steps, expected_steps) = (got.compaction_steps(), expected.compaction_steps());
    for (a, b) in got_steps.iter().zip(expected_steps) {
        assert_eq!(
            (a.at, &a.items, a.tokens_saved, a.prefix_tokens_invalidated),
            (b.at, &b.items, b.tokens_saved, b.prefix_tokens_invalidated),
            "{what}: a step"
        );
        // The estimate is a float sum: equal but for rounding (a session stored as JSON text
        // reads its cache model's multipliers back to the nearest float).
        assert!(
            (a.estimated_net - b.estimated_net).abs() <= 1e-9 * b.estimated_net.abs().max(1.0),
            "{what}: step at {} estimated {} against {}",
            a.at,
            a.estimated_net,
            b.estimated_net
        );
    }
    assert_eq!(got_steps.len(), expected_steps.len(), "{what}: steps");
}

/// A session compiled item by item, and the same items stored and loaded half-way (the pass
/// indexes that are not stored are rebuilt from the items), end alike; the batch compile too.
fn check_one_at_a_time(template: &Session, items: &[Item]) -> usize {
    let mut live = template.clone();
    feed(&mut live, items);

    let half = items.len() / 2;
    let mut first = template.clone();
    feed(&mut first, &items[..half]);
    let stored = serde_json::to_string(&first).expect("the session serialises");
    let mut resumed: Session = serde_json::from_str(&stored).expect("the session loads");
    feed(&mut resumed, &items[half..]);

    let batch = batch_compiled(template, items);

    assert_same_outcome(&resumed, &live, "loaded half-way");
    assert_same_outcome(&batch, &live, "compiled as one batch");
    live.compaction_steps().len()
}

/// `items` compiled as one batch (cache-stable mode still takes them one at a time).
fn batch_compiled(template: &Session, items: &[Item]) -> Session {
    let mut batch = template.clone();
    batch.extend(items.to_vec()).expect("extends");
    batch.compile();
    assert_eq!(batch.check_tracked_plans(), Ok(()));
    batch
}

#[test]
fn generated_traces_move_no_plan_unreported() {
    let mut steps = 0;
    for seed in [1, 7, 42] {
        let items = event_items(&ctxgc_core::synth::events(1500, seed));
        steps += check_one_at_a_time(&event_session(), &items);
    }
    assert!(steps > 0, "the traces take compaction steps");
}

/// Every dependency between items that a pass has, each one moved by a later item: values
/// superseded, errors resolved by a success that an abandon later kills, notes replaced by a
/// note in an abandoned branch, reads made stale, runs repeated, duplicate pairs whose first
/// pair is abandoned, a protection that expires.
#[test]
fn every_kind_of_dependency_is_reported() {
    let big = "x".repeat(400);
    let events = vec![
        json!({"id": "root", "type": "decision", "timestamp": 1, "content": "plan"}),
        json!({"id": "v1", "type": "set_var", "timestamp": 2, "parent_id": "root", "key": "k", "value": big, "retain_until": 30}),
        json!({"id": "r1", "type": "file_read", "timestamp": 3, "parent_id": "root", "path": "src/a.rs"}),
        json!({"id": "t1", "type": "test_run", "timestamp": 4, "parent_id": "root", "test_names": ["a"], "exit_code": 1, "passed_count": 0, "failed_count": 1}),
        json!({"id": "err1", "type": "error", "timestamp": 5, "parent_id": "root", "message": "test failed", "related_to": "t1"}),
        json!({"id": "n1", "type": "requirement", "timestamp": 7, "parent_id": "root", "content": big}),
        json!({"id": "c1", "type": "tool_call", "timestamp": 8, "parent_id": "root", "tool_name": "get", "arguments": {"id": 1}}),
        json!({"id": "o1", "type": "tool_result", "timestamp": 9, "parent_id": "c1", "call_id": "c1", "result": big}),
        json!({"id": "branch", "type": "decision", "timestamp": 10, "parent_id": "root", "content": "try another way"}),
        json!({"id": "t2", "type": "test_run", "timestamp": 11, "parent_id": "branch", "test_names": ["a"], "exit_code": 0, "passed_count": 1, "failed_count": 0}),
        json!({"id": "n2", "type": "requirement", "timestamp": 12, "parent_id": "branch", "content": "short", "supersedes": ["n1"]}),
        json!({"id": "c2", "type": "tool_call", "timestamp": 13, "parent_id": "branch", "tool_name": "get", "arguments": {"id": 1}}),
        json!({"id": "o2", "type": "tool_result", "timestamp": 14, "parent_id": "c2", "call_id": "c2", "result": big}),
        json!({"id": "cmd1", "type": "command_run", "timestamp": 15, "parent_id": "root", "command": "make", "exit_code": 0, "output": big}),
        json!({"id": "cmd2", "type": "command_run", "timestamp": 16, "parent_id": "root", "command": "make", "exit_code": 0, "output": big}),
        json!({"id": "b1", "type": "command_run", "timestamp": 17, "parent_id": "root", "command": "cargo build", "exit_code": 1}),
        json!({"id": "v2", "type": "set_var", "timestamp": 18, "parent_id": "root", "key": "k", "value": 2}),
        json!({"id": "ab", "type": "abandon", "timestamp": 19, "parent_id": "root", "ref_to": ["branch"]}),
        json!({"id": "c3", "type": "tool_call", "timestamp": 20, "parent_id": "root", "tool_name": "get", "arguments": {"id": 1}}),
        json!({"id": "o3", "type": "tool_result", "timestamp": 21, "parent_id": "c3", "call_id": "c3", "result": big}),
        json!({"id": "t3", "type": "test_run", "timestamp": 22, "parent_id": "root", "test_names": ["a"], "exit_code": 0, "passed_count": 1, "failed_count": 0}),
        json!({"id": "e1", "type": "file_edit", "timestamp": 23, "parent_id": "root", "path": "./src/a.rs", "diff_hash": "d1"}),
        json!({"id": "n3", "type": "requirement", "timestamp": 24, "parent_id": "root", "content": "shorter", "supersedes": ["n1"]}),
        json!({"id": "b2", "type": "command_run", "timestamp": 25, "parent_id": "root", "command": "cargo build", "exit_code": 0}),
        json!({"id": "cmd3", "type": "command_run", "timestamp": 26, "parent_id": "root", "command": "make", "exit_code": 0, "output": big}),
        json!({"id": "tick", "type": "decision", "timestamp": 40, "parent_id": "root", "content": "later"}),
        json!({"id": "v3", "type": "set_var", "timestamp": 41, "parent_id": "root", "key": "k", "value": 3}),
    ];
    let items = event_items(&events);
    assert_eq!(items.len(), events.len(), "every event lowers to one item");
    check_one_at_a_time(&event_session(), &items);
    // Each dependency above did move a plan.
    let session = batch_compiled(&event_session(), &items);
    let reasons: std::collections::BTreeSet<&str> = (0..items.len())
        .filter_map(|i| session.eager_plan_of(i).verdict.map(|v| v.reason.code()))
        .collect();
    for reason in [
        "superseded-var",
        "resolved-error",
        "replaced-note",
        "stale-read",
        "repeated-run",
        "duplicate-call",
        "dead-branch",
    ] {
        assert!(reasons.contains(reason), "no {reason} in {reasons:?}");
    }
}

#[test]
fn chats_move_no_plan_unreported_under_every_preset() {
    let items = common::agent_chat_items(40);
    for preset in [Preset::Default, Preset::Aggressive, Preset::Lossless] {
        let mut options = Options::default();
        options.chat.preset = preset;
        options.chat.cache = Some(cache_model());
        check_one_at_a_time(&session_template(&options), &items);
    }
}

/// An error may name a cause that comes later in the same batch: it is resolved once the
/// cause and then a success of the same command arrive.
#[test]
fn an_error_whose_cause_comes_later_in_the_batch_is_tracked() {
    let events = vec![
        json!({"id": "e0", "type": "decision", "timestamp": 1, "content": "build it"}),
        json!({"id": "err", "type": "error", "timestamp": 2, "parent_id": "e0", "message": "build failed", "related_to": "b1"}),
        json!({"id": "b1", "type": "command_run", "timestamp": 3, "parent_id": "e0", "command": "cargo build", "exit_code": 1}),
        json!({"id": "b2", "type": "command_run", "timestamp": 4, "parent_id": "e0", "command": "cargo build", "exit_code": 0}),
        json!({"id": "b3", "type": "command_run", "timestamp": 5, "parent_id": "e0", "command": "cargo build", "exit_code": 0}),
    ];
    let session = batch_compiled(&event_session(), &event_items(&events));
    // Retiring it changes history already sent: it is the eager plan, taken at a step.
    let plan = session.eager_plan_of(1);
    let verdict = plan.verdict.as_ref().expect("the error is retired");
    assert_eq!(
        (verdict.reason.code(), verdict.by.as_slice()),
        ("resolved-error", &[3][..])
    );
}
