//! Chat sessions on every backend: conversations of the public corpus (and the same
//! conversations as Anthropic and Responses requests) appended a few messages at a time
//! compile byte for byte like the whole transcript, ids stay unique and stable, every message
//! is its own receipt, and bad appends write nothing.

mod common;

use std::path::PathBuf;

use ctxgc_core::chat::compile::{ChatInput, lower_chat_input};
use ctxgc_core::chat::lowering::Envelope;
use ctxgc_core::frontend::records::Record;
use ctxgc_core::render::messages::convert;
use ctxgc_core::session::Session;
use ctxgc_core::store::chat::{ChatAppend, append_chat};
use ctxgc_core::store::{StoreError, StoredSession};
use ctxgc_core::{Format, Options};
use ctxgc_store::Store;
use ctxgc_store::testing::{TestDb, test_databases};

fn on_every_backend(test: impl Fn(&TestDb)) {
    for db in test_databases() {
        eprintln!("backend: {}", db.backend);
        test(&db);
    }
}

fn corpus_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("CTXGC_CORPUS").map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/corpus"
            ))
        },
        PathBuf::from,
    );
    dir.is_dir().then_some(dir)
}

/// Conversations of every corpus file: the first and the last record (the sample stays small
/// enough for a debug build; the corpus compile tests cover every record).
fn corpus_sample() -> Vec<Record> {
    let Some(dir) = corpus_dir() else {
        eprintln!("note: corpus not found (set CTXGC_CORPUS); corpus chat sessions skipped");
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("corpus folder lists")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus file in {}", dir.display());
    let mut sample = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("corpus file reads");
        let ChatInput::Records(mut records) =
            lower_chat_input(&text, None).expect("corpus file lowers")
        else {
            panic!("{}: expected conversation records", file.display());
        };
        let last = records.pop().expect("a corpus file holds records");
        sample.push(records.swap_remove(0));
        sample.push(last);
    }
    sample
}

/// The message texts of a record's `messages`, in order.
fn message_texts(record: &Record) -> Vec<String> {
    record.doc.items.iter().map(|i| i.raw.clone()).collect()
}

/// A record's line with only `messages` replaced.
fn record_with(record: &Record, messages: &[String]) -> String {
    let Envelope::Object { entries, .. } = &record.doc.envelope else {
        panic!("a record is an object");
    };
    let fields: Vec<String> = entries
        .iter()
        .map(|(k, v)| {
            let value = if k == "messages" {
                format!("[{}]", messages.join(","))
            } else {
                v.clone()
            };
            format!("{}:{value}", serde_json::Value::String(k.clone()))
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// The conversation rebuilt as a request of `target`, nothing removed.
fn as_request(record: &Record, target: Format) -> String {
    let mut session = Session::with_passes(Default::default(), Vec::new());
    session
        .extend(record.doc.items.clone())
        .expect("items extend");
    session.compile();
    convert(&session, None, target).expect("converts").text
}

/// Chunk sizes 1, 2, 3, 4, 1, 2, ... over `n` messages.
fn chunks(n: usize) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut at, mut size) = (0, 1);
    while at < n {
        let end = (at + size).min(n);
        out.push(at..end);
        at = end;
        size = size % 4 + 1;
    }
    out
}

fn compiled_json(c: &ctxgc_core::Compiled) -> String {
    serde_json::to_string(c).expect("serialises")
}

/// Appends `whole`'s messages in chunks (the first with the envelope, then every second one
/// with it again and the others as bare lists), then checks the stored session against the
/// whole transcript.
fn round_trip(
    store: &mut ctxgc_store::AnyStore,
    context_id: &str,
    whole: &str,
    requests: Vec<String>,
) {
    let options = Options::default();
    let mut ids = Vec::new();
    for request in &requests {
        let appended = append_chat(store, context_id, request, &ChatAppend::default())
            .unwrap_or_else(|e| panic!("{context_id}: {e}"));
        assert_eq!(
            appended.range.end - appended.range.start,
            appended.ids.len() as u64
        );
        ids.extend(appended.ids);
    }
    let transcript = store.chat_transcript(context_id).unwrap().expect("stored");
    let expected = ctxgc_core::compile(whole, &options).expect("whole transcript compiles");
    let stored = transcript
        .compile(&options)
        .expect("stored transcript compiles");
    assert_eq!(stored.output, expected.output, "{context_id}: output");
    assert_eq!(
        compiled_json(&stored),
        compiled_json(&expected),
        "{context_id}: report"
    );
    // Ids: unique, stable across appends, and the ones the compile reports.
    let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "{context_id}: ids unique");
    let stored_ids: Vec<&str> = transcript.messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(
        stored_ids,
        ids.iter().map(String::as_str).collect::<Vec<_>>()
    );
    let compiled_ids: Vec<&str> = expected.decisions.iter().map(|d| d.id.as_str()).collect();
    for id in &ids {
        assert!(
            compiled_ids.contains(&id.as_str()),
            "{context_id}: {id} not in the compile"
        );
    }
    // Every message is its own receipt, byte for byte.
    for m in &transcript.messages {
        let original = store
            .receipt(context_id, &m.id)
            .unwrap()
            .expect("receipt stored");
        assert_eq!(original, m.raw.as_bytes(), "{context_id}: receipt {}", m.id);
    }
    let info = store.info(context_id).unwrap().expect("listed");
    assert_eq!(info.items, transcript.messages.len() as u64);
}

#[test]
fn corpus_conversations_appended_in_turns_compile_like_the_whole_transcript() {
    let sample = corpus_sample();
    if sample.is_empty() {
        return;
    }
    on_every_backend(|db| {
        let mut store = db.open().unwrap();
        for (n, record) in sample.iter().enumerate() {
            let messages = message_texts(record);
            // OpenAI records, as the corpus has them.
            let requests: Vec<String> = chunks(messages.len())
                .into_iter()
                .enumerate()
                .map(|(k, r)| {
                    if k % 2 == 0 {
                        record_with(record, &messages[r])
                    } else {
                        format!("[{}]", messages[r].join(","))
                    }
                })
                .collect();
            round_trip(&mut store, &format!("openai-{n}"), &record.raw, requests);
            // The same conversation as Anthropic and Responses requests.
            for target in [Format::Anthropic, Format::Responses] {
                let whole = as_request(record, target);
                let doc = match lower_chat_input(&whole, Some(target)).expect("lowers") {
                    ChatInput::Doc(doc) => doc,
                    ChatInput::Records(_) => panic!("a document"),
                };
                let Envelope::Object { entries, items_key } = &doc.envelope else {
                    panic!("converted requests are objects");
                };
                let texts: Vec<String> = doc
                    .items
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| Some(*i) != doc.system_item)
                    .map(|(_, item)| item.raw.clone())
                    .collect();
                let requests: Vec<String> = chunks(texts.len())
                    .into_iter()
                    .enumerate()
                    .map(|(k, r)| {
                        let list = format!("[{}]", texts[r].join(","));
                        if k % 2 == 0 {
                            let fields: Vec<String> = entries
                                .iter()
                                .map(|(key, v)| {
                                    let value = if key == items_key { &list } else { v };
                                    format!("{}:{value}", serde_json::Value::String(key.clone()))
                                })
                                .collect();
                            format!("{{{}}}", fields.join(","))
                        } else {
                            list
                        }
                    })
                    .collect();
                round_trip(
                    &mut store,
                    &format!("{}-{n}", target.name()),
                    &whole,
                    requests,
                );
            }
        }
    });
}

#[test]
fn the_latest_envelope_wins_and_a_bare_list_keeps_it() {
    on_every_backend(|db| {
        let mut store = db.open().unwrap();
        let first = r#"{"model": "a", "system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]}"#;
        let appended = append_chat(&mut store, "c", first, &ChatAppend::default()).unwrap();
        assert_eq!(
            (appended.format, appended.envelope_replaced),
            (Format::Anthropic, true)
        );
        let next = r#"[{"role": "assistant", "content": [{"type": "text", "text": "hello"}]}]"#;
        let appended = append_chat(&mut store, "c", next, &ChatAppend::default()).unwrap();
        assert!(!appended.envelope_replaced);
        let third = r#"{"model": "b", "system": "Be kind.", "messages": [{"role": "user", "content": "bye"}]}"#;
        append_chat(&mut store, "c", third, &ChatAppend::default()).unwrap();
        let transcript = db.open().unwrap().chat_transcript("c").unwrap().unwrap();
        assert_eq!(
            transcript.text(),
            r#"{"model":"b","system":"Be kind.","messages":[{"role": "user", "content": "hi"},{"role": "assistant", "content": [{"type": "text", "text": "hello"}]},{"role": "user", "content": "bye"}]}"#
        );
        assert_eq!(
            store.info("c").unwrap().unwrap().format,
            Some(Format::Anthropic)
        );
    });
}

#[test]
fn a_responses_string_input_becomes_the_user_message_it_stands_for() {
    on_every_backend(|db| {
        let mut store = db.open().unwrap();
        let first = r#"{"model": "gpt-4.1", "input": "What is 2+2?"}"#;
        append_chat(&mut store, "r", first, &ChatAppend::default()).unwrap();
        let next = r#"{"model": "gpt-4.1", "input": [{"type": "message", "role": "assistant", "content": "4"}]}"#;
        let appended = append_chat(&mut store, "r", next, &ChatAppend::default()).unwrap();
        assert_eq!(appended.range, 1..2);
        let transcript = store.chat_transcript("r").unwrap().unwrap();
        assert_eq!(
            transcript.text(),
            r#"{"model":"gpt-4.1","input":[{"role":"user","content":"What is 2+2?"},{"type": "message", "role": "assistant", "content": "4"}]}"#
        );
        assert_eq!(transcript.format, Format::Responses);
    });
}

#[test]
fn bad_appends_write_nothing() {
    on_every_backend(|db| {
        let mut store = db.open().unwrap();
        let first =
            r#"{"input": [{"type": "message", "id": "msg_1", "role": "user", "content": "hi"}]}"#;
        append_chat(&mut store, "r", first, &ChatAppend::default()).unwrap();
        // A provider id already in the session would rename the stored message.
        let repeat =
            r#"[{"type": "message", "id": "msg_1", "role": "assistant", "content": "hello"}]"#;
        let err = append_chat(&mut store, "r", repeat, &ChatAppend::default()).unwrap_err();
        assert!(matches!(err, StoreError::Rejected { .. }), "{err}");
        assert!(err.to_string().contains("\"msg_1\""), "{err}");
        // Malformed JSON, named by message.
        let err = append_chat(
            &mut store,
            "r",
            r#"[{"type": "message", "role": "user", "content": 7}, {]"#,
            &ChatAppend::default(),
        )
        .unwrap_err();
        assert!(matches!(err, StoreError::Rejected { .. }), "{err}");
        // A stale position.
        let ok = r#"[{"type": "message", "role": "assistant", "content": "hello"}]"#;
        let err = append_chat(
            &mut store,
            "r",
            ok,
            &ChatAppend {
                expected_len: Some(0),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Conflict {
                    expected: 0,
                    actual: 1,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(
            store.chat_transcript("r").unwrap().unwrap().messages.len(),
            1
        );
        let appended = append_chat(
            &mut store,
            "r",
            ok,
            &ChatAppend {
                expected_len: Some(1),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(appended.ids, ["m1"]);

        // Chats and item sessions do not mix, either way.
        let events = common::items(&common::set_var("e1", 1, "x", 1));
        let err = store
            .append("r", Format::Responses, 2, &events)
            .unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::FormatMismatch { .. } | StoreError::Rejected { .. }
            ),
            "{err}"
        );
        store.append("ev", Format::Events, 0, &events).unwrap();
        let err = append_chat(&mut store, "ev", ok, &ChatAppend::default()).unwrap_err();
        assert!(matches!(err, StoreError::FormatMismatch { .. }), "{err}");
        assert!(store.chat_transcript("ev").unwrap().is_none());
        // A stored session of items opens as before; a chat session refuses items.
        let mut session =
            StoredSession::open(&mut store, "r", Session::new(Default::default())).unwrap();
        assert!(session.append(Format::Events, events.clone()).is_err());
        assert_eq!(
            store.chat_transcript("r").unwrap().unwrap().messages.len(),
            2
        );
    });
}
