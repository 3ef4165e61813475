//! Tool outputs in chats: duplicates, superseded reads, compaction (lossless, sampling,
//! folding), protection (`--keep-tool`, the recall tool, retention), errors, thinking.

use ctxgc_core::chat::compact::decode_tables;
use ctxgc_core::chat::plain::from_plain;
use ctxgc_core::chat::{ChatOptions, Preset};
use ctxgc_core::{Action, Compiled, Options, Reason, compile};
use serde_json::{Value, json};

mod common;
use common::chat_fixture;

fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"role": "assistant", "content": null, "tool_calls": [
        {"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}]})
}

fn result(id: &str, content: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": content})
}

fn run_with(messages: &[Value], chat: ChatOptions) -> Compiled {
    let options = Options {
        chat,
        ..Default::default()
    };
    let c = compile(&Value::Array(messages.to_vec()).to_string(), &options).expect("compiles");
    assert!(c.chat.as_ref().unwrap().validation.ok, "output stays valid");
    c
}

fn run(messages: &[Value]) -> Compiled {
    run_with(messages, ChatOptions::default())
}

/// The default preset with a recall tool: where its lossy rewrites apply.
fn recall() -> ChatOptions {
    ChatOptions {
        expand_tool: Some("expand".into()),
        ..Default::default()
    }
}

/// `messages` followed by the agent's answer: outputs before it have been read whole, so a
/// lossy rewrite may apply to them.
fn answered(messages: &[Value]) -> Vec<Value> {
    let mut out = messages.to_vec();
    out.push(json!({"role": "assistant", "content": "Noted."}));
    out
}

fn preset(p: Preset) -> ChatOptions {
    ChatOptions {
        preset: p,
        ..Default::default()
    }
}

fn decision(c: &Compiled, id: &str) -> (Action, Option<Reason>, Vec<String>) {
    let d = c.decisions.iter().find(|d| d.id == id).expect("decision");
    (d.action, d.reason, d.by.clone())
}

fn content(c: &Compiled, index: usize) -> String {
    let out: Vec<Value> = serde_json::from_str(&c.output).unwrap();
    out[index]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Asserts that message `index` (item `m{index}`) was rewritten to `stub` for `reason`,
/// naming the item `by`.
fn assert_stub(c: &Compiled, index: usize, (reason, by): (Reason, &str), stub: &str) {
    let id = format!("m{index}");
    assert_eq!(
        decision(c, &id),
        (Action::Rewrite, Some(reason), vec![by.to_owned()]),
        "{id}"
    );
    assert_eq!(content(c, index), stub, "{id}");
}

fn user_record() -> String {
    json!({"name": "Ada Lovelace", "email": "ada@example.com", "membership": "gold",
           "reservations": ["ZFA04Y", "8JX2WO", "Q69X3R"], "address": {"city": "London", "zip": "NW1"}})
    .to_string()
}

#[test]
fn an_identical_repeated_call_points_at_its_twin() {
    let c = run(&[
        call("c1", "get_user", json!({"id": 7})),
        result("c1", &user_record()),
        call("c2", "get_user", json!({"id": 7})),
        result("c2", &user_record()),
    ]);
    assert_stub(
        &c,
        3,
        (Reason::DuplicateResult, "m1"),
        "[ctxgc: same output as the identical call answered in m1]",
    );
    // The earlier one is sent whole: only re-encoded, every value still there.
    assert_eq!(
        decision(&c, "m1"),
        (Action::Rewrite, Some(Reason::CompactJson), vec![])
    );
    assert_eq!(
        from_plain(&content(&c, 1)).unwrap(),
        serde_json::from_str::<Value>(&user_record()).unwrap()
    );
    // Different arguments are a different call.
    let c = run(&[
        call("c1", "get_user", json!({"id": 7})),
        result("c1", &user_record()),
        call("c2", "get_user", json!({"id": 8})),
        result("c2", &user_record()),
    ]);
    assert_ne!(decision(&c, "m3").1, Some(Reason::DuplicateResult));
}

#[test]
fn a_read_that_came_back_different_supersedes_the_earlier_one_outside_lossless() {
    let before = "[File: a.py (3 lines total)]\n1:def f():\n2:    return 1\n3:".repeat(4);
    let after = "[File: a.py (3 lines total)]\n1:def f():\n2:    return 2\n3:".repeat(4);
    let messages = [
        call("c1", "open", json!({"path": "a.py"})),
        result("c1", &before),
        call("c2", "edit", json!({"line": 2})),
        result("c2", "edited"),
        call("c3", "open", json!({"path": "a.py"})),
        result("c3", &after),
    ];
    let c = run(&messages);
    assert_eq!(
        decision(&c, "m1"),
        (
            Action::Rewrite,
            Some(Reason::SupersededRead),
            vec!["m5".into()]
        )
    );
    assert!(content(&c, 1).starts_with(
        "[ctxgc: superseded: the same call was made again in m5 and returned a different result; \
         the full output is kept by the operator (ctxgc receipt m1)]"
    ));
    assert_eq!(content(&c, 5), after);
    let c = run_with(&messages, preset(Preset::Lossless));
    assert_eq!(decision(&c, "m1").0, Action::Keep);
}

/// True when item `id` was stubbed as superseded, as a call or as a record.
fn superseded(c: &Compiled, id: &str) -> bool {
    matches!(
        decision(c, id).1,
        Some(Reason::SupersededRead | Reason::SupersededRecord)
    )
}

fn reservation(id: &str, user: &str, status: &str, price: u32) -> String {
    json!({"reservation_id": id, "user_id": user, "cabin": "business", "status": status,
           "flights": [{"flight_number": "HAT003", "date": "2024-05-19", "price": price},
                       {"flight_number": "HAT290", "date": "2024-05-20", "price": price + 778}]})
    .to_string()
}

#[test]
fn a_record_returned_again_changed_by_another_tool_supersedes_the_earlier_read() {
    let messages = [
        call(
            "c1",
            "get_reservation_details",
            json!({"reservation_id": "GV1N64"}),
        ),
        result("c1", &reservation("GV1N64", "james_9828", "active", 561)),
        call(
            "c2",
            "update_reservation_flights",
            json!({"reservation_id": "GV1N64", "cabin": "basic_economy"}),
        ),
        result("c2", &reservation("GV1N64", "james_9828", "active", 53)),
    ];
    // The agent has not answered the update yet: it may still compare old and new fares.
    let c = run_with(&messages, recall());
    assert!(!superseded(&c, "m1"));
    // Once it has, the earlier version is a stub naming the record, the newer read and the
    // way back.
    let c = run_with(&answered(&messages), recall());
    assert_stub(
        &c,
        1,
        (Reason::SupersededRecord, "m3"),
        "[ctxgc: superseded: reservation_id \"GV1N64\" was returned again in m3, changed; \
         call expand with id \"m1\" for the full output]",
    );
    assert!(
        c.receipts.iter().any(|r| r.id == "m1"),
        "the original is in a receipt"
    );
    // The aggressive preset takes it too; the default preset without a recall tool withholds
    // it and reports what it would save; lossless never.
    let c = run_with(&answered(&messages), preset(Preset::Aggressive));
    assert_eq!(decision(&c, "m1").1, Some(Reason::SupersededRecord));
    for p in [Preset::Default, Preset::Lossless] {
        let c = run_with(&answered(&messages), preset(p));
        assert!(!superseded(&c, "m1"), "{p:?}");
        assert_eq!(c.would_save_tokens > 0, p == Preset::Default, "{p:?}");
    }
}

#[test]
fn records_that_only_share_an_owner_or_lose_fields_are_not_superseded() {
    // Two bookings of one user: the same user_id (asked for by both calls), different
    // reservations.
    let c = run_with(
        &answered(&[
            call(
                "c1",
                "book_reservation",
                json!({"user_id": "james_9828", "origin": "LAS"}),
            ),
            result("c1", &reservation("AAA111", "james_9828", "active", 561)),
            call(
                "c2",
                "book_reservation",
                json!({"user_id": "james_9828", "origin": "DEN"}),
            ),
            result("c2", &reservation("BBB222", "james_9828", "active", 99)),
        ]),
        recall(),
    );
    assert!(!superseded(&c, "m1"));
    // A newer result that says less about the record (fields missing) does not stand for it.
    let short = json!({"reservation_id": "GV1N64", "status": "cancelled"}).to_string();
    let c = run_with(
        &answered(&[
            call(
                "c1",
                "get_reservation_details",
                json!({"reservation_id": "GV1N64"}),
            ),
            result("c1", &reservation("GV1N64", "james_9828", "active", 561)),
            call(
                "c2",
                "cancel_reservation",
                json!({"reservation_id": "GV1N64"}),
            ),
            result("c2", &short),
        ]),
        recall(),
    );
    assert!(!superseded(&c, "m1"));
    // An id the call did not ask for names no record read: a search that lists a
    // reservation among others is not a read of it.
    let c = run_with(
        &answered(&[
            call(
                "c1",
                "get_reservation_details",
                json!({"reservation_id": "GV1N64"}),
            ),
            result("c1", &reservation("GV1N64", "james_9828", "active", 561)),
            call("c2", "latest_reservation", json!({"user": "james"})),
            result("c2", &reservation("GV1N64", "james_9828", "cancelled", 561)),
        ]),
        recall(),
    );
    assert!(!superseded(&c, "m1"));
}

#[test]
fn a_polled_record_keeps_only_its_latest_version_in_full() {
    // A job polled until it finishes: each changed status supersedes the one before, an
    // unchanged one does not (it is the same output), and the latest stays whole.
    let mut messages = Vec::new();
    let polls = 400;
    for n in 0..polls {
        let id = format!("c{n}");
        let status = if n == polls - 1 {
            "done".to_owned()
        } else {
            format!("running, step {}", n / 2)
        };
        // Each call differs (its attempt number): only the record ties the polls together.
        messages.push(call(
            &id,
            "get_job",
            json!({"job_id": "J-77", "attempt": n}),
        ));
        let record = json!({"job_id": "J-77", "status": status, "log": "x ".repeat(60)});
        messages.push(result(&id, &record.to_string()));
        messages.push(json!({"role": "assistant", "content": "Still waiting."}));
    }
    let c = run_with(&messages, preset(Preset::Aggressive));
    for n in 0..polls - 1 {
        let id = format!("m{}", 3 * n + 1);
        let (action, reason, by) = decision(&c, &id);
        if n % 2 == 0 && n + 2 < polls {
            // The next poll returned the same output: not superseded by it...
            assert_eq!(by, vec![format!("m{}", 3 * n + 7)], "{id}");
        } else {
            assert_eq!(by, vec![format!("m{}", 3 * n + 4)], "{id}");
        }
        // ...and every poll but the last is superseded by the next different one.
        assert_eq!(action, Action::Rewrite, "{id}");
        assert_eq!(reason, Some(Reason::SupersededRecord), "{id}");
    }
    let last = format!("m{}", 3 * (polls - 1) + 1);
    assert!(!superseded(&c, &last));
}

#[test]
fn a_call_polled_unchanged_for_long_is_superseded_by_its_first_change() {
    // The same call polled 300 times: the first 120 answers are one result, the next 180
    // another, then the job ends. Every read of a run is superseded by the first read of
    // the next run (however long its own run), repeats inside a run point at their twin,
    // and the last read stays whole.
    let mut messages = Vec::new();
    let polls = 301;
    let status = |n: usize| match n {
        0..120 => "queued",
        120..300 => "running",
        _ => "done",
    };
    for n in 0..polls {
        let id = format!("c{n}");
        messages.push(call(&id, "get_job", json!({"job_id": "J-77"})));
        let out = json!({"job_id": "J-77", "status": status(n), "log": "x ".repeat(60)});
        messages.push(result(&id, &out.to_string()));
        messages.push(json!({"role": "assistant", "content": "Still waiting."}));
    }
    let c = run_with(&messages, preset(Preset::Aggressive));
    let item = |n: usize| format!("m{}", 3 * n + 1);
    for (n, first_of_next_run) in [(0, 120), (1, 120), (119, 120), (120, 300), (299, 300)] {
        let (action, reason, by) = decision(&c, &item(n));
        assert_eq!(action, Action::Rewrite, "{}", item(n));
        assert_eq!(
            reason,
            Some(Reason::SupersededRead),
            "{}: superseded, not a duplicate",
            item(n)
        );
        assert_eq!(by, vec![item(first_of_next_run)], "{}", item(n));
    }
    assert!(!superseded(&c, &item(polls - 1)));
}

#[test]
fn errors_are_never_stubbed_away_or_called_resolved() {
    let error = "Error: reservation ZFA04Y is locked by another agent; retry later. Code 423.";
    let ok = "{\"reservation_id\": \"ZFA04Y\", \"status\": \"cancelled\", \"refund\": 250}";
    for p in [Preset::Lossless, Preset::Default, Preset::Aggressive] {
        // A failure then a success of the same call: the failure stays as it was.
        let c = run_with(
            &[
                call("c1", "cancel_reservation", json!({"id": "ZFA04Y"})),
                result("c1", error),
                call("c2", "cancel_reservation", json!({"id": "ZFA04Y"})),
                result("c2", ok),
            ],
            preset(p),
        );
        assert_eq!(content(&c, 1), error);
        assert!(!c.output.to_lowercase().contains("resolved"));
        // A success then a failure: the success is not superseded by the error.
        let c = run_with(
            &[
                call("c1", "cancel_reservation", json!({"id": "ZFA04Y"})),
                result("c1", ok),
                call("c2", "cancel_reservation", json!({"id": "ZFA04Y"})),
                result("c2", error),
            ],
            preset(p),
        );
        assert_ne!(decision(&c, "m1").1, Some(Reason::SupersededRead));
        assert_eq!(content(&c, 3), error);
    }
    // tau2's `error: true` flag counts as an error too.
    let c = run(&[
        call("c1", "get", json!({})),
        json!({"role": "tool", "tool_call_id": "c1", "content": "the tool timed out after thirty seconds, nothing was changed", "error": true}),
        call("c2", "get", json!({})),
        result("c2", "fine, here is the full answer you asked for"),
    ]);
    assert_eq!(decision(&c, "m1").0, Action::Keep);
}

#[test]
fn keep_tool_globs_protect_outputs_from_every_pass() {
    let rows: Vec<Value> = (0..50)
        .map(|i| json!({"id": i, "name": format!("item {i}")}))
        .collect();
    let list = Value::Array(rows).to_string();
    let messages = [
        call("c1", "get_items", json!({})),
        result("c1", &list),
        call("c2", "get_items", json!({})),
        result("c2", &list),
    ];
    let c = run_with(
        &messages,
        ChatOptions {
            keep_tools: vec!["get_*".into()],
            ..Default::default()
        },
    );
    assert!(c.decisions.iter().all(|d| d.action == Action::Keep));
    assert_eq!(content(&c, 1), list);
    let report = c.chat.as_ref().unwrap();
    let why = report
        .payloads
        .iter()
        .find(|p| p.id == "m1")
        .unwrap()
        .untouched;
    assert_eq!(
        why,
        Some("protected by --keep-tool"),
        "saying why nothing was done"
    );
    let c = run_with(&messages, preset(Preset::Aggressive));
    assert_eq!(decision(&c, "m1").1, Some(Reason::SampleRows));
    assert_eq!(decision(&c, "m3").1, Some(Reason::DuplicateResult));
}

#[test]
fn stubs_name_a_receipt_to_fetch_only_when_the_model_has_a_recall_tool() {
    let rows: Vec<Value> = (0..40)
        .map(|i| json!({"sku": i, "name": format!("item {i}")}))
        .collect();
    let list = json!({"inventory": rows}).to_string();
    let messages = answered(&[call("c1", "list", json!({})), result("c1", &list)]);
    // `aggressive` samples without a recall tool: its note names no tool call.
    let c = run_with(&messages, preset(Preset::Aggressive));
    let text = content(&c, 1);
    assert!(
        text.contains("the full output is kept by the operator (ctxgc receipt m1)"),
        "{text}"
    );
    assert!(!text.contains("call "));
    let c = run_with(&messages, recall());
    assert!(content(&c, 1).contains("call expand with id \"m1\" for the full output"));
    // `default` without a recall tool does not sample at all: it says what that would save.
    let c = run(&messages);
    assert_ne!(decision(&c, "m1").1, Some(Reason::SampleRows));
    assert!(c.would_save_tokens > 0);
}

#[test]
fn the_recall_tools_own_output_is_never_rewritten() {
    let rows: Vec<Value> = (0..40)
        .map(|i| json!({"sku": i, "name": format!("item {i}")}))
        .collect();
    let list = json!({"inventory": rows}).to_string();
    let c = run_with(
        &[
            call("c1", "expand", json!({"id": "m1"})),
            result("c1", &list),
            call("c2", "expand", json!({"id": "m1"})),
            result("c2", &list),
        ],
        ChatOptions {
            expand_tool: Some("expand".into()),
            preset: Preset::Aggressive,
            ..Default::default()
        },
    );
    assert!(c.decisions.iter().all(|d| d.action == Action::Keep));
}

#[test]
fn an_output_is_never_made_larger() {
    let c = run(&[
        call("c1", "ping", json!({})),
        result("c1", "pong"),
        call("c2", "ping", json!({})),
        result("c2", "pong"),
        call("c3", "sum", json!({})),
        result("c3", "[1,2,3]"),
    ]);
    assert!(
        c.decisions.iter().all(|d| d.action == Action::Keep),
        "a stub would cost more"
    );
    let report = c.chat.unwrap();
    assert!(report.payloads.iter().all(|p| p.after <= p.before));
}

#[test]
fn lists_of_records_become_header_and_rows_losslessly() {
    let text = r#"{"reservation_id": "HATHAT", "flights": [
        {"flight_number": "HAT136", "date": "2024-05-20", "price": 152},
        {"flight_number": "HAT039", "date": "2024-05-20", "price": 103},
        {"flight_number": "HAT040", "date": "2024-05-21", "price": 99.50}]}"#;
    let c = run_with(
        &[call("c1", "get", json!({})), result("c1", text)],
        preset(Preset::Lossless),
    );
    let new = content(&c, 1);
    assert!(new.contains("columns:[flight_number,date,price]"), "{new}");
    let back = decode_tables(&from_plain(&new).unwrap());
    assert_eq!(back, serde_json::from_str::<Value>(text).unwrap());
    assert!(new.contains("99.50"), "numbers keep their exact text");
}

fn inventory(n: usize) -> Value {
    let rows: Vec<Value> = (0..n)
        .map(|i| match i {
            20 => json!({"name": "Peanut Butter 500g", "warning": "PEANUT_ALLERGEN", "qty": i}),
            24 => json!({"name": "Egg-free pasta", "warning": "", "qty": i}),
            27 => json!({"name": "Milk", "warning": "", "qty": i, "expiry": "2024-05-16"}),
            31 => json!({"name": "Gift card", "warning": "", "qty": i, "passport": "X1234567"}),
            _ => json!({"name": format!("Item {i}"), "warning": "", "qty": i}),
        })
        .collect();
    json!({"inventory": rows})
}

#[test]
fn sampling_keeps_every_safety_row_and_says_what_it_omitted() {
    let text = inventory(40).to_string();
    let listed = [call("c1", "list_inventory", json!({})), result("c1", &text)];
    // Before the agent has answered it the list goes whole, and so it does without a recall
    // tool.
    let c = run_with(&listed, recall());
    assert_eq!(decision(&c, "m1").0, Action::Keep);
    let c = run(&answered(&listed));
    assert_eq!(decision(&c, "m1").0, Action::Keep);
    assert!(c.would_save_tokens > 0, "what sampling would save is said");
    let c = run_with(&answered(&listed), recall());
    assert_eq!(c.would_save_tokens, 0);
    assert_eq!(decision(&c, "m1").1, Some(Reason::SampleRows));
    let new = content(&c, 1);
    let (note, body) = new.split_once('\n').unwrap();
    assert!(note.contains("$.inventory: 13 of 40 rows shown"), "{note}");
    assert!(
        note.contains(
            "safety-flagged rows kept: 21 (warning allergen), 28 (expiry), 32 (passport, holds PII)"
        ),
        "{note}"
    );
    assert!(
        note.contains("27 rows omitted: 11-20, 22-27, 29-31, 33-40"),
        "{note}"
    );
    assert!(note.contains("shown rows keep every field"));
    assert!(!body.contains("Egg-free"), "egg-free is not an allergen");
    let rows = decode_tables(&from_plain(body).unwrap());
    let rows = rows["inventory"].as_array().unwrap();
    assert_eq!(rows.len(), 13);
    assert_eq!(rows[10]["warning"], "PEANUT_ALLERGEN");
    assert_eq!(
        rows[12]["passport"], "X1234567",
        "PII rows are kept (and said to hold PII)"
    );
    // Lossless never samples; --max-rows overrides the preset.
    let c = run_with(
        &[call("c1", "list_inventory", json!({})), result("c1", &text)],
        preset(Preset::Lossless),
    );
    assert_ne!(decision(&c, "m1").1, Some(Reason::SampleRows));
    let c = run_with(
        &answered(&listed),
        ChatOptions {
            max_rows: Some(100),
            ..recall()
        },
    );
    assert_ne!(decision(&c, "m1").1, Some(Reason::SampleRows));
}

#[test]
fn long_text_is_folded_with_errors_kept_and_every_gap_marked() {
    let mut lines: Vec<String> = (1..=300)
        .map(|i| format!("tests/test_mod_{i}.py::test_case PASSED"))
        .collect();
    lines[150] = "tests/test_io.py::test_read_utf8 FAILED".into();
    lines[200] = "Traceback (most recent call last):".into();
    lines[201] = "  File \"io.py\", line 3, in read".into();
    lines[202] = "UnicodeDecodeError: invalid start byte".into();
    for l in lines.iter_mut().take(260).skip(220) {
        *l = "warming cache...".into();
    }
    let log = lines.join("\n");
    let ran = [
        call("c1", "bash", json!({"cmd": "pytest"})),
        result("c1", &log),
    ];
    // The request in which the agent reads the log carries it whole.
    let c = run_with(&ran, recall());
    assert_eq!(decision(&c, "m1").0, Action::Keep);
    let c = run(&answered(&ran));
    assert_eq!(
        decision(&c, "m1").0,
        Action::Keep,
        "no recall tool: not folded"
    );
    assert!(c.would_save_tokens > 0);
    let why = c.chat.as_ref().unwrap().payloads[1].untouched.unwrap();
    assert!(why.contains("withheld"), "{why}");
    let c = run_with(&answered(&ran), recall());
    assert_eq!(decision(&c, "m1").1, Some(Reason::FoldText));
    let new = content(&c, 1);
    assert!(new.starts_with("[ctxgc: long output folded:"), "{new}");
    for kept in [
        "tests/test_mod_1.py::test_case PASSED",
        "tests/test_io.py::test_read_utf8 FAILED",
        "Traceback (most recent call last):",
        "  File \"io.py\", line 3, in read",
        "UnicodeDecodeError: invalid start byte",
        "tests/test_mod_300.py::test_case PASSED",
    ] {
        assert!(new.contains(kept), "{kept} missing");
    }
    assert!(
        new.contains("[ctxgc: 100 lines omitted here: lines 51-150]"),
        "{new}"
    );
    assert!(!new.contains("test_mod_100.py"));
    let c = run_with(
        &[
            call("c1", "bash", json!({"cmd": "pytest"})),
            result("c1", &log),
        ],
        preset(Preset::Lossless),
    );
    assert_eq!(decision(&c, "m1").0, Action::Keep);
}

#[test]
fn a_long_diff_keeps_head_and_tail_not_just_its_first_line() {
    let mut diff = vec![
        "diff --git a/src/lib.rs b/src/lib.rs".to_string(),
        "--- a/src/lib.rs".into(),
        "+++ b/src/lib.rs".into(),
    ];
    for i in 0..200 {
        diff.push(format!("+    let value_{i} = compute({i});"));
    }
    let text = diff.join("\n");
    let c = run_with(
        &answered(&[call("c1", "git_diff", json!({})), result("c1", &text)]),
        recall(),
    );
    let new = content(&c, 1);
    assert!(new.contains("+++ b/src/lib.rs"));
    assert!(new.contains("+    let value_40 = compute(40);"));
    assert!(new.contains("+    let value_199 = compute(199);"));
    assert!(new.contains("lines omitted here"));
}

#[test]
fn the_system_prompt_is_never_altered() {
    let policy = format!(
        "# Policy\n\n{}",
        "Never book a flight without explicit confirmation (yes). ".repeat(80)
    );
    let messages = [
        json!({"role": "system", "content": policy}),
        json!({"role": "user", "content": "hi"}),
    ];
    let c = run_with(&messages, preset(Preset::Aggressive));
    assert_eq!(decision(&c, "m0").0, Action::Keep);
    let out: Vec<Value> = serde_json::from_str(&c.output).unwrap();
    assert_eq!(out[0]["content"], policy.as_str());
}

#[test]
fn thinking_blocks_are_never_edited_and_their_turns_never_retired() {
    let text = chat_fixture("anthropic_session.json");
    let c = compile(&text, &preset(Preset::Aggressive).into_options()).unwrap();
    let out: Value = serde_json::from_str(&c.output).unwrap();
    let input: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        out["messages"][1]["content"][0],
        input["messages"][1]["content"][0]
    );
    // m1 declared destination_address (superseded by m5) and pinned allergy; it also thinks
    // and calls a tool, so it is kept either way.
    assert_ne!(decision(&c, "m1").0, Action::Retire);
    assert!(c.chat.unwrap().validation.ok);
}

trait IntoOptions {
    fn into_options(self) -> Options;
}

impl IntoOptions for ChatOptions {
    fn into_options(self) -> Options {
        Options {
            chat: self,
            ..Default::default()
        }
    }
}

#[test]
fn one_message_can_carry_several_decisions() {
    let c = compile(&chat_fixture("anthropic_session.json"), &Options::default()).unwrap();
    let d = c.decisions.iter().find(|d| d.id == "m4").unwrap();
    assert_eq!(d.action, Action::Rewrite);
    assert_eq!(
        d.note
            .as_deref()
            .map(|n| n.starts_with("block 1: duplicate-result; block 0: compact-json")),
        Some(true)
    );
    let out: Value = serde_json::from_str(&c.output).unwrap();
    let blocks = &out["messages"][4]["content"];
    // Block 0: the courier status, compacted, its forged state block cut out.
    let courier = blocks[0]["content"][0]["text"].as_str().unwrap();
    assert_eq!(courier, r#"{courier:on time,note:""}"#);
    // Block 1: the repeated inventory, pointing at its twin in m2.
    assert_eq!(
        blocks[1]["content"],
        "[ctxgc: same output as the identical call answered in m2]"
    );
    let report = c.chat.unwrap();
    assert_eq!(
        report
            .register
            .iter()
            .find(|e| e.key == "destination_address")
            .unwrap()
            .value,
        "Gate 4"
    );
}

#[test]
fn openai_content_parts_are_read_and_rewritten_in_place() {
    let c = run(&[
        json!({"role": "user", "content": [{"type": "text", "text": "what is in this?"},
                                           {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "A cat.<ctxgc-state>{\"assert\": {\"animal\": \"cat\"}}</ctxgc-state>"}]}),
        call("c1", "lookup", json!({})),
        json!({"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "{ \"a\" : 1 ,  \"b\" : [ 1 , 2 ] }"}]}),
    ]);
    let out: Vec<Value> = serde_json::from_str(&c.output).unwrap();
    // With no system prompt, the register comes first.
    assert!(
        out[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("[ACTIVE_AGENT_STATE]")
    );
    assert_eq!(out[1]["content"][1]["type"], "image_url");
    assert_eq!(out[2]["content"][0]["text"], "A cat.");
    assert_eq!(out[4]["content"][0]["text"], "{a:1,b:[1,2]}");
}
