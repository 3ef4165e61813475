//! Learned projections over the real transcripts of `shared/corpus/` (every run a record):
//! every corpus reads as runs, leave-one-out figures hold together, trimming then expanding
//! gives every hidden value back exactly, and the figures are the same run after run.
//!
//! The corpus is found through `CTXGC_CORPUS`, else `../../../shared/corpus`; without it the
//! tests print a note and pass (a clone without the shared folder).

use std::path::PathBuf;

use ctxgc_core::Options;
use ctxgc_core::frontend::lower_conversations;
use ctxgc_core::projection::apply::{MemoryReceipts, Outcome, ReceiptStore, expand};
use ctxgc_core::projection::counts::observe_run;
use ctxgc_core::projection::fields::{leaves, parse_output};
use ctxgc_core::projection::measure::{MeasureOptions, measure};
use ctxgc_core::projection::{Counts, Projection, Run};
use serde_json::{Value, json};

mod common;

const CORPORA: [&str; 5] = [
    "tau-bench-airline-gpt4o.jsonl",
    "tau2-bench-leaderboard.jsonl",
    "tau2-bench-fork-grok.jsonl",
    "swe-agent-trajectories.jsonl",
    "toolbench-examples.jsonl",
];

fn corpus_dir() -> Option<PathBuf> {
    let dir = common::corpus_path();
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "note: no corpus at {} (set CTXGC_CORPUS); skipping",
            dir.display()
        );
        None
    }
}

fn runs_of(dir: &std::path::Path, name: &str) -> Vec<Run> {
    let text = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let conversations =
        lower_conversations(&text, &Options::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
    conversations
        .iter()
        .map(|c| Run::from_items(c.id.clone(), &c.items))
        .collect()
}

#[test]
fn every_corpus_reads_as_runs_and_measures_consistently() {
    let Some(dir) = corpus_dir() else { return };
    for name in CORPORA {
        let runs = runs_of(&dir, name);
        assert!(!runs.is_empty(), "{name}");
        let calls: usize = runs
            .iter()
            .map(|r| r.calls.iter().filter(|c| c.output.is_some()).count())
            .sum();
        let m = measure(&runs, &MeasureOptions::default());
        let o = &m.overall;
        assert_eq!(
            o.calls_total as usize, calls,
            "{name}: every call with an output is held out once"
        );
        assert!(o.tool_tokens_after <= o.tool_tokens_before, "{name}");
        assert!(o.calls <= o.calls_total && o.misses <= o.calls, "{name}");
        let per_tool: u64 = m.per_tool.values().map(|f| f.tool_tokens_before).sum();
        assert_eq!(per_tool, o.tool_tokens_before, "{name}: tools add up");
        assert_eq!(
            runs.iter().map(|r| r.orphan_results).sum::<u64>(),
            0,
            "{name}: every result has its call"
        );
    }
}

#[test]
fn tau_corpora_trim_beyond_reserialisation_at_a_low_miss_rate() {
    let Some(dir) = corpus_dir() else { return };
    for name in &CORPORA[..3] {
        let m = measure(&runs_of(&dir, name), &MeasureOptions::default());
        let o = &m.overall;
        eprintln!(
            "{name}: removed {:.1}% (re-serialising alone {:.1}%), misses {}/{} = {:.1}%",
            o.removed_share * 100.0,
            o.reserialisation_share * 100.0,
            o.misses,
            o.calls,
            o.miss_rate * 100.0
        );
        assert!(
            o.removed_share > o.reserialisation_share + 0.02,
            "{name}: the projection adds to re-serialising"
        );
        assert!(o.miss_rate <= 0.05, "{name}: miss rate {}", o.miss_rate);
    }
}

#[test]
fn trim_then_expand_gives_back_every_hidden_value_on_the_corpus() {
    let Some(dir) = corpus_dir() else { return };
    for name in &CORPORA[..3] {
        let runs = runs_of(&dir, name);
        let options = MeasureOptions::default();
        let counts = Counts::sum(
            runs.iter()
                .map(|r| observe_run(r, &options.usage, options.tokenizer).counts)
                .collect::<Vec<_>>()
                .iter(),
        );
        let projection = Projection::learn(&counts, &options.learn, options.tokenizer);
        let mut store = MemoryReceipts::default();
        let mut trimmed = 0;
        for call in runs.iter().flat_map(|r| &r.calls) {
            let Some(raw) = &call.output else { continue };
            let t = projection.apply_flagged(&call.tool, raw, call.is_error);
            if t.outcome != Outcome::Trimmed {
                continue;
            }
            trimmed += 1;
            let receipt = t.receipt.clone().expect("a trimmed output has a receipt");
            let r = receipt.reference.clone();
            store.put(receipt).unwrap();
            assert_eq!(
                &expand(&store, &json!({"ref": r, "fields": ["*"]})).unwrap(),
                raw
            );
            let back: Value = serde_json::from_str(
                &expand(&store, &json!({"ref": r, "fields": t.hidden})).unwrap(),
            )
            .unwrap();
            let original = parse_output(raw);
            let mut hidden_leaves = 0;
            for leaf in leaves(&original)
                .iter()
                .filter(|l| t.removed.contains(&l.path))
            {
                hidden_leaves += 1;
                // The leaf sits in the answer under its own path or under a hidden ancestor.
                let found = back.as_object().unwrap().iter().any(|(k, v)| {
                    if *k == leaf.concrete {
                        return Some(v) == leaf.value || leaf.value.is_none();
                    }
                    leaf.concrete.starts_with(k.as_str())
                });
                assert!(
                    found,
                    "{name}: {} missing from expand of {r}",
                    leaf.concrete
                );
            }
            assert_eq!(hidden_leaves, t.hidden_values, "{name}: {r}");
        }
        assert!(trimmed > 50, "{name}: only {trimmed} outputs trimmed");
    }
}

#[test]
fn measurement_is_deterministic() {
    let Some(dir) = corpus_dir() else { return };
    let runs = runs_of(&dir, "tau-bench-airline-gpt4o.jsonl");
    let a = serde_json::to_string(&measure(&runs, &MeasureOptions::default())).unwrap();
    let b = serde_json::to_string(&measure(&runs, &MeasureOptions::default())).unwrap();
    assert_eq!(a, b);
}
