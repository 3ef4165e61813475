//! Chat front-ends and back-ends: OpenAI Chat Completions, Anthropic Messages, OpenAI
//! Responses, wrappers and conversation records; bad input; conversion between formats;
//! byte-stable rendering of kept messages.

use ctxgc_core::chat::compile::{ChatInput, compile_doc, lower_chat_input};
use ctxgc_core::chat::{ChatOptions, Preset};
use ctxgc_core::validate::validate;
use ctxgc_core::{Action, Error, Format, Options, Reason, compile, receipt};
use serde_json::{Value, json};

mod common;
use common::chat_fixture;

fn to(format: Format) -> Options {
    Options {
        chat: ChatOptions {
            to: Some(format),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn every_chat_format_is_detected_and_written_back_in_kind() {
    for (name, format) in [
        ("airline_cabin_change.json", Format::OpenaiChat),
        ("anthropic_session.json", Format::Anthropic),
        ("responses_session.json", Format::Responses),
    ] {
        let c = compile(&chat_fixture(name), &Options::default()).unwrap();
        assert_eq!(c.format, format, "{name}");
        assert!(validate(format, &c.output).unwrap().is_empty(), "{name}");
        assert!(c.tokens_after < c.tokens_before, "{name}");
    }
}

#[test]
fn every_field_beside_the_messages_keeps_its_bytes() {
    let text = r#"{"model": "gpt-4o", "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
                   "messages": [{"role": "user", "content": "hi"}], "temperature": 0.70}"#;
    let c = compile(text, &Options::default()).unwrap();
    assert_eq!(
        c.output,
        r#"{"model":"gpt-4o","tools":[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],"messages":[{"role": "user", "content": "hi"}],"temperature":0.70}"#
    );
}

#[test]
fn kept_messages_are_written_from_their_original_bytes() {
    let text = chat_fixture("corpus_samples.jsonl");
    let ChatInput::Records(records) = lower_chat_input(&text, None).unwrap() else {
        panic!("records expected")
    };
    for r in &records {
        let (c, session) = compile_doc(&r.doc, &r.raw, &Options::default()).unwrap();
        for (i, item) in session.items().iter().enumerate() {
            if c.decisions[i].action == Action::Keep {
                assert!(c.output.contains(&item.raw), "{} {}", r.id, item.id);
            }
        }
    }
}

#[test]
fn openai_tool_call_forms_and_legacy_function_calls() {
    let long = "x".repeat(300);
    let text = json!([
        {"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "f", "arguments": "{\"q\": 1}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": long},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "b", "type": "function", "function": {"name": "f", "arguments": "{ \"q\" : 1 }"}}]},
        {"role": "tool", "tool_call_id": "b", "content": long},
        {"role": "assistant", "content": null, "function_call": {"name": "g", "arguments": "{not json"}},
        {"role": "function", "name": "g", "content": long},
        {"role": "assistant", "content": null, "function_call": {"name": "g", "arguments": "{not json"}},
        {"role": "function", "name": "g", "content": long},
    ])
    .to_string();
    let c = compile(&text, &Options::default()).unwrap();
    // Arguments compare as JSON values: spacing does not make another call.
    let d = |id: &str| c.decisions.iter().find(|d| d.id == id).unwrap().clone();
    assert_eq!(d("m3").reason, Some(Reason::DuplicateResult));
    // Unparsable arguments are kept as text and still compare; legacy results pair by name.
    assert_eq!(d("m7").reason, Some(Reason::DuplicateResult));
    assert_eq!(d("m7").by, ["m5"]);
    assert!(c.output.contains("{not json"));
    assert!(c.chat.unwrap().validation.ok);
}

#[test]
fn anthropic_system_prompt_bytes_stay_when_there_is_no_register() {
    let text = r#"{"system": "Be  brief.", "messages": [{"role": "user", "content": "hi"}]}"#;
    let c = compile(text, &Options::default()).unwrap();
    assert_eq!(
        c.output,
        r#"{"system":"Be  brief.","messages":[{"role": "user", "content": "hi"}]}"#
    );
    // A register turns the system string into blocks without touching its text.
    let text = r#"{"system": "Be  brief.", "messages": [{"role": "user", "content": "hi"},
        {"role": "assistant", "content": "ok<ctxgc-state>{\"assert\": {\"k\": 1}}</ctxgc-state>"}]}"#;
    let c = compile(text, &Options::default()).unwrap();
    let out: Value = serde_json::from_str(&c.output).unwrap();
    assert_eq!(
        out["system"][0],
        json!({"type": "text", "text": "Be  brief."})
    );
    assert_eq!(
        out["system"][1]["text"],
        "[ACTIVE_AGENT_STATE]\n- k = 1 (m1, declared)"
    );
    // Compiled again: the old register block goes, a fresh one comes, nothing is stacked.
    let again = compile(&c.output, &Options::default()).unwrap();
    let out: Value = serde_json::from_str(&again.output).unwrap();
    assert_eq!(out["system"].as_array().unwrap().len(), 2);
    assert_eq!(again.output, c.output);
}

#[test]
fn a_bare_anthropic_list_with_a_register_becomes_an_object_and_says_so() {
    let text = json!([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "ok<ctxgc-state>{\"assert\": {\"k\": 1}}</ctxgc-state>"},
                                          {"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "done"}]}
    ])
    .to_string();
    let c = compile(&text, &Options::default()).unwrap();
    assert_eq!(c.format, Format::Anthropic);
    assert!(
        c.warnings
            .iter()
            .any(|w| w.message.contains("the output is an object"))
    );
    let out: Value = serde_json::from_str(&c.output).unwrap();
    assert!(
        out["system"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("[ACTIVE_AGENT_STATE]")
    );
    assert!(validate(Format::Anthropic, &c.output).unwrap().is_empty());
}

#[test]
fn a_responses_string_input_is_one_user_message() {
    let c = compile(
        r#"{"model": "gpt-5", "input": "hello"}"#,
        &Options::default(),
    )
    .unwrap();
    assert_eq!(c.format, Format::Responses);
    assert_eq!(c.output, r#"{"model":"gpt-5","input":"hello"}"#);
}

#[test]
fn records_compile_one_by_one_with_ids_and_receipts() {
    let text = chat_fixture("corpus_samples.jsonl");
    let c = compile(&text, &Options::default()).unwrap();
    assert_eq!(c.records.len(), 4);
    assert_eq!(c.output.lines().count(), 4);
    for (line, record) in c.output.lines().zip(&c.records) {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["id"], record.id.as_str());
        assert!(v.get("meta").is_some(), "other fields are kept");
    }
    let rewritten = c
        .decisions
        .iter()
        .find(|d| d.action != Action::Keep)
        .unwrap();
    assert!(rewritten.id.contains('#'));
    let (raw, decision) = receipt(&text, &Options::default(), &rewritten.id).unwrap();
    assert_eq!(decision.action, rewritten.action);
    assert!(
        text.contains(&raw),
        "the receipt is the exact bytes of the input"
    );
    let err = receipt(&text, &Options::default(), "no-such-record#m1").unwrap_err();
    assert!(err.to_string().contains("no record with id"));
}

#[test]
fn bad_input_is_a_clear_error_naming_item_and_field() {
    let cases = [
        (
            r#"[{"role": "user", "content": "a"}, {"role": "user", "content": }]"#,
            "malformed JSON at line 1",
        ),
        (
            r#"[{"content": "no role"}]"#,
            "items have neither `role` (messages) nor `type` (events)",
        ),
        (
            r#"[{"role": "user", "content": {"text": 1}}]"#,
            "field \"content\": expected a string, a list of parts or null, found object",
        ),
        (
            r#"[{"role": "tool", "content": "x"}]"#,
            "field \"tool_call_id\": missing",
        ),
        (
            r#"[{"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {}}]}]"#,
            "field \"tool_calls[0].function.name\"",
        ),
        (
            r#"{"system": "s", "messages": [{"role": "system", "content": "x"}]}"#,
            "the system prompt goes in the top-level `system` field",
        ),
        (
            r#"{"system": "s", "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]}"#,
            "field \"content[0].tool_use_id\"",
        ),
        (
            r#"{"input": [{"type": "function_call", "name": "f"}]}"#,
            "field \"call_id\": missing",
        ),
        (
            r#"[{"role": "user", "content": "a"}, 3]"#,
            "item 1: expected a JSON object, found number",
        ),
    ];
    for (text, needle) in cases {
        let err = compile(text, &Options::default()).unwrap_err();
        assert!(err.to_string().contains(needle), "{text}\n-> {err}");
    }
    let forced = Options {
        from: Some(Format::OpenaiChat),
        ..Default::default()
    };
    let err = compile(r#"[{"content": "no role"}]"#, &forced).unwrap_err();
    assert!(
        err.to_string()
            .contains("item 0 (id \"m0\"): field \"role\": missing"),
        "{err}"
    );
    let jsonl = "{\"id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}\n{\"id\": \"b\", \"messages\": [{\"role\": \"bot\", \"content\": \"x\"}]}\n";
    let err = compile(jsonl, &Options::default()).unwrap_err().to_string();
    assert!(
        err.contains("line 2 (record \"b\"): message 0: unknown role \"bot\""),
        "{err}"
    );
    let err = ctxgc_core::error::decode_utf8(b"[{\"role\": \"user\", \"content\": \"\xff\"}]")
        .unwrap_err();
    assert!(matches!(
        err,
        Error::InvalidUtf8 {
            offset: 30,
            line: 1
        }
    ));
}

#[test]
fn conversion_between_formats_stays_valid() {
    for (name, from) in [
        ("airline_cabin_change.json", Format::OpenaiChat),
        ("anthropic_session.json", Format::Anthropic),
        ("responses_session.json", Format::Responses),
        ("corpus_samples.jsonl", Format::OpenaiChat),
    ] {
        for target in [Format::OpenaiChat, Format::Anthropic, Format::Responses] {
            let c = compile(&chat_fixture(name), &to(target)).unwrap();
            assert_eq!(c.format, target);
            let reports: Vec<_> = if c.records.is_empty() {
                vec![c.chat.clone().unwrap()]
            } else {
                c.records
                    .iter()
                    .map(|r| r.compiled.chat.clone().unwrap())
                    .collect()
            };
            for r in reports {
                assert!(
                    r.validation.ok,
                    "{name} {from:?} -> {target:?}: {:?}",
                    r.validation.new_violations
                );
            }
        }
    }
    // What the target cannot hold is reported, not dropped silently.
    let c = compile(
        &chat_fixture("anthropic_session.json"),
        &to(Format::OpenaiChat),
    )
    .unwrap();
    assert!(
        c.warnings
            .iter()
            .any(|w| w.message.contains("reasoning, image or other"))
    );
}

#[test]
fn earlier_output_is_a_stable_prefix_when_messages_are_appended() {
    // Compaction happens on arrival: in the lossless preset nothing already sent changes.
    let text = chat_fixture("corpus_samples.jsonl");
    let lossless = Options {
        chat: ChatOptions {
            preset: Preset::Lossless,
            ..Default::default()
        },
        ..Default::default()
    };
    for line in text.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        let messages = record["messages"].as_array().unwrap();
        let full = compile(&Value::Array(messages.clone()).to_string(), &lossless).unwrap();
        let full_out: Vec<Value> = serde_json::from_str(&full.output).unwrap();
        for cut in [messages.len() / 3, messages.len() / 2, messages.len() - 1] {
            let part = compile(
                &Value::Array(messages[..cut].to_vec()).to_string(),
                &lossless,
            )
            .unwrap();
            let part_out: Vec<Value> = serde_json::from_str(&part.output).unwrap();
            assert_eq!(
                part_out[..],
                full_out[..part_out.len()],
                "{} cut {cut}",
                record["id"]
            );
        }
    }
}

#[test]
fn lower_conversations_gives_one_conversation_per_record() {
    let text = chat_fixture("corpus_samples.jsonl");
    let conversations =
        ctxgc_core::frontend::lower_conversations(&text, &Options::default()).unwrap();
    assert_eq!(conversations.len(), 4);
    assert_eq!(
        conversations[0].id,
        "tau-bench/airline/gpt-4o/task11/trial2"
    );
    assert!(
        conversations
            .iter()
            .all(|c| c.format == Format::OpenaiChat && !c.items.is_empty())
    );
    let one = ctxgc_core::frontend::lower_conversations(
        &chat_fixture("anthropic_session.json"),
        &Options::default(),
    )
    .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].format, Format::Anthropic);
    assert_eq!(one[0].items[0].id, "system");
}

#[test]
fn the_format_read_from_message_shapes_is_the_format_of_the_parsed_document() {
    use ctxgc_core::formats::detect::{chat_format_of, chat_format_of_text};
    let mut documents: Vec<String> = [
        "airline_cabin_change.json",
        "anthropic_session.json",
        "responses_session.json",
    ]
    .map(chat_fixture)
    .into_iter()
    .collect();
    // Each sampled corpus conversation as a bare message list, and as Anthropic and Responses.
    for line in chat_fixture("corpus_samples.jsonl")
        .lines()
        .filter(|l| !l.trim().is_empty())
    {
        let record: Value = serde_json::from_str(line).unwrap();
        let messages = record["messages"].to_string();
        for format in [Format::OpenaiChat, Format::Anthropic, Format::Responses] {
            if let Ok(c) = compile(&messages, &to(format)) {
                documents.push(c.output);
            }
        }
        documents.push(messages);
    }
    documents.extend(
        [
            r#"[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"x"},"not a block",{"type":"tool_use","id":"t","name":"f","input":{}}]}]"#,
            r#"[{"role":"user","content":"hi","type":"message","type":"function_call"}]"#,
            r#"[{"role":"user","content":[{"type":"tool_\u0072esult","tool_use_id":"t","content":"x"}]}]"#,
            r#"["a string", {"role":"user","content":"x"}]"#,
            r#"[{"type":null,"content":[{"type":7}]},{"type":"reasoning","summary":[]}]"#,
            r#"{"system":"s","messages":[{"role":"user","content":"x"}]}"#,
            "[]",
        ]
        .map(str::to_owned),
    );
    let mut formats = std::collections::BTreeSet::new();
    for doc in &documents {
        let doc = doc.trim();
        let parsed: Value = serde_json::from_str(doc).unwrap();
        let expected = chat_format_of(&parsed);
        assert_eq!(chat_format_of_text(doc).unwrap(), expected, "{doc}");
        formats.insert(expected.name());
    }
    assert_eq!(
        formats.len(),
        3,
        "every chat format is among the documents: {formats:?}"
    );
    assert!(chat_format_of_text("[{\"role\": ").is_err());
}
