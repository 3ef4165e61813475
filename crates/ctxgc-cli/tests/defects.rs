//! Defects found by an outside attack on the command line: receipts with a byte added,
//! session ids that broke `session list`, empty session ids, a long cycle that printed
//! hundreds of megabytes, chat input with a byte order mark.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn ctxgc(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ctxgc"))
        .args(args)
        .current_dir(dir)
        .env_remove("CTXGC_DB")
        .output()
        .expect("ctxgc runs")
}

fn ok(output: Output) -> Vec<u8> {
    assert!(
        output.status.success(),
        "ctxgc failed ({:?}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../ctxgc-core/tests/fixtures/chat")
        .join(name)
}

/// Item 10: `ctxgc receipt` and `ctxgc session receipt` print the original bytes exactly,
/// with nothing added.
#[test]
fn item_10_receipt_prints_the_original_bytes_exactly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("trace.jsonl");
    let first = r#"{"id":"e1","type":"set_var","timestamp":1,"key":"x","value":1}"#;
    let second = r#"{"id":"e2","type":"set_var","timestamp":2,"key":"x","value":2}"#;
    std::fs::write(&trace, format!("{first}\n{second}\n")).expect("written");
    let path = trace.to_str().expect("UTF-8 path");
    assert_eq!(
        ok(ctxgc(dir.path(), &["receipt", path, "e1"])),
        first.as_bytes()
    );

    let db = dir.path().join("ctxgc.db");
    let db = db.to_str().expect("UTF-8 path");
    ok(ctxgc(
        dir.path(),
        &["session", "append", "s1", path, "--db", db],
    ));
    let stored = ok(ctxgc(
        dir.path(),
        &["session", "receipt", "s1", "e1", "--db", db],
    ));
    assert_eq!(stored, first.as_bytes());

    // A chat message too: exactly its bytes in the input.
    let chat = fixture("airline_cabin_change.json");
    let raw = ok(ctxgc(
        dir.path(),
        &["receipt", chat.to_str().unwrap(), "m4"],
    ));
    let input = std::fs::read(&chat).expect("fixture");
    assert!(!raw.ends_with(b"\n"));
    assert!(input.windows(raw.len()).any(|w| w == raw.as_slice()));
}

/// Item 10: `session list` writes one line per session whatever its id holds, and an empty
/// session id is a usage error.
#[test]
fn item_10_session_ids_are_escaped_and_never_empty() {
    let dir = tempfile::tempdir().expect("temp dir");
    let trace = dir.path().join("trace.jsonl");
    std::fs::write(
        &trace,
        "{\"id\":\"e1\",\"type\":\"set_var\",\"timestamp\":1,\"key\":\"x\",\"value\":1}\n",
    )
    .expect("written");
    let path = trace.to_str().expect("UTF-8 path");
    let db = dir.path().join("ctxgc.db");
    let db = db.to_str().expect("UTF-8 path");
    let odd = "tab\there\nnew\\line";
    ok(ctxgc(
        dir.path(),
        &["session", "append", odd, path, "--db", db],
    ));
    let listed =
        String::from_utf8(ok(ctxgc(dir.path(), &["session", "list", "--db", db]))).expect("UTF-8");
    assert_eq!(listed, "tab\\there\\nnew\\\\line\tevents\t1 items\n");

    for empty in ["", "  "] {
        for args in [
            vec!["session", "append", empty, path, "--db", db],
            vec!["session", "compile", empty, "--db", db],
            vec!["session", "receipt", empty, "e1", "--db", db],
        ] {
            let out = ctxgc(dir.path(), &args);
            assert_eq!(out.status.code(), Some(2), "{args:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("must not be empty"), "{err}");
        }
    }
}

/// Item 1: `--dry-run` on a long cycle prints one justification per member, so its size
/// grows linearly (5 000 members used to print 420 MB).
#[test]
fn item_1_dry_run_on_a_long_cycle_is_linear() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sizes: Vec<usize> = [2_000usize, 4_000]
        .iter()
        .map(|&n| {
            let mut text = String::new();
            for k in 0..n {
                let parent = if k == 0 {
                    String::new()
                } else {
                    format!(",\"parent_id\":\"v{}\"", k - 1)
                };
                text.push_str(&format!(
                    "{{\"id\":\"v{k}\",\"type\":\"set_var\",\"timestamp\":{k},\"key\":\"k\",\"value\":{k}{parent}}}\n"
                ));
            }
            text.push_str(&format!(
                "{{\"id\":\"close\",\"type\":\"edge_injection\",\"src\":\"v{}\",\"dst\":\"v0\"}}\n",
                n - 1
            ));
            let path = dir.path().join(format!("cycle-{n}.jsonl"));
            std::fs::write(&path, text).expect("written");
            ok(ctxgc(dir.path(), &["compile", "--dry-run", path.to_str().unwrap()])).len()
        })
        .collect();
    // Twice the members, about twice the output (never four times).
    assert!(sizes[1] < sizes[0] * 5 / 2, "{sizes:?}");
    assert!(sizes[1] < 4_000 * 200, "{sizes:?}");
}

/// Item 5: a chat file that starts with a UTF-8 byte order mark compiles like the same file
/// without one.
#[test]
fn item_5_chat_input_with_a_byte_order_mark_compiles() {
    let dir = tempfile::tempdir().expect("temp dir");
    let chat = std::fs::read(fixture("anthropic_session.json")).expect("fixture");
    let marked = dir.path().join("marked.json");
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend_from_slice(&chat);
    std::fs::write(&marked, bytes).expect("written");
    let plain = ok(ctxgc(
        dir.path(),
        &[
            "compile",
            fixture("anthropic_session.json").to_str().unwrap(),
        ],
    ));
    let with_mark = ok(ctxgc(dir.path(), &["compile", marked.to_str().unwrap()]));
    assert_eq!(with_mark, plain);
}
