//! Defects found by an outside attack on the compiler, each reproduced on the input that
//! showed it: data destroyed by compiling an output again, system prompt text taken for a
//! register.

use ctxgc_core::chat::Preset;
use ctxgc_core::{Action, Compiled, Options, Reason, compile};
use serde_json::{Value, json};

mod common;
use common::{chat_fixture, preset_options};

fn run(text: &str, preset: Preset) -> Compiled {
    compile(text, &preset_options(preset)).expect("compiles")
}

const PRESETS: [Preset; 3] = [Preset::Lossless, Preset::Default, Preset::Aggressive];

/// Item 2: compiling the output of a compile again must change nothing. On the bundled
/// Anthropic fixture the second compile used to take the first compile's duplicate stub as a
/// newer, different read and stub the result it pointed at, so neither copy was left.
#[test]
fn item_2_compiling_an_output_again_changes_nothing() {
    for name in [
        "anthropic_session.json",
        "airline_cabin_change.json",
        "responses_session.json",
    ] {
        for preset in PRESETS {
            let first = run(&chat_fixture(name), preset);
            let second = run(&first.output, preset);
            assert_eq!(
                second.output,
                first.output,
                "{name} ({}): compiling the output again changed it",
                preset.name()
            );
            for d in &second.decisions {
                assert!(
                    d.action == Action::Keep || d.reason == Some(Reason::Register),
                    "{name} ({}): the second compile decided {d:?}",
                    preset.name()
                );
            }
        }
    }

    // The shape of the report: the first compile stubs the later identical result, and the
    // earlier one, which the stub points at, survives every later compile.
    let first = run(&chat_fixture("anthropic_session.json"), Preset::Default);
    assert!(
        first
            .output
            .contains("[ctxgc: same output as the identical call answered in m2]")
    );
    let mut text = first.output.clone();
    for _ in 0..3 {
        let again = run(&text, Preset::Default);
        assert!(again.output.contains("Peanut Butter 500g"));
        assert!(!again.output.contains("returned a different result"));
        text = again.output;
    }
}

/// Stubs of an earlier compile in a hand-made chat: a duplicate stub is never a newer read,
/// and a sampled output is never sampled or superseded again.
#[test]
fn item_2_a_stub_is_never_evidence() {
    let call = |id: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "get_order", "arguments": "{\"id\":7}"}}]})
    };
    let rows: Vec<Value> = (0..40)
        .map(|n| json!({"sku": format!("S{n}"), "qty": n}))
        .collect();
    let chat = json!([
        {"role": "system", "content": "You handle orders."},
        {"role": "user", "content": "Show order 7."},
        call("c1"),
        {"role": "tool", "tool_call_id": "c1", "content": Value::Array(rows).to_string()},
        call("c2"),
        {"role": "tool", "tool_call_id": "c2", "content": "[ctxgc: same output as the identical call answered in m3]"},
        call("c3"),
        {"role": "tool", "tool_call_id": "c3", "content": "[ctxgc: output sampled, row numbers 1-based; $: 10 of 40 rows shown; shown rows keep every field; the full output is kept by the operator (ctxgc receipt m7)]\n[]"},
        {"role": "user", "content": "Thanks."}
    ]);
    let text = chat.to_string();
    let out = run(&text, Preset::Aggressive);
    for id in ["m5", "m7"] {
        let d = out.decisions.iter().find(|d| d.id == id).expect("decision");
        assert_eq!(d.action, Action::Keep, "{id}: {d:?}");
    }
    // m3 may be sampled (it is bulky) but never called superseded by a stub.
    let m3 = out.decisions.iter().find(|d| d.id == "m3").expect("m3");
    assert_ne!(m3.reason, Some(Reason::SupersededRead), "{m3:?}");
    assert!(!out.output.contains("returned a different result"));
}

fn system_content(output: &str, index: usize) -> Value {
    let v: Value = serde_json::from_str(output).expect("output is JSON");
    v[index]["content"].clone()
}

fn declaring_turns() -> Vec<Value> {
    vec![
        json!({"role": "user", "content": "Move me to business."}),
        json!({"role": "assistant", "content": "Done.\n<contextgc-state>{\"assert\": {\"cabin_class\": \"business\"}}</contextgc-state>"}),
    ]
}

/// Item 3: only a register ctxgc wrote is replaced; any other system text stays byte for
/// byte (under every preset), wherever it is and whatever it opens with.
#[test]
fn item_3_only_a_register_ctxgc_wrote_is_replaced() {
    let policy = "[ACTIVE_AGENT_STATE]\n- tone = \"formal\" (policy, declared)\nNever reveal a PIN.\nEscalate refunds over $500.";
    for preset in PRESETS {
        // A system prompt that opens with the header and says more.
        let mut chat = vec![json!({"role": "system", "content": policy})];
        chat.extend(declaring_turns());
        let out = run(&Value::Array(chat).to_string(), preset);
        assert_eq!(system_content(&out.output, 0), policy, "{}", preset.name());
        let d = &out.decisions[0];
        assert_eq!(d.action, Action::Keep, "{}: {d:?}", preset.name());
        let register = out.chat.as_ref().expect("chat report");
        assert!(register.register.iter().all(|e| e.key != "tone"));

        // A later system message and a developer message that look exactly like a register.
        let lookalike = "[ACTIVE_AGENT_STATE]\n- cabin_class = \"economy\" (m0, declared)";
        let mut chat = vec![json!({"role": "system", "content": "You are an airline agent."})];
        chat.extend(declaring_turns());
        chat.push(json!({"role": "system", "content": lookalike}));
        chat.push(json!({"role": "developer", "content": lookalike}));
        chat.push(json!({"role": "user", "content": "Thanks."}));
        let text = Value::Array(chat).to_string();
        let out = run(&text, preset);
        let sent: Value = serde_json::from_str(&out.output).expect("JSON");
        let sent = sent.as_array().expect("a list");
        let later: Vec<&Value> = sent.iter().filter(|m| m["content"] == lookalike).collect();
        assert_eq!(later.len(), 2, "{}: {}", preset.name(), out.output);
        for id in ["m3", "m4"] {
            let d = out.decisions.iter().find(|d| d.id == id).expect("decision");
            assert_eq!(d.action, Action::Keep, "{}: {d:?}", preset.name());
        }

        // Anthropic: a string system that opens with the header, and a list system whose
        // second block does (not the last block, and a last block with other lines).
        let messages = json!([
            {"role": "user", "content": "Move me to business."},
            {"role": "assistant", "content": "Done.\n<contextgc-state>{\"assert\": {\"cabin_class\": \"business\"}}</contextgc-state>"},
            {"role": "user", "content": "Thanks."}
        ]);
        let systems = [
            json!(policy),
            json!([
                {"type": "text", "text": "You are an airline agent."},
                {"type": "text", "text": lookalike},
                {"type": "text", "text": "Be brief."}
            ]),
            json!([
                {"type": "text", "text": "You are an airline agent."},
                {"type": "text", "text": policy}
            ]),
        ];
        for system in systems {
            let doc = json!({"model": "m", "system": system.clone(), "messages": messages});
            let out = run(&doc.to_string(), preset);
            let sent: Value = serde_json::from_str(&out.output).expect("JSON");
            let texts: Vec<String> = match &sent["system"] {
                Value::String(s) => vec![s.clone()],
                Value::Array(blocks) => blocks
                    .iter()
                    .map(|b| b["text"].as_str().unwrap_or_default().to_owned())
                    .collect(),
                other => panic!("system became {other}"),
            };
            let given: Vec<String> = match &system {
                Value::String(s) => vec![s.clone()],
                Value::Array(blocks) => blocks
                    .iter()
                    .map(|b| b["text"].as_str().unwrap_or_default().to_owned())
                    .collect(),
                _ => unreachable!(),
            };
            // Every block given is sent as it was, then one fresh register.
            assert_eq!(texts[..given.len()], given[..], "{}", preset.name());
            assert_eq!(texts.len(), given.len() + 1, "{}: {texts:?}", preset.name());
            assert!(texts[given.len()].contains("cabin_class = \"business\""));
        }
    }
}

/// The register ctxgc writes is still replaced, never stacked, and its facts carried over.
#[test]
fn item_3_a_register_ctxgc_wrote_is_replaced_not_stacked() {
    let mut chat = vec![json!({"role": "system", "content": "You are an airline agent."})];
    chat.extend(declaring_turns());
    let first = run(&Value::Array(chat).to_string(), Preset::Default);
    let second = run(&first.output, Preset::Default);
    assert_eq!(second.output.matches("[ACTIVE_AGENT_STATE]").count(), 1);
    let report = second.chat.as_ref().expect("chat report");
    assert_eq!(report.register.len(), 1);
    assert!(report.register[0].carried);

    let doc = json!({"model": "m", "system": "Policy.", "messages": declaring_turns()});
    let first = run(&doc.to_string(), Preset::Lossless);
    let second = run(&first.output, Preset::Lossless);
    assert_eq!(second.output, first.output);
    assert_eq!(second.output.matches("[ACTIVE_AGENT_STATE]").count(), 1);
}

/// A chain of `n` set_var events, each the child of the one before, closed by one
/// edge_injection from the last to the first: one cycle of `n` items.
fn closed_chain(n: usize) -> String {
    let mut text = String::new();
    for k in 0..n {
        let mut event = json!({"id": format!("v{k}"), "type": "set_var", "timestamp": k,
                               "key": format!("k{}", k % 7), "value": k});
        if k > 0 {
            event["parent_id"] = json!(format!("v{}", k - 1));
        }
        text.push_str(&event.to_string());
        text.push('\n');
    }
    text.push_str(&json!({"id": "close", "type": "edge_injection", "src": format!("v{}", n - 1), "dst": "v0"}).to_string());
    text.push('\n');
    text
}

/// Item 1: a long cycle is found without recursion on its length (90 000 members used to
/// overflow the stack), and its justification is one id per member, so the report grows
/// linearly (every member used to list every other one).
#[test]
fn item_1_a_long_cycle_neither_overflows_nor_grows_quadratically() {
    let n = 90_000;
    let out = compile(&closed_chain(n), &Options::default()).expect("compiles");
    let members: Vec<_> = out
        .decisions
        .iter()
        .filter(|d| d.reason == Some(Reason::Cycle))
        .collect();
    assert_eq!(members.len(), n);
    assert!(members.iter().all(|d| d.action == Action::Retire));
    // One grouped justification: every member but the first names the first.
    assert!(members[0].by.is_empty());
    assert!(members[1..].iter().all(|d| d.by == ["v0"]));
    // The whole report stays linear: a few dozen bytes per member.
    let report = serde_json::to_string(&out.decisions).expect("serialises");
    assert!(report.len() < 100 * n, "{} bytes", report.len());
    // The rendered prompt is one receipt line for the whole cycle.
    assert_eq!(out.output.lines().count(), 1);
    assert!(out.output.starts_with("[receipts v0 v1 v2 "));
    assert!(out.output.ends_with(": cycle collapsed]\n"));
}

/// Item 5: a UTF-8 byte order mark before a chat document or a JSONL of records is not part
/// of the input: it compiles exactly as the same input without one.
#[test]
fn item_5_a_byte_order_mark_is_accepted() {
    let doc = chat_fixture("anthropic_session.json");
    let plain = run(&doc, Preset::Default);
    let marked = run(&format!("\u{feff}{doc}"), Preset::Default);
    assert_eq!(marked.output, plain.output);

    let records = "{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n\
                   {\"id\": \"b\", \"messages\": [{\"role\": \"user\", \"content\": \"yo\"}]}\n";
    let plain = run(records, Preset::Default);
    let marked = run(&format!("\u{feff}{records}"), Preset::Default);
    assert_eq!(marked.output, plain.output);
    assert_eq!(marked.records.len(), 2);
}

fn state_only() -> String {
    "<contextgc-state>{\"assert\": {\"gate\": \"4\"}}</contextgc-state>".to_owned()
}

/// Item 7: cutting a state block never leaves empty content (the placeholder says what was
/// there), and the validator refuses the empty content the providers refuse.
#[test]
fn item_7_stripping_a_state_block_never_leaves_empty_content() {
    use ctxgc_core::Format;
    use ctxgc_core::validate::{Rule, validate};
    let placeholder = "[ctxgc: this message held only a state block]";
    let block = state_only();
    let openai = json!([
        {"role": "user", "content": block},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": block},
        {"role": "assistant", "content": [{"type": "text", "text": block}]}
    ]);
    let anthropic = json!({"model": "m", "messages": [
        {"role": "user", "content": "Where to?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": block}]}]},
        {"role": "assistant", "content": "Gate 4."}
    ]});
    let responses = json!({"input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": block}]},
        {"type": "function_call", "call_id": "f1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "f1", "output": block},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": block}]}
    ]});
    for (format, doc) in [
        (Format::OpenaiChat, openai),
        (Format::Anthropic, anthropic),
        (Format::Responses, responses),
    ] {
        for preset in PRESETS {
            let out = run(&doc.to_string(), preset);
            let report = out.chat.as_ref().expect("chat report");
            assert!(report.validation.ok, "{format:?}: {:?}", report.validation);
            assert!(validate(format, &out.output).expect("JSON").is_empty());
            assert!(!out.output.contains("contextgc-state"), "{}", out.output);
            assert!(!out.output.contains("\"\""), "{format:?}: {}", out.output);
            assert!(!out.output.contains("[]"), "{format:?}: {}", out.output);
            assert!(
                out.output.contains(placeholder),
                "{format:?}: {}",
                out.output
            );
        }
    }

    // The validator refuses what the APIs refuse.
    let empty_list = r#"[{"role": "user", "content": []}]"#;
    assert_eq!(
        validate(Format::OpenaiChat, empty_list).unwrap()[0].rule,
        Rule::Content
    );
    let empty_input = r#"{"input": [{"type": "message", "role": "user", "content": []}]}"#;
    assert_eq!(
        validate(Format::Responses, empty_input).unwrap()[0].rule,
        Rule::Content
    );
    let empty_result = r#"[{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": ""}]}]}]"#;
    let found = validate(Format::Anthropic, empty_result).unwrap();
    assert!(
        found
            .iter()
            .any(|v| v.rule == Rule::Content && v.index == 1),
        "{found:?}"
    );
}

/// Item 8: two results for one call, and a key given twice in one object, are errors that
/// name the item and the key instead of being silently resolved.
#[test]
fn item_8_duplicate_results_and_duplicate_keys_are_errors() {
    let twice = json!([
        {"role": "user", "content": "Look it up."},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "first"},
        {"role": "tool", "tool_call_id": "c1", "content": "second"}
    ]);
    let err = compile(&twice.to_string(), &Options::default()).expect_err("refused");
    let message = err.to_string();
    assert!(
        message.contains("m3") && message.contains("tool_call_id"),
        "{message}"
    );
    assert!(
        message.contains("\"c1\"") && message.contains("m2"),
        "{message}"
    );

    let anthropic = r#"{"model": "m", "messages": [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a"},
                                     {"type": "tool_result", "tool_use_id": "t1", "content": "b"}]}]}"#;
    let message = compile(anthropic, &Options::default())
        .expect_err("refused")
        .to_string();
    assert!(
        message.contains("tool_use_id") && message.contains("\"t1\""),
        "{message}"
    );

    let keys = r#"[{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": "Gate 2.", "content": "Gate 4."}]"#;
    let message = compile(keys, &Options::default())
        .expect_err("refused")
        .to_string();
    assert!(
        message.contains("item 1") && message.contains("\"content\""),
        "{message}"
    );
    assert!(message.contains("duplicate key"), "{message}");

    let nested =
        r#"[{"role": "assistant", "content": [{"type": "text", "text": "a", "text": "b"}]}]"#;
    let message = compile(nested, &Options::default())
        .expect_err("refused")
        .to_string();
    assert!(message.contains("content[0].text"), "{message}");

    let event = "{\"id\": \"e1\", \"type\": \"set_var\", \"timestamp\": 1, \"key\": \"x\", \"value\": 1, \"value\": 2}\n";
    let message = compile(event, &Options::default())
        .expect_err("refused")
        .to_string();
    assert!(
        message.contains("e1") && message.contains("\"value\""),
        "{message}"
    );

    let envelope = r#"{"messages": [{"role": "user", "content": "a"}], "messages": [{"role": "user", "content": "b"}]}"#;
    let message = compile(envelope, &Options::default())
        .expect_err("refused")
        .to_string();
    assert!(message.contains("\"messages\""), "{message}");
}
