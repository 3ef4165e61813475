//! `ctxgc compile --projection P.json`: the projection `ctxgc learn` wrote from corpus runs
//! trims tool outputs of a corpus file as a pass, with receipts; a broken file is a usage
//! error naming it.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn ctxgc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ctxgc"))
        .args(args)
        .current_dir(std::env::temp_dir())
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

fn corpus_file(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("CTXGC_CORPUS").map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/corpus"
            ))
        },
        PathBuf::from,
    );
    let path = dir.join(name);
    if path.is_file() {
        Some(path)
    } else {
        eprintln!(
            "note: no corpus at {} (set CTXGC_CORPUS); skipped",
            dir.display()
        );
        None
    }
}

#[test]
fn a_learned_projection_trims_a_corpus_file_as_a_pass() {
    let Some(corpus) = corpus_file("tau-bench-airline-gpt4o.jsonl") else {
        return;
    };
    let corpus = corpus.to_str().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let projection = scratch.path().join("projection.json");
    let projection = projection.to_str().unwrap();
    ok(ctxgc(&["learn", corpus, "-o", projection]));

    let plain = ok(ctxgc(&["compile", corpus, "--dry-run"]));
    let trimmed = ok(ctxgc(&[
        "compile",
        corpus,
        "--dry-run",
        "--projection",
        projection,
    ]));
    let count = |text: &str| {
        let plan: Value = serde_json::from_str(text).unwrap();
        let decisions = plan["decisions"].as_array().unwrap();
        let projected = decisions
            .iter()
            .filter(|d| d["reason"] == "projection" && d["action"] == "rewrite")
            .count();
        (projected, plan["tokens_after"].as_u64().unwrap())
    };
    let (none, plain_after) = count(&plain);
    let (some, trimmed_after) = count(&trimmed);
    assert_eq!(none, 0);
    assert!(some > 0, "the projection trims tool outputs");
    assert!(
        trimmed_after < plain_after,
        "{trimmed_after} < {plain_after}"
    );

    // The output names no reference without a recall tool, and names the recall tool with one.
    let out = ok(ctxgc(&["compile", corpus, "--projection", projection]));
    assert!(out.contains("[hidden: ") && !out.contains("expand ref"));
    let out = ok(ctxgc(&[
        "compile",
        corpus,
        "--projection",
        projection,
        "--expand-tool",
        "recall",
    ]));
    assert!(out.contains("— call recall with id "));

    // A broken projection file: a usage error naming it, before any input is read.
    let broken = scratch.path().join("broken.json");
    std::fs::write(&broken, "{\"ctxgc_projection\": \"one\"}").unwrap();
    let refused = ctxgc(&["compile", corpus, "--projection", broken.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("broken.json"));
}
