//! A live chat session ([`ctxgc_core::chat::live::LiveChat`]) fed a conversation message by
//! message gives what compiling the whole conversation gives: the same output bytes and the
//! same decisions, on every conversation of the public corpora (read through
//! `CTXGC_CORPUS`, else `../shared/corpus`; without it a note is printed and the corpus part
//! passes) and on the chat fixtures in every format, with each lossy and lossless preset.

use std::path::PathBuf;

use ctxgc_core::chat::Preset;
use ctxgc_core::chat::live::LiveChat;
use ctxgc_core::{Error, Options, compile};
use serde_json::Value;

mod common;
use common::{corpus_dir, preset_options};

/// Every preset, and the default preset compiled cache-stable (compaction steps priced after
/// each message, the register as of the last step), with the name each is reported under.
fn configurations() -> Vec<(&'static str, Options)> {
    let mut cache_stable = preset_options(Preset::Default);
    cache_stable.chat.cache = Some(ctxgc_core::session::CacheModel {
        // A session assumed to run long, so that the corpus's short runs take steps and
        // steps are compared too.
        min_reclaim_tokens: 100,
        min_expected_turns: 200.0,
        ..Default::default()
    });
    [Preset::Default, Preset::Lossless, Preset::Aggressive]
        .into_iter()
        .map(|p| (p.name(), preset_options(p)))
        .chain([("cache-stable", cache_stable)])
        .collect()
}

/// The list with its first `n` messages, as JSON text.
fn prefix(messages: &[Value], n: usize) -> String {
    serde_json::to_string(&messages[..n]).expect("messages serialise")
}

/// Feeds `messages` one by one after the first and compares with whole compiles at `checks`
/// prefix lengths (and at the end). Returns how many comparisons were made and how many
/// compaction steps the live session took.
fn replay(at: &str, messages: &[Value], options: &Options, every: usize) -> (usize, usize) {
    let mut live = LiveChat::new(&prefix(messages, 1), options)
        .unwrap_or_else(|e| panic!("{at}: the first message: {e}"));
    let mut compared = 0;
    for n in 2..=messages.len() {
        let message = messages[n - 1].to_string();
        match live.append(&message) {
            Ok(i) => assert_eq!(i, live.session().items().len() - 1),
            // A refused append says why; the whole compile is the caller's path then.
            Err(Error::Usage(why)) => {
                assert!(why.contains("compile the whole transcript"), "{at}: {why}");
                return (compared, live.session().compaction_steps().len());
            }
            Err(e) => panic!("{at}: message {n}: {e}"),
        }
        if n % every == 0 || n == messages.len() {
            let whole = compile(&prefix(messages, n), options)
                .unwrap_or_else(|e| panic!("{at}: whole compile of {n}: {e}"));
            let rendered = live.render().expect("renders");
            assert_eq!(
                rendered.text, whole.output,
                "{at}: output after {n} messages"
            );
            assert_eq!(
                live.session().decisions(),
                whole.decisions,
                "{at}: decisions after {n} messages"
            );
            // The message list kept item by item is the whole compile's, with its counts.
            if let Some(sent) = live.sent().expect("lists") {
                let list = format!(
                    "[{}]",
                    sent.messages
                        .iter()
                        .map(|m| m.json)
                        .collect::<Vec<_>>()
                        .join(",")
                );
                let output: Value = serde_json::from_str(&whole.output).expect("output parses");
                let items = match &output {
                    Value::Object(map) => map.get("messages").or_else(|| map.get("input")),
                    list => Some(list),
                };
                let listed: Value = serde_json::from_str(&list).expect("the list parses");
                assert_eq!(Some(&listed), items, "{at}: sent list after {n} messages");
                assert_eq!(
                    sent.tokens_before, whole.tokens_before,
                    "{at}: tokens before"
                );
                assert_eq!(sent.tokens_after, whole.tokens_after, "{at}: tokens after");
                let actions: Vec<_> = whole.decisions.iter().map(|d| d.action).collect();
                assert_eq!(sent.actions, actions.as_slice(), "{at}: actions");
            }
            compared += 1;
        }
    }
    (compared, live.session().compaction_steps().len())
}

#[test]
fn corpus_conversations_compile_the_same_live() {
    let Some(dir) = corpus_dir() else {
        eprintln!("note: corpus not found (set CTXGC_CORPUS); live replay skipped");
        return;
    };
    let (mut compared, mut steps) = (0, 0);
    for name in [
        "tau-bench-airline-gpt4o.jsonl",
        "tau2-bench-leaderboard.jsonl",
        "toolbench-examples.jsonl",
    ] {
        let text = std::fs::read_to_string(dir.join(name)).expect("corpus file reads");
        // Every fourth record keeps the test quick; each is replayed message by message.
        for line in text.lines().filter(|l| !l.trim().is_empty()).step_by(4) {
            let record: Value = serde_json::from_str(line).expect("a record parses");
            let Some(messages) = record["messages"].as_array() else {
                continue;
            };
            if messages.len() < 2 {
                continue;
            }
            for (preset, options) in configurations() {
                let at = format!("{name} {} {preset}", record["id"]);
                let (n, s) = replay(&at, messages, &options, 5);
                compared += n;
                steps += s;
            }
        }
    }
    assert!(compared > 100, "only {compared} comparisons made");
    assert!(steps > 0, "no live session took a compaction step");
}

#[test]
fn fixtures_in_every_format_compile_the_same_live() {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat"));
    let mut compared = 0;
    for name in [
        "airline_cabin_change.json",
        "anthropic_session.json",
        "responses_session.json",
    ] {
        let text = std::fs::read_to_string(dir.join(name)).expect("fixture reads");
        let doc: Value = serde_json::from_str(&text).expect("fixture parses");
        let format = compile(&text, &Options::default())
            .expect("fixture compiles")
            .format;
        let messages = match &doc {
            Value::Array(list) => list.clone(),
            Value::Object(map) => map
                .get("messages")
                .or_else(|| map.get("input"))
                .and_then(Value::as_array)
                .cloned()
                .expect("fixture holds a list"),
            _ => panic!("{name}: not a document"),
        };
        for (preset, options) in configurations() {
            // The format given, as a caller that knows it does: a bare list of Anthropic
            // messages may not show its format in the first message.
            let options = Options {
                from: Some(format),
                ..options
            };
            compared += replay(&format!("{name} {preset}"), &messages, &options, 1).0;
        }
    }
    assert!(compared > 10, "only {compared} comparisons made");
}

#[test]
fn an_append_that_would_change_earlier_ids_is_refused() {
    let options = Options::default();
    let mut live = LiveChat::new(
        r#"[{"type": "message", "id": "msg_1", "role": "user", "content": "hi"}]"#,
        &options,
    )
    .expect("a Responses list");
    let err = live
        .append(r#"{"type": "message", "id": "msg_1", "role": "assistant", "content": "hello"}"#)
        .unwrap_err();
    assert!(err.to_string().contains("already taken"), "{err}");
    assert_eq!(live.session().items().len(), 1, "nothing was appended");
    // A message with a fresh id goes in, under that id.
    live.append(r#"{"type": "message", "id": "msg_2", "role": "assistant", "content": "hello"}"#)
        .expect("a fresh id");
    assert_eq!(live.session().items()[1].id, "msg_2");
}

#[test]
fn a_second_result_for_one_call_is_refused_and_forgotten() {
    let options = Options::default();
    let mut live = LiveChat::new(
        r#"[{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "1"}]"#,
        &options,
    )
    .expect("a call and its result");
    let err = live
        .append(r#"{"role": "tool", "tool_call_id": "c1", "content": "2"}"#)
        .unwrap_err();
    assert!(err.to_string().contains("second tool result"), "{err}");
    assert_eq!(live.session().items().len(), 2);
    live.append(r#"{"role": "user", "content": "thanks"}"#)
        .expect("the session goes on");
    assert_eq!(live.session().items()[2].id, "m2");
}
