//! Every conversation of the five public corpora, compiled with every preset: the output is
//! valid for its API, no live fact is orphaned, no tool output grows, lossless re-encodings
//! decode to the original, and every retired or rewritten message's receipt gives back its
//! exact bytes.
//!
//! The corpus is found through `CTXGC_CORPUS`, else `../shared/corpus` beside the repository;
//! without it the tests print a note and pass.

use ctxgc_core::chat::compact::decode_tables;
use ctxgc_core::chat::compile::{ChatInput, compile_doc, lower_chat_input};
use ctxgc_core::chat::plain::from_plain;
use ctxgc_core::chat::state::strip_blocks;
use ctxgc_core::chat::{Preset, output_text};
use ctxgc_core::frontend::{Layout, split_items};
use ctxgc_core::ir::{Block, Kind};
use ctxgc_core::{Action, Options, Reason, receipt};
use serde_json::Value;

mod common;
use common::{corpus_dir, preset_options};

fn check_file(name: &str) {
    let Some(dir) = corpus_dir() else {
        eprintln!("note: corpus not found (set CTXGC_CORPUS); {name} skipped");
        return;
    };
    let text = std::fs::read_to_string(dir.join(name)).expect("corpus file reads");
    let ChatInput::Records(records) = lower_chat_input(&text, None).expect("every record lowers")
    else {
        panic!("{name}: expected conversation records");
    };
    assert!(!records.is_empty());
    for preset in [Preset::Lossless, Preset::Default, Preset::Aggressive] {
        let options = preset_options(preset);
        let (mut before, mut after, mut changed) = (0, 0, 0);
        let mut receipt_checked = false;
        for record in &records {
            let (compiled, session) = compile_doc(&record.doc, &record.raw, &options)
                .unwrap_or_else(|e| panic!("{}: {e}", record.id));
            let report = compiled.chat.as_ref().unwrap();
            let at = format!("{name} {} {}", preset.name(), record.id);
            assert!(
                report.validation.ok,
                "{at}: {:?}",
                report.validation.new_violations
            );
            assert!(report.orphan_check.ok, "{at}");
            before += compiled.tokens_before;
            after += compiled.tokens_after;
            // Tool outputs never grow.
            for p in &report.payloads {
                if p.role == "tool" && p.action == Action::Rewrite {
                    assert!(
                        p.after < p.before,
                        "{at} {}: {} -> {}",
                        p.id,
                        p.before,
                        p.after
                    );
                }
            }
            // Receipts give back the exact bytes, found independently in the input.
            let originals = split_items(&record.raw, Layout::Wrapped("messages")).unwrap();
            for r in &compiled.receipts {
                changed += 1;
                let i = session.position(&r.id).unwrap();
                let raw = &session.items()[i].raw;
                assert_eq!(raw, originals[i].text, "{at} {}", r.id);
                assert_eq!(r.hash, blake3::hash(raw.as_bytes()).to_hex().to_string());
                assert_eq!(r.bytes, raw.len());
            }
            // The public receipt API, once per file and preset.
            if let Some(r) = compiled.receipts.first()
                && !receipt_checked
            {
                let id = format!("{}#{}", record.id, r.id);
                let (raw, decision) = receipt(&record.raw, &options, &id).unwrap();
                let i = session.position(&r.id).unwrap();
                assert_eq!(raw, originals[i].text);
                assert_eq!(decision.action, r.action);
                receipt_checked = true;
            }
            // Lossless re-encodings decode to exactly the original value.
            for (i, item) in session.items().iter().enumerate() {
                let Some(v) = session.plan_of(i).verdict else {
                    continue;
                };
                if v.reason != Reason::CompactJson {
                    continue;
                }
                let Kind::Message(m) = &item.kind else {
                    continue;
                };
                for rw in &v.rewrites {
                    let Block::ToolResult(out) = &m.blocks[rw.block] else {
                        panic!("{at}: compact-json on a block that is not a tool result")
                    };
                    let original = output_text(out).unwrap();
                    let original = strip_blocks(original).unwrap_or_else(|| original.to_owned());
                    let original: Value = serde_json::from_str(original.trim()).unwrap();
                    let decoded = decode_tables(&from_plain(&rw.text).unwrap());
                    assert_eq!(decoded, original, "{at} {}", item.id);
                }
            }
        }
        eprintln!(
            "{name} {}: {} conversations, tokens {before} -> {after} ({:.1}% fewer), {changed} messages retired or rewritten",
            preset.name(),
            records.len(),
            100.0 * (before - after) as f64 / before as f64
        );
        assert!(after <= before);
    }
    // Deterministic: the same record compiles to the same bytes.
    let first = &records[0];
    let a = compile_doc(&first.doc, &first.raw, &Options::default())
        .unwrap()
        .0;
    let b = compile_doc(&first.doc, &first.raw, &Options::default())
        .unwrap()
        .0;
    assert_eq!(a.output, b.output);
}

#[test]
fn tau_bench_airline() {
    check_file("tau-bench-airline-gpt4o.jsonl");
}

#[test]
fn tau2_bench_leaderboard() {
    check_file("tau2-bench-leaderboard.jsonl");
}

#[test]
fn swe_agent_trajectories() {
    check_file("swe-agent-trajectories.jsonl");
}

#[test]
fn tau2_bench_fork_grok() {
    check_file("tau2-bench-fork-grok.jsonl");
}

#[test]
fn toolbench_examples() {
    check_file("toolbench-examples.jsonl");
}
