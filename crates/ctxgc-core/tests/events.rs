//! Behaviour of the event-trace compiler on hand-written traces and on the TraceGC fixtures.

use ctxgc_core::frontend::events::{EventOptions, lower_events};
use ctxgc_core::{Action, Error, Options, Reason, Session, compile, receipt};
use serde_json::{Value, json};

mod common;
use common::tracegc_fixtures;

fn jsonl(events: &[Value]) -> String {
    events.iter().map(|e| format!("{e}\n")).collect()
}

/// One event of every type the reference schema defines, valid.
fn every_type() -> Vec<Value> {
    vec![
        json!({"id": "d", "type": "decision", "timestamp": 1, "content": "plan"}),
        json!({"id": "s", "type": "set_var", "timestamp": 2, "parent_id": "d", "key": "k", "value": [1, {"a": null}]}),
        json!({"id": "tc", "type": "tool_call", "timestamp": 3, "tool_name": "search", "arguments": {"q": "x"}}),
        json!({"id": "tr", "type": "tool_result", "timestamp": 4, "call_id": "tc", "result": {"hits": 2}}),
        json!({"id": "fr", "type": "file_read", "timestamp": 5, "path": "a.py"}),
        json!({"id": "fe", "type": "file_edit", "timestamp": 6, "path": "b.py", "diff_hash": "h1"}),
        json!({"id": "cr", "type": "command_run", "timestamp": 7, "command": "make", "exit_code": 0, "output": "ok"}),
        json!({"id": "tt", "type": "test_run", "timestamp": 8, "test_names": ["t1"], "exit_code": 0, "passed_count": 1, "failed_count": 0}),
        json!({"id": "br", "type": "build_run", "timestamp": 9, "exit_code": 0}),
        json!({"id": "gd", "type": "git_diff", "timestamp": 10, "diff_hash": "h2", "files_changed": ["b.py"]}),
        json!({"id": "gc", "type": "git_commit", "timestamp": 11, "commit_hash": "abc", "message": "fix"}),
        json!({"id": "er", "type": "error", "timestamp": 12, "message": "boom", "related_to": null}),
        json!({"id": "ar", "type": "artifact_created", "timestamp": 13, "artifact_type": "report", "path": "r.md"}),
        json!({"id": "rq", "type": "requirement", "timestamp": 14, "content": "fast"}),
        json!({"id": "cn", "type": "constraint", "timestamp": 15, "content": "no net"}),
        json!({"id": "vf", "type": "verification", "timestamp": 16, "content": "works", "passed": true}),
        json!({"id": "bx", "type": "decision", "timestamp": 17, "content": "dead end"}),
        json!({"id": "ab", "type": "abandon", "timestamp": 18, "parent_id": "bx", "ref_to": ["bx"]}),
    ]
}

#[test]
fn every_event_type_lowers_and_renders() {
    let out = compile(&jsonl(&every_type()), &Options::default()).unwrap();
    let expected = "\
[d] decision: plan
[s] k = [1,{\"a\":null}]
[tc] call search({\"q\":\"x\"})
[tr] result of tc: {\"hits\":2}
[fr] read a.py
[fe] edit b.py (h1)
[cr] $ make → exit 0 {\"output\":\"ok\"}
[tt] tests t1 → 1 passed, 0 failed, exit 0
[br] build → exit 0
[gd] git diff b.py (h2)
[gc] commit abc: fix
[er] error: boom
[ar] artifact report r.md
[rq] requirement: fast
[cn] constraint: no net
[vf] verify: works → passed
[receipts bx ab: inside branch abandoned by ab]
";
    assert_eq!(out.output, expected);
    assert!(out.tokens_after < out.tokens_before);
}

#[test]
fn each_required_field_is_checked() {
    // Remove each required field of each type in turn: every removal is reported by name.
    for event in every_type() {
        let ty = event["type"].as_str().unwrap().to_owned();
        let fields: Vec<String> = event.as_object().unwrap().keys().cloned().collect();
        for field in fields {
            if matches!(field.as_str(), "parent_id" | "related_to" | "output") {
                continue; // optional
            }
            let mut broken = event.clone();
            broken.as_object_mut().unwrap().remove(&field);
            // A valid first event, so the input is recognised as a trace whatever is missing.
            let text = jsonl(&[
                json!({"id": "ok", "type": "decision", "timestamp": 0, "content": "c"}),
                broken,
            ]);
            let err = lower_events(&text, &EventOptions::default())
                .err()
                .unwrap_or_else(|| panic!("{ty} without {field} must fail"));
            let msg = err.to_string();
            let expect = format!("field \"{field}\": missing required field");
            assert!(
                msg.contains(&expect) && msg.contains("item 1"),
                "{ty}/{field}: {msg}"
            );
        }
    }
}

#[test]
fn mistyped_fields_name_event_field_and_types() {
    let text = jsonl(&[
        json!({"id": "e1", "type": "command_run", "timestamp": 1, "command": "ls", "exit_code": "0"}),
        json!({"id": "e2", "type": "set_var", "timestamp": 2, "key": ["a", "b"], "value": 1}),
        json!({"id": "e3", "type": "command_run", "timestamp": 3, "command": "   ", "exit_code": 0}),
        json!({"id": 4, "type": "decision", "timestamp": "late", "content": "x"}),
    ]);
    let Err(Error::Invalid(problems)) = lower_events(&text, &EventOptions::default()) else {
        panic!("must be invalid");
    };
    let all: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        all,
        vec![
            "item 0 (id \"e1\"): field \"exit_code\": expected integer, found string",
            "item 1 (id \"e2\"): field \"key\": expected string, found array",
            "item 2 (id \"e3\"): field \"command\": must be a non-empty string",
            "item 3: field \"id\": expected string, found number",
            "item 3: field \"timestamp\": expected number, found string",
        ]
    );
}

#[test]
fn duplicate_ids_dangling_references_and_unknown_types() {
    let text = jsonl(&[
        json!({"id": "e1", "type": "decision", "timestamp": 1, "content": "a"}),
        json!({"id": "e1", "type": "decision", "timestamp": 2, "content": "b"}),
        json!({"id": "e2", "type": "decision", "timestamp": 3, "parent_id": "ghost", "content": "c"}),
        json!({"id": "e3", "type": "tool_result", "timestamp": 4, "call_id": "e1", "result": "r"}),
        json!({"id": "e4", "type": "abandon", "timestamp": 5, "ref_to": ["nowhere"]}),
    ]);
    let Err(Error::Invalid(problems)) = compile(&text, &Options::default()).map(|_| ()) else {
        panic!("must be invalid");
    };
    let all: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert_eq!(
        all,
        vec![
            "item 1 (id \"e1\"): field \"id\": duplicate id \"e1\"",
            "item 2 (id \"e2\"): field \"parent_id\": names no event: \"ghost\"",
            "item 3 (id \"e3\"): field \"call_id\": \"e1\" is not a tool_call event",
            "item 4 (id \"e4\"): field \"ref_to\": names no event: \"nowhere\"",
        ]
    );

    let unknown = jsonl(&[json!({"id": "u", "type": "telemetry", "timestamp": 1, "cpu": 3})]);
    let err = compile(&unknown, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown event type \"telemetry\""), "{err}");
    let mut options = Options::default();
    options.events.allow_unknown_types = true;
    let out = compile(&unknown, &options).unwrap();
    assert_eq!(out.output, "[u] telemetry {\"cpu\":3}\n");
}

#[test]
fn opaque_items_are_never_pruned() {
    let text = jsonl(&[
        json!({"id": "b", "type": "decision", "timestamp": 1, "content": "branch"}),
        json!({"id": "u", "type": "telemetry", "timestamp": 2, "parent_id": "b"}),
        json!({"id": "ab", "type": "abandon", "timestamp": 3, "parent_id": "u", "ref_to": ["b"]}),
    ]);
    let mut options = Options::default();
    options.events.allow_unknown_types = true;
    let out = compile(&text, &options).unwrap();
    assert_eq!(out.decisions[1].action, Action::Keep);
    assert!(out.output.contains("[u] telemetry"));
}

#[test]
fn malformed_json_and_invalid_utf8_are_reported() {
    let err = compile("[{\"id\": \"e1\", \"type\": ]", &Options::default()).unwrap_err();
    assert!(matches!(err, Error::Json { .. }), "{err}");
    assert!(err.to_string().contains("line 1, column"), "{err}");
    let err = compile(
        "{\"id\":\"e1\",\"type\":\"decision\",\"timestamp\":1,\"content\":\"a\"}\n{\"id\": oops}\n",
        &Options::default(),
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with("line 2: malformed JSON"),
        "{err}"
    );
    let err = ctxgc_core::error::decode_utf8(b"[{\"id\": \"\xff\"}]").unwrap_err();
    assert_eq!(
        err.to_string(),
        "input is not valid UTF-8: invalid byte at offset 9 (line 1)"
    );
    let err = compile("42", &Options::default()).unwrap_err();
    assert!(matches!(err, Error::UnknownFormat(_)));
    let err = compile("", &Options::default()).unwrap_err();
    assert!(err.to_string().contains("empty"));
}

#[test]
fn a_50_mb_payload_compiles() {
    let big = "x".repeat(50 * 1024 * 1024);
    let text = jsonl(&[
        json!({"id": "c", "type": "tool_call", "timestamp": 1, "tool_name": "dump", "arguments": {}}),
        json!({"id": "r", "type": "tool_result", "timestamp": 2, "call_id": "c", "result": big}),
    ]);
    let session = ctxgc_core::compile::compile_event_session(&text, &Options::default()).unwrap();
    assert_eq!(session.items().len(), 2);
    let (raw, _) = receipt(&text, &Options::default(), "r").unwrap();
    assert_eq!(raw.len(), text.lines().nth(1).unwrap().len());
}

#[test]
fn all_tracegc_fixtures_compile_and_shrink() {
    let fixtures = tracegc_fixtures();
    assert_eq!(fixtures.len(), 9);
    for (name, text) in fixtures {
        let out = compile(&text, &Options::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(out.tokens_after < out.tokens_before, "{name}");
        assert!(!out.receipts.is_empty(), "{name}");
        // Nothing retired leaks: each retired event's line is absent from the output.
        let session =
            ctxgc_core::compile::compile_event_session(&text, &Options::default()).unwrap();
        for (i, d) in out.decisions.iter().enumerate() {
            let line = ctxgc_core::render::prompt::event_line(&session.items()[i]);
            if d.action == Action::Retire {
                assert!(!out.output.contains(&line), "{name}: {} leaked", d.id);
            } else if !matches!(
                session.items()[i].kind,
                ctxgc_core::Kind::EdgeInjection { .. }
            ) {
                assert!(out.output.contains(&line), "{name}: {} missing", d.id);
            }
        }
    }
}

#[test]
fn medium_fixtures_collapse_their_injected_cycle() {
    for (name, text) in tracegc_fixtures()
        .into_iter()
        .filter(|(n, _)| n.contains("medium"))
    {
        let out = compile(&text, &Options::default()).unwrap();
        let cyc: Vec<_> = out
            .decisions
            .iter()
            .filter(|d| d.reason == Some(Reason::Cycle))
            .collect();
        assert!(cyc.len() >= 2, "{name}: the injected edge closes a cycle");
        assert!(out.output.contains("cycle collapsed"), "{name}");
    }
}

#[test]
fn receipts_give_back_the_exact_bytes() {
    for (name, text) in tracegc_fixtures() {
        let out = compile(&text, &Options::default()).unwrap();
        let session =
            ctxgc_core::compile::compile_event_session(&text, &Options::default()).unwrap();
        for r in &out.receipts {
            let (raw, decision) = receipt(&text, &Options::default(), &r.id).unwrap();
            let i = session.position(&r.id).unwrap();
            assert_eq!(raw, session.items()[i].raw, "{name}/{}", r.id);
            assert!(
                text.contains(&raw),
                "{name}/{}: raw bytes are a slice of the input",
                r.id
            );
            assert_eq!(blake3::hash(raw.as_bytes()).to_hex().to_string(), r.hash);
            assert_eq!(decision.action, Action::Retire);
        }
    }
    let err = receipt(&tracegc_fixtures()[0].1, &Options::default(), "nope").unwrap_err();
    assert!(err.to_string().contains("no item with id \"nope\""));
}

#[test]
fn compiling_twice_is_byte_identical() {
    for (_, text) in tracegc_fixtures() {
        let a = serde_json::to_string(&compile(&text, &Options::default()).unwrap()).unwrap();
        let b = serde_json::to_string(&compile(&text, &Options::default()).unwrap()).unwrap();
        assert_eq!(a, b);
    }
}

#[test]
fn retain_until_expires_when_the_trace_passes_it() {
    let trace = |late: bool| {
        let mut events = vec![
            json!({"id": "e1", "type": "set_var", "timestamp": 10, "key": "x", "value": 1, "retain_until": 100}),
            json!({"id": "e2", "type": "set_var", "timestamp": 20, "key": "x", "value": 2}),
        ];
        if late {
            events.push(
                json!({"id": "e3", "type": "decision", "timestamp": 150, "content": "later"}),
            );
        }
        jsonl(&events)
    };
    let early = compile(&trace(false), &Options::default()).unwrap();
    assert_eq!(early.decisions[0].action, Action::Keep);
    assert_eq!(
        early.decisions[0].note.as_deref(),
        Some("protected by retention from superseded-var")
    );
    let late = compile(&trace(true), &Options::default()).unwrap();
    assert_eq!(late.decisions[0].action, Action::Retire);

    // Until an event id: protected until that event is in the trace.
    let by_event = |with: bool| {
        let mut events = vec![
            json!({"id": "e1", "type": "set_var", "timestamp": 1, "key": "x", "value": 1, "retain_until": "handoff"}),
            json!({"id": "e2", "type": "set_var", "timestamp": 2, "key": "x", "value": 2}),
        ];
        if with {
            events.push(json!({"id": "handoff", "type": "decision", "timestamp": 3, "content": "handed off"}));
        }
        jsonl(&events)
    };
    assert_eq!(
        compile(&by_event(false), &Options::default())
            .unwrap()
            .decisions[0]
            .action,
        Action::Keep
    );
    assert_eq!(
        compile(&by_event(true), &Options::default())
            .unwrap()
            .decisions[0]
            .action,
        Action::Retire
    );
}

#[test]
fn tags_and_importance_protect_from_every_pass() {
    let text = jsonl(&[
        json!({"id": "e1", "type": "set_var", "timestamp": 1, "key": "x", "value": 1, "tags": ["pinned"]}),
        json!({"id": "e2", "type": "set_var", "timestamp": 2, "key": "x", "value": 2, "importance": 9}),
        json!({"id": "e3", "type": "set_var", "timestamp": 3, "key": "x", "value": 3, "tags": ["misc"], "importance": "low"}),
        json!({"id": "e4", "type": "set_var", "timestamp": 4, "key": "x", "value": 4}),
    ]);
    let out = compile(&text, &Options::default()).unwrap();
    let actions: Vec<Action> = out.decisions.iter().map(|d| d.action).collect();
    assert_eq!(
        actions,
        vec![Action::Keep, Action::Keep, Action::Retire, Action::Keep]
    );
    let mut options = Options::default();
    options.retention.protected_tags = vec!["misc".into()];
    options.retention.min_importance = 10.0;
    let out = compile(&text, &options).unwrap();
    let actions: Vec<Action> = out.decisions.iter().map(|d| d.action).collect();
    assert_eq!(
        actions,
        vec![Action::Retire, Action::Retire, Action::Keep, Action::Keep]
    );
}

#[test]
fn stubs_cost_less_than_what_they_replace_on_generated_traces() {
    for seed in 0..5 {
        let text = ctxgc_core::synth::events_jsonl(3000, seed);
        let out = compile(&text, &Options::default()).unwrap();
        let retired = out
            .decisions
            .iter()
            .filter(|d| d.action == Action::Retire)
            .count();
        assert!(
            retired > 300,
            "seed {seed}: the generator makes dead work ({retired})"
        );
        assert!(out.tokens_after < out.tokens_before, "seed {seed}");
    }
}

#[test]
fn appending_one_by_one_equals_compiling_the_whole_trace() {
    for (name, text) in tracegc_fixtures() {
        let items = lower_events(&text, &EventOptions::default()).unwrap();
        let whole = ctxgc_core::compile::compile_event_session(&text, &Options::default()).unwrap();
        let mut session = Session::new(Default::default());
        for item in items {
            session.append(item).unwrap();
            session.compile();
        }
        assert_eq!(session.decisions(), whole.decisions(), "{name}");
        assert_eq!(
            ctxgc_core::render::prompt::render(&session).text,
            ctxgc_core::render::prompt::render(&whole).text,
            "{name}"
        );
    }
}

#[test]
fn the_caller_s_events_are_not_mutated_and_order_is_stable() {
    // Receipts are listed in input order, whatever ids hash to.
    let text = jsonl(&[
        json!({"id": "zz", "type": "set_var", "timestamp": 1, "key": "a", "value": 1}),
        json!({"id": "aa", "type": "set_var", "timestamp": 2, "key": "b", "value": 1}),
        json!({"id": "mm", "type": "set_var", "timestamp": 3, "key": "a", "value": 2}),
        json!({"id": "bb", "type": "set_var", "timestamp": 4, "key": "b", "value": 2}),
    ]);
    let out = compile(&text, &Options::default()).unwrap();
    let ids: Vec<&str> = out.receipts.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, vec!["zz", "aa"]);
}

#[test]
fn a_session_survives_a_serde_round_trip_and_resumes() {
    for (name, text) in tracegc_fixtures() {
        let items = lower_events(&text, &EventOptions::default()).unwrap();
        let (head, tail) = items.split_at(items.len() / 2);
        let mut session = Session::new(Default::default());
        session.extend(head.to_vec()).unwrap();
        session.compile();
        let stored = serde_json::to_string(&session).unwrap();
        let mut resumed: Session =
            serde_json::from_str(&stored).unwrap_or_else(|e| panic!("{name}: {e}"));
        resumed.extend(tail.to_vec()).unwrap();
        resumed.compile();
        let whole = ctxgc_core::compile::compile_event_session(&text, &Options::default()).unwrap();
        assert_eq!(resumed.decisions(), whole.decisions(), "{name}");
    }
}

/// A trace of `n` events, about 100 bytes each: large enough for [`lower_events`] to spread
/// it over every core.
fn large_trace(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| match i % 3 {
            0 => json!({"id": format!("c{i}"), "type": "tool_call", "timestamp": i, "tool_name": "search", "arguments": {"q": format!("query {}", i % 50)}}),
            1 => json!({"id": format!("r{i}"), "type": "tool_result", "timestamp": i, "call_id": format!("c{}", i - 1), "result": {"hits": i % 7, "top": "a result line"}}),
            _ => json!({"id": format!("v{i}"), "type": "set_var", "timestamp": i, "key": format!("k{}", i % 10), "value": i}),
        })
        .collect()
}

#[test]
fn a_large_trace_lowers_in_trace_order() {
    let events = large_trace(30_000);
    let text = jsonl(&events);
    assert!(
        text.len() > 2 << 20,
        "the trace must be large: {} bytes",
        text.len()
    );
    let items = lower_events(&text, &EventOptions::default()).unwrap();
    assert_eq!(items.len(), events.len());
    // Each item equals the same event lowered on its own, wherever the trace was cut.
    for (i, event) in events
        .iter()
        .enumerate()
        .step_by(997)
        .chain([(29_999, &events[29_999])])
    {
        let alone = lower_events(&event.to_string(), &EventOptions::default()).unwrap();
        assert_eq!(items[i], alone[0], "event {i}");
    }
}

#[test]
fn problems_of_a_large_trace_come_in_trace_order() {
    let mut events = large_trace(30_000);
    // Broken events at the start, the middle and the end: each thread finds some.
    for i in [0, 1, 14_999, 15_000, 29_999] {
        events[i].as_object_mut().unwrap().remove("timestamp");
    }
    events[20_001]["tool_name"] = json!(7);
    let text = jsonl(&events);
    let Err(Error::Invalid(problems)) = lower_events(&text, &EventOptions::default()) else {
        panic!("must be invalid");
    };
    let found: Vec<(usize, Option<&str>)> = problems
        .iter()
        .map(|p| (p.index, p.field.as_deref()))
        .collect();
    assert_eq!(
        found,
        [
            (0, Some("timestamp")),
            (1, Some("timestamp")),
            (14_999, Some("timestamp")),
            (15_000, Some("timestamp")),
            (20_001, Some("tool_name")),
            (29_999, Some("timestamp")),
        ]
    );
}

/// Events that exercise the member-by-member read: extra fields before and after payloads,
/// payloads a type does not use, escaped keys, nested objects, null and mistyped fields.
fn member_read_cases() -> Vec<String> {
    let mut cases: Vec<String> = every_type().iter().map(Value::to_string).collect();
    cases.extend(
        [
            r#"{"zeta":1,"id":"a","type":"set_var","timestamp":1,"result":[1],"key":"k","value":{"n":1.50},"arguments":{"x":1},"alpha":"\n"}"#,
            r#"{"i\u0064":"b","type":"tool_result","timestamp":2,"call_id":"tc","result":"r","value":3,"m":{"b":1,"a":2}}"#,
            r#"{"id":"c","type":"command_run","timestamp":3,"command":"ls   -la","exit_code":0,"env":{"B":"2","A":"1"},"output":null}"#,
            r#"{"id":"d","type":"test_run","timestamp":4,"test_names":["b","a"],"exit_code":1,"passed_count":1,"failed_count":1,"tags":["x"],"importance":"high","retain_until":"e"}"#,
            r#"{"id":"e","type":"build_run","timestamp":5,"exit_code":0,"target":{"t":[1,2]},"parent_id":null}"#,
            r#"{"id":"f","type":"verification","timestamp":6,"content":"ok","passed":true,"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18}"#,
            r#"{"id":"g","type":"file_read","timestamp":7,"path":7}"#,
            r#"{"id":"h","type":"tool_call","timestamp":8,"tool_name":"t"}"#,
            r#"{"id":"","type":"decision","timestamp":"x","content":"","supersedes":[1,""]}"#,
        ]
        .map(str::to_owned),
    );
    cases
}

#[test]
fn an_event_read_member_by_member_lowers_as_the_parsed_event_does() {
    // The front-end reads an event's members without building its object; `lower_event` takes
    // an event already parsed. Items and problems must be the same either way.
    let options = EventOptions {
        allow_unknown_types: true,
    };
    for (index, text) in member_read_cases().iter().enumerate() {
        let value: Value = serde_json::from_str(text).unwrap();
        let parsed = ctxgc_core::frontend::events::lower_event(0, text, value, &options)
            .map_err(|problems| problems.iter().map(ToString::to_string).collect::<Vec<_>>());
        let read = lower_events(text, &options).map_err(|e| match e {
            Error::Invalid(problems) => problems.iter().map(ToString::to_string).collect(),
            other => vec![other.to_string()],
        });
        assert_eq!(
            read.map(|mut items| items.remove(0)),
            parsed,
            "case {index}: {text}"
        );
    }
}

#[test]
fn extra_fields_keep_the_order_they_always_had() {
    // Payload fields are taken out as an ordered map's `swap_remove` takes them, so extra
    // fields come out as they did when events were read as maps.
    let text = r#"[{"id":"a","type":"set_var","timestamp":1,"key":"k","x":1,"value":2,"y":3,"z":4,"result":5,"arguments":6}]"#;
    let out = compile(text, &Options::default()).unwrap().output;
    assert_eq!(
        out,
        "[a] k = 2 {\"x\":1,\"z\":4,\"y\":3,\"result\":5,\"arguments\":6}\n"
    );
}

#[test]
fn a_broken_event_array_is_reported_as_a_broken_document() {
    // A large array is split by its structure alone; when it is not valid JSON the error is
    // the document's, as a validating read reports it, not an item's.
    let good = r#"{"id":"e1","type":"set_var","timestamp":1,"key":"x","value":1}"#;
    for broken in [
        format!(r#"[{good},{{"id":"e2","type":"set_var","timestamp":2,"key":"x","value":tru}}]"#),
        format!("[{good} {good}]"),
        format!("[{good},]"),
        format!("[{good}]]"),
        format!(r#"[{good},{{"id":"e2","value":{{"a":1]}}]"#),
        format!(
            "[{good},{{\"id\":\"e2\",\"type\":\"set_var\",\"timestamp\":2,\"key\":\"x\",\"value\":\"a\u{1}b\"}}]"
        ),
        format!("[{good},{good}"),
    ] {
        let expected = ctxgc_core::frontend::detect_and_split(&broken)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        let got = compile(&broken, &Options::default())
            .unwrap_err()
            .to_string();
        assert_eq!(got, expected, "{broken}");
        assert!(got.contains("malformed JSON"), "{got}");
        let lowered = lower_events(&broken, &EventOptions::default()).unwrap_err();
        assert_eq!(lowered.to_string(), expected);
    }
}

/// A trace that looks an order up twice and gets it back changed: `get_order` answered
/// `pending`, then `shipped`, with enough rows that a stub is shorter than the output.
fn order_polled_twice() -> String {
    let rows: Vec<Value> = (0..20)
        .map(|i| json!({"sku": format!("S{i}"), "name": format!("item number {i}"), "qty": i}))
        .collect();
    let mut events = Vec::new();
    for (n, status) in ["pending", "shipped"].iter().enumerate() {
        events.push(
            json!({"id": format!("c{n}"), "type": "tool_call", "timestamp": 2 * n,
            "tool_name": "get_order", "arguments": {"id": 7}}),
        );
        events.push(
            json!({"id": format!("r{n}"), "type": "tool_result", "timestamp": 2 * n + 1,
            "call_id": format!("c{n}"), "result": {"order": 7, "status": status, "items": rows}}),
        );
    }
    jsonl(&events)
}

#[test]
fn a_call_answered_again_differently_stubs_its_earlier_result_as_in_chats() {
    let text = order_polled_twice();
    let out = compile(&text, &Options::default()).expect("compiles");
    let earlier = out.decisions.iter().find(|d| d.id == "r0").expect("r0");
    assert_eq!(earlier.action, Action::Rewrite);
    assert_eq!(earlier.reason, Some(Reason::SupersededRead));
    assert_eq!(earlier.by, ["r1"]);
    assert!(out.output.contains(
        "[r0] result of c0: [ctxgc: superseded: the same call was made again in r1 and returned a different result;"
    ));
    // The newer answer and both calls are as they were; the original is the receipt.
    assert!(out.output.contains("\"status\":\"shipped\""));
    assert!(!out.output.contains("\"status\":\"pending\""));
    let (original, _) = receipt(&text, &Options::default(), "r0").expect("a receipt");
    assert!(original.contains("\"pending\""), "{original}");

    // The chat options apply to traces alike: the lossless preset stubs nothing, a tool kept
    // with --keep-tool is never touched, and a recall tool is named in the stub.
    let mut lossless = Options::default();
    lossless.chat.preset = ctxgc_core::chat::Preset::Lossless;
    let mut kept = Options::default();
    kept.chat.keep_tools = vec!["get_*".into()];
    for options in [lossless, kept] {
        let out = compile(&text, &options).expect("compiles");
        assert!(
            out.decisions.iter().all(|d| d.action == Action::Keep),
            "{:?}",
            out.decisions
        );
    }
    let mut recall = Options::default();
    recall.chat.expand_tool = Some("ctxgc_recall".into());
    let out = compile(&text, &recall).expect("compiles");
    assert!(
        out.output
            .contains("call ctxgc_recall with id \"r0\" for the full output]")
    );
}

#[test]
fn a_call_answered_again_identically_is_a_duplicate_even_with_a_keep_tool_elsewhere() {
    let call = |n: usize| {
        [
            json!({"id": format!("c{n}"), "type": "tool_call", "timestamp": 2 * n,
                "tool_name": "get_user", "arguments": {"id": 7}}),
            json!({"id": format!("r{n}"), "type": "tool_result", "timestamp": 2 * n + 1,
                "call_id": format!("c{n}"), "result": {"name": "Ada"}}),
        ]
    };
    let text = jsonl(&[call(0), call(1)].concat());
    let mut options = Options::default();
    options.chat.keep_tools = vec!["other_tool".into()];
    let out = compile(&text, &options).expect("compiles");
    for id in ["c1", "r1"] {
        let d = out.decisions.iter().find(|d| d.id == id).expect("decided");
        assert_eq!(d.reason, Some(Reason::DuplicateCall), "{id}");
        assert_eq!(d.by, ["c0", "r0"], "{id}");
    }
    options.chat.keep_tools = vec!["get_user".into()];
    let out = compile(&text, &options).expect("compiles");
    assert!(out.decisions.iter().all(|d| d.action == Action::Keep));
}
