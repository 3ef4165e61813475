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

    let plan = |extra: &[&str]| -> Value {
        let mut args = vec!["compile", corpus, "--dry-run"];
        args.extend_from_slice(extra);
        serde_json::from_str(&ok(ctxgc(&args))).unwrap()
    };
    let projected = |plan: &Value| {
        plan["decisions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["reason"] == "projection" && d["action"] == "rewrite")
            .count()
    };
    let tokens_after = |plan: &Value| plan["tokens_after"].as_u64().unwrap();
    let plain = plan(&[]);
    assert_eq!(projected(&plain), 0);

    // The default preset without a recall tool withholds the projection (nobody could get a
    // hidden field back) and says what it would have saved.
    let withheld = plan(&["--projection", projection]);
    assert_eq!(projected(&withheld), 0, "withheld without a recall tool");
    assert_eq!(tokens_after(&withheld), tokens_after(&plain));
    assert!(
        withheld["would_save_tokens"].as_u64().unwrap_or(0) > 0,
        "the report says what the withheld projection would have saved"
    );

    // With a recall tool it trims tool outputs, and the stubs name the tool.
    let recall = ["--projection", projection, "--expand-tool", "recall"];
    let trimmed = plan(&recall);
    assert!(projected(&trimmed) > 0, "the projection trims tool outputs");
    assert!(
        tokens_after(&trimmed) < tokens_after(&plain),
        "{} < {}",
        tokens_after(&trimmed),
        tokens_after(&plain)
    );
    let mut args = vec!["compile", corpus];
    args.extend_from_slice(&recall);
    assert!(ok(ctxgc(&args)).contains("— call recall with id "));

    // The aggressive preset applies it without a recall tool: the footer names what was
    // hidden and no reference nobody could redeem.
    let out = ok(ctxgc(&[
        "compile",
        corpus,
        "--projection",
        projection,
        "--preset",
        "aggressive",
    ]));
    assert!(out.contains("[hidden: ") && !out.contains("expand ref"));

    // A broken projection file: a usage error naming it, before any input is read.
    let broken = scratch.path().join("broken.json");
    std::fs::write(&broken, "{\"ctxgc_projection\": \"one\"}").unwrap();
    let refused = ctxgc(&["compile", corpus, "--projection", broken.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("broken.json"));
}
