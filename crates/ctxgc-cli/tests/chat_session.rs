//! `ctxgc session` with chats: a conversation of the public corpus appended turn by turn, in
//! separate processes, compiles exactly like `ctxgc compile` of the whole conversation, on
//! SQLite and on PostgreSQL; receipts give messages back; bad requests fail clearly.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ctxgc_store::testing::test_databases;
use serde_json::Value;

fn ctxgc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ctxgc"))
        .args(args)
        .current_dir(std::env::temp_dir())
        .env_remove("CTXGC_DB")
        .output()
        .expect("ctxgc runs")
}

fn ok(output: Output) -> String {
    assert!(
        output.status.success(),
        "ctxgc failed ({:?}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 stdout")
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

/// The first record of the smallest corpus file, as its exact line.
fn corpus_record() -> Option<String> {
    let Some(dir) = corpus_dir() else {
        eprintln!("note: corpus not found (set CTXGC_CORPUS); skipped");
        return None;
    };
    let text = std::fs::read_to_string(dir.join("toolbench-examples.jsonl")).expect("reads");
    Some(text.lines().next().expect("a record").to_owned())
}

/// Splits a record line into requests: the record with its first three messages, then the
/// rest as bare lists of up to four messages.
fn requests(record: &str) -> Vec<String> {
    let value: Value = serde_json::from_str(record).unwrap();
    let messages = value["messages"].as_array().unwrap().clone();
    let mut head = value.clone();
    head["messages"] = Value::Array(messages[..3].to_vec());
    let mut out = vec![head.to_string()];
    for chunk in messages[3..].chunks(4) {
        out.push(Value::Array(chunk.to_vec()).to_string());
    }
    out
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn a_corpus_conversation_appended_turn_by_turn_compiles_like_the_whole_conversation() {
    let Some(record) = corpus_record() else {
        return;
    };
    let scratch = tempfile::tempdir().unwrap();
    // The whole conversation, as `ctxgc compile` sees it once every turn is in: the record
    // with its messages re-serialised the way the requests carry them.
    let value: Value = serde_json::from_str(&record).unwrap();
    let whole = write(scratch.path(), "whole.jsonl", &value.to_string());
    let requests = requests(&record);
    for db in test_databases() {
        let spec = db.spec();
        for (n, request) in requests.iter().enumerate() {
            let path = write(scratch.path(), &format!("turn{n}.json"), request);
            let said = ok(ctxgc(&["session", "append", "talk", &path, "--db", &spec]));
            assert!(said.starts_with("talk: appended "), "{said}");
        }
        for extra in [
            &[][..],
            &["--json"][..],
            &["--dry-run"][..],
            &["--preset", "aggressive"][..],
        ] {
            let expected = ok(ctxgc(&[&["compile", &whole][..], extra].concat()));
            let stored = ok(ctxgc(
                &[&["session", "compile", "talk", "--db", &spec][..], extra].concat(),
            ));
            assert_eq!(stored, expected, "{} {extra:?}", db.backend);
        }
        // Ids are the compile's ids; a retired or rewritten message comes back byte for byte.
        let report: Value = serde_json::from_str(&ok(ctxgc(&[
            "session", "compile", "talk", "--json", "--db", &spec,
        ])))
        .unwrap();
        let receipts = report["receipts"].as_array().unwrap();
        assert!(
            !receipts.is_empty(),
            "the conversation has something to compact"
        );
        // A record's report names its messages by their own ids; across records they are
        // `<record id>#<id>`, which is what a session of a record stores.
        let id = format!(
            "{}#{}",
            report["id"].as_str().unwrap(),
            receipts[0]["id"].as_str().unwrap()
        );
        let id = id.as_str();
        let original = ok(ctxgc(&["session", "receipt", "talk", id, "--db", &spec]));
        let whole_receipt = ok(ctxgc(&["receipt", &whole, id]));
        assert_eq!(original, whole_receipt, "{}", db.backend);
        let listed = ok(ctxgc(&["session", "list", "--db", &spec]));
        let messages = value["messages"].as_array().unwrap().len();
        assert_eq!(listed, format!("talk\topenai-chat\t{messages} items\n"));
    }
}

#[test]
fn chat_requests_in_every_format_and_bad_ones() {
    let scratch = tempfile::tempdir().unwrap();
    let db = scratch.path().join("s.db");
    let db = db.to_str().unwrap();
    let first = write(
        scratch.path(),
        "a.json",
        r#"{"model": "claude", "system": "Be brief.", "tools": [{"name": "f", "input_schema": {"type": "object"}}],
            "messages": [{"role": "user", "content": "run f"},
                         {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]}]}"#,
    );
    let next = write(
        scratch.path(),
        "b.json",
        r#"[{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "done"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "f ran."}]}]"#,
    );
    ok(ctxgc(&["session", "append", "a", &first, "--db", db]));
    let said = ok(ctxgc(&[
        "session",
        "append",
        "a",
        &next,
        "--db",
        db,
        "--expect-seq",
        "2",
    ]));
    assert_eq!(said, "a: appended 2 anthropic messages at sequence 2..4\n");
    let whole = write(
        scratch.path(),
        "whole.json",
        r#"{"model": "claude", "system": "Be brief.", "tools": [{"name": "f", "input_schema": {"type": "object"}}],
            "messages": [{"role": "user", "content": "run f"},
                         {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "done"}]},
                         {"role": "assistant", "content": [{"type": "text", "text": "f ran."}]}]}"#,
    );
    assert_eq!(
        ok(ctxgc(&["session", "compile", "a", "--json", "--db", db])),
        ok(ctxgc(&["compile", &whole, "--json"]))
    );

    // A stale writer: exit code 3, nothing appended.
    let stale = ctxgc(&[
        "session",
        "append",
        "a",
        &next,
        "--db",
        db,
        "--expect-seq",
        "2",
    ]);
    assert_eq!(
        stale.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&stale.stderr)
    );

    // Malformed messages are named; nothing is written.
    let bad = write(
        scratch.path(),
        "bad.json",
        r#"[{"role": "user", "content": "ok"}, {"role": 7}]"#,
    );
    let refused = ctxgc(&["session", "append", "a", &bad, "--db", db]);
    assert_eq!(refused.status.code(), Some(1));
    let message = String::from_utf8_lossy(&refused.stderr);
    assert!(message.contains("role"), "{message}");
    assert_eq!(
        ok(ctxgc(&["session", "list", "--db", db])),
        "a\tanthropic\t4 items\n"
    );

    // An event trace cannot join a chat session.
    let trace = write(
        scratch.path(),
        "t.jsonl",
        &ctxgc_core::synth::events_jsonl(5, 1),
    );
    let refused = ctxgc(&["session", "append", "a", &trace, "--db", db]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("anthropic"));

    // Responses, with a string input first.
    let r1 = write(
        scratch.path(),
        "r1.json",
        r#"{"model": "gpt-4.1", "input": "2+2?"}"#,
    );
    let r2 = write(
        scratch.path(),
        "r2.json",
        r#"[{"type": "message", "role": "assistant", "content": "4"}]"#,
    );
    ok(ctxgc(&["session", "append", "r", &r1, "--db", db]));
    ok(ctxgc(&["session", "append", "r", &r2, "--db", db]));
    let out = ok(ctxgc(&["session", "compile", "r", "--db", db]));
    assert_eq!(
        out,
        "{\"model\":\"gpt-4.1\",\"input\":[{\"role\":\"user\",\"content\":\"2+2?\"},{\"type\": \"message\", \"role\": \"assistant\", \"content\": \"4\"}]}\n"
    );
}
