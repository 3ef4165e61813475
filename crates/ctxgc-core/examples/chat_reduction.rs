//! Token reduction (exact BPE) of every chat preset on conversation-record corpora.
//!
//! `cargo run --release -p ctxgc-core --example chat_reduction -- DIR_OR_FILES...`
//! prints, per file and preset, tokens before and after (summed over conversations, counted
//! as `ctxgc_core::chat::compile` documents), the reduction, and how many turns were retired
//! and tool outputs rewritten.

use std::path::PathBuf;

use ctxgc_core::chat::{ChatOptions, Preset};
use ctxgc_core::{Action, Options, Reason, compile};

fn main() {
    let mut files: Vec<PathBuf> = Vec::new();
    for arg in std::env::args().skip(1) {
        let path = PathBuf::from(arg);
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(&path)
                .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
                .unwrap_or_default();
            found.retain(|p| p.extension().is_some_and(|x| x == "jsonl"));
            found.sort();
            files.extend(found);
        } else {
            files.push(path);
        }
    }
    if files.is_empty() {
        eprintln!("usage: chat_reduction DIR_OR_FILES...");
        std::process::exit(2);
    }
    println!(
        "| file | conversations | preset | tokens before | tokens after | reduction | tool-output tokens before -> after | turns retired | outputs rewritten |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for file in files {
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{}: {e}", file.display());
                std::process::exit(1);
            }
        };
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for preset in [Preset::Lossless, Preset::Default, Preset::Aggressive] {
            let options = Options {
                chat: ChatOptions {
                    preset,
                    ..Default::default()
                },
                ..Default::default()
            };
            let compiled = match compile(&text, &options) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("{name}: {e}");
                    std::process::exit(1);
                }
            };
            let retired = compiled
                .decisions
                .iter()
                .filter(|d| d.action == Action::Retire && d.reason == Some(Reason::SupersededFact))
                .count();
            let payloads: Vec<_> = compiled
                .records
                .iter()
                .flat_map(|r| r.compiled.chat.iter().flat_map(|c| c.payloads.iter()))
                .chain(compiled.chat.iter().flat_map(|c| c.payloads.iter()))
                .filter(|p| p.role == "tool")
                .collect();
            let rewritten = payloads
                .iter()
                .filter(|p| p.action == Action::Rewrite)
                .count();
            let tool_before: usize = payloads.iter().map(|p| p.before).sum();
            let tool_after: usize = payloads.iter().map(|p| p.after).sum();
            let (b, a) = (compiled.tokens_before, compiled.tokens_after);
            println!(
                "| {name} | {} | {} | {b} | {a} | {:.1}% | {tool_before} -> {tool_after} ({:.1}%) | {retired} | {rewritten} |",
                compiled.records.len().max(1),
                preset.name(),
                100.0 * b.saturating_sub(a) as f64 / b.max(1) as f64,
                100.0 * tool_before.saturating_sub(tool_after) as f64 / tool_before.max(1) as f64
            );
        }
    }
}
