//! `ctxgc session`: a session appended in one process and compiled in another gives exactly
//! what `ctxgc compile` gives for the whole trace, on SQLite and on PostgreSQL.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use ctxgc_store::testing::test_databases;

fn ctxgc_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ctxgc"))
        .args(args)
        .current_dir(dir)
        .env_remove("CTXGC_DB")
        .output()
        .expect("ctxgc runs")
}

fn ctxgc(args: &[&str]) -> Output {
    ctxgc_in(&std::env::temp_dir(), args)
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

/// The anchor event traces, and a generated one that is always there.
fn traces(scratch: &Path) -> Vec<PathBuf> {
    let dir = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/anchor-fixtures/tracegc"
    ));
    let mut out: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect(),
        Err(_) => {
            eprintln!("note: no anchor fixtures at {}", dir.display());
            Vec::new()
        }
    };
    out.sort();
    let synth = scratch.join("synth.jsonl");
    std::fs::write(&synth, ctxgc_core::synth::events_jsonl(1500, 5)).unwrap();
    out.push(synth);
    out
}

#[test]
fn append_then_compile_in_new_processes_matches_compiling_the_whole_trace() {
    let scratch = tempfile::tempdir().unwrap();
    let traces = traces(scratch.path());
    for db in test_databases() {
        let spec = db.spec();
        for trace in &traces {
            let path = trace.to_str().unwrap();
            let context = format!("ctx-{}", trace.file_name().unwrap().to_string_lossy());
            ok(ctxgc(&["session", "append", &context, path, "--db", &spec]));
            for extra in [&[][..], &["--json"][..], &["--dry-run"][..]] {
                let whole = ok(ctxgc(&[&["compile", path][..], extra].concat()));
                let stored = ok(ctxgc(
                    &[&["session", "compile", &context, "--db", &spec][..], extra].concat(),
                ));
                assert_eq!(stored, whole, "{} on {} {extra:?}", path, db.backend);
            }
        }
    }
}

#[test]
fn a_trace_appended_in_parts_compiles_like_the_whole_trace() {
    let scratch = tempfile::tempdir().unwrap();
    let whole_text = ctxgc_core::synth::events_jsonl(1200, 9);
    let whole_path = scratch.path().join("whole.jsonl");
    std::fs::write(&whole_path, &whole_text).unwrap();
    let lines: Vec<&str> = whole_text.lines().collect();
    // The generator's references only point backwards, so any cut between lines is valid.
    let cuts = [0, 1, 250, 251, 900, lines.len()];
    for db in test_databases() {
        let spec = db.spec();
        for part in cuts.windows(2) {
            let text = lines[part[0]..part[1]].join("\n");
            let mut child = Command::new(env!("CARGO_BIN_EXE_ctxgc"))
                .args(["session", "append", "parts", "-", "--db", &spec])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
            let out = ok(child.wait_with_output().unwrap());
            assert_eq!(
                out,
                format!(
                    "parts: appended {} items at sequence {}..{}\n",
                    part[1] - part[0],
                    part[0],
                    part[1]
                )
            );
        }
        let whole = ok(ctxgc(&["compile", whole_path.to_str().unwrap(), "--json"]));
        let stored = ok(ctxgc(&[
            "session", "compile", "parts", "--db", &spec, "--json",
        ]));
        assert_eq!(stored, whole, "{}", db.backend);
        // Every item's original comes back as `ctxgc receipt` gives it.
        for id in ["e0", "e250", "e1199"] {
            let direct = ctxgc(&["receipt", whole_path.to_str().unwrap(), id]);
            let stored = ctxgc(&["session", "receipt", "parts", id, "--db", &spec]);
            assert_eq!(ok(stored.clone()), ok(direct.clone()), "{id}");
            assert_eq!(stored.stderr, direct.stderr, "decision of {id}");
        }
        let listed = ok(ctxgc(&["session", "list", "--db", &spec]));
        assert_eq!(listed, "parts\tevents\t1200 items\n");
    }
}

#[test]
fn the_default_database_is_under_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    std::fs::write(&trace, ctxgc_core::synth::events_jsonl(50, 1)).unwrap();
    ok(ctxgc_in(
        dir.path(),
        &["session", "append", "c", trace.to_str().unwrap()],
    ));
    assert!(dir.path().join(".ctxgc/ctxgc.db").is_file());
    // CTXGC_DB names another database.
    let elsewhere = dir.path().join("other.db");
    let out = Command::new(env!("CARGO_BIN_EXE_ctxgc"))
        .args(["session", "list"])
        .current_dir(dir.path())
        .env("CTXGC_DB", &elsewhere)
        .output()
        .unwrap();
    assert_eq!(ok(out), "");
    assert!(elsewhere.is_file());
    assert_eq!(
        ok(ctxgc_in(dir.path(), &["session", "list"])),
        "c\tevents\t50 items\n"
    );
}

#[test]
fn conflicts_unknown_sessions_and_bad_input_fail_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let db = db.to_str().unwrap();
    let trace = dir.path().join("t.jsonl");
    std::fs::write(&trace, ctxgc_core::synth::events_jsonl(20, 2)).unwrap();
    let trace = trace.to_str().unwrap();

    // --expect-seq: a writer that is behind gets exit code 3 and appends nothing.
    ok(ctxgc(&[
        "session",
        "append",
        "c",
        trace,
        "--db",
        db,
        "--expect-seq",
        "0",
    ]));
    let stale = ctxgc(&[
        "session",
        "append",
        "c",
        trace,
        "--db",
        db,
        "--expect-seq",
        "0",
    ]);
    assert_eq!(stale.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&stale.stderr).contains("already has 20 items"));

    // Appending the same items again is refused, naming the items.
    let again = ctxgc(&["session", "append", "c", trace, "--db", db]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("duplicate id \"e0\""));
    assert_eq!(
        ok(ctxgc(&["session", "list", "--db", db])),
        "c\tevents\t20 items\n"
    );

    let unknown = ctxgc(&["session", "compile", "nobody", "--db", db]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no session \"nobody\""));

    let no_item = ctxgc(&["session", "receipt", "c", "e999", "--db", db]);
    assert_eq!(no_item.status.code(), Some(2));

    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"id\": \"x1\", \"type\": \"set_var\", \"timestamp\": 1}\n",
    )
    .unwrap();
    let bad_append = ctxgc(&["session", "append", "c", bad.to_str().unwrap(), "--db", db]);
    assert_eq!(bad_append.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad_append.stderr).contains("field \"key\""));

    // A chat cannot join a session of events: refused before anything is written.
    let chat = dir.path().join("chat.json");
    std::fs::write(&chat, r#"[{"role": "user", "content": "hi"}]"#).unwrap();
    let refused = ctxgc(&["session", "append", "c", chat.to_str().unwrap(), "--db", db]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("openai-chat"));
    assert_eq!(
        ok(ctxgc(&["session", "list", "--db", db])),
        "c\tevents\t20 items\n"
    );

    let unreachable = ctxgc(&[
        "session",
        "list",
        "--db",
        "postgres://nobody:secret@127.0.0.1:1/none",
    ]);
    assert_eq!(unreachable.status.code(), Some(1));
    let message = String::from_utf8_lossy(&unreachable.stderr);
    assert!(message.contains("cannot connect"), "{message}");
    assert!(
        !message.contains("secret"),
        "the password was printed: {message}"
    );
}
