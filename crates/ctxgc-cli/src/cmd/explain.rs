//! `ctxgc explain FILE` and `ctxgc explain --code CODE`

use std::path::PathBuf;

use clap::Args;
use ctxgc_core::chat::compile::ChatReport;
use ctxgc_core::{Action, Compiled, Reason};

use crate::Failure;
use crate::input::{CompileOptions, read_input};

/// Arguments of `ctxgc explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The trace or transcript (stdin when `-`).
    pub file: Option<PathBuf>,
    /// Print the documentation of a reason code instead (e.g. `superseded-var`); `all` lists them.
    #[arg(long, value_name = "CODE")]
    pub code: Option<String>,
    #[command(flatten)]
    pub options: CompileOptions,
}

/// Runs `ctxgc explain`.
pub fn run(args: ExplainArgs) -> Result<(), Failure> {
    if let Some(code) = &args.code {
        return explain_code(code);
    }
    if args.file.is_none() {
        return Err(Failure::Usage(
            "explain needs a FILE (or `-` for stdin), or --code CODE".into(),
        ));
    }
    let options = args.options.to_options()?;
    let text = read_input(args.file.as_ref())?;
    let compiled = ctxgc_core::compile(&text, &options)?;
    if compiled.records.is_empty() {
        explain_one(&compiled);
    } else {
        println!(
            "{} records; tokens {} -> {} ({})",
            compiled.records.len(),
            compiled.tokens_before,
            compiled.tokens_after,
            compiled.tokenizer
        );
        for record in &compiled.records {
            println!("\n== record {} (line {})", record.id, record.line);
            explain_one(&record.compiled);
        }
    }
    Ok(())
}

fn explain_one(compiled: &Compiled) {
    let changed: Vec<_> = compiled
        .decisions
        .iter()
        .filter(|d| d.action != Action::Keep || d.note.is_some())
        .collect();
    println!(
        "{} items, {} retired, {} rewritten; tokens {} -> {} ({})",
        compiled.decisions.len(),
        compiled
            .decisions
            .iter()
            .filter(|d| d.action == Action::Retire)
            .count(),
        compiled
            .decisions
            .iter()
            .filter(|d| d.action == Action::Rewrite)
            .count(),
        compiled.tokens_before,
        compiled.tokens_after,
        compiled.tokenizer,
    );
    let payloads = compiled.chat.as_ref().map(|c| &c.payloads);
    for d in changed {
        let action = match d.action {
            Action::Keep => "kept",
            Action::Retire => "retired",
            Action::Rewrite => "rewritten",
        };
        let mut line = format!("{} {action}", d.id);
        if let Some(reason) = d.reason {
            line.push_str(&format!(" [{}]", reason.code()));
        }
        if !d.by.is_empty() {
            line.push_str(&format!(" by {}", d.by.join(", ")));
        }
        if let Some(p) = payloads.and_then(|ps| ps.iter().find(|p| p.id == d.id)) {
            line.push_str(&format!(" ({} -> {} tokens)", p.before, p.after));
        }
        if let Some(note) = &d.note {
            line.push_str(&format!(": {note}"));
        }
        println!("{line}");
    }
    if let Some(chat) = &compiled.chat {
        explain_chat(chat);
    }
    for w in &compiled.warnings {
        println!("warning: {w}");
    }
}

fn explain_chat(chat: &ChatReport) {
    let mut untouched: Vec<(&str, usize)> = Vec::new();
    for p in &chat.payloads {
        if let Some(why) = p.untouched {
            match untouched.iter_mut().find(|(w, _)| *w == why) {
                Some((_, n)) => *n += 1,
                None => untouched.push((why, 1)),
            }
        }
    }
    for (why, n) in untouched {
        println!("{n} tool output(s) sent as they were: {why}");
    }
    if chat.register.is_empty() {
        println!("register: empty");
    } else {
        println!("register ({} tokens):", chat.register_tokens);
        for e in &chat.register {
            let mut line = format!(
                "  {} = {} (supported by {}, {})",
                e.key,
                e.value,
                e.support,
                e.status.word()
            );
            if e.carried {
                line.push_str(", carried over from an earlier register");
            }
            if !e.flags.is_empty() {
                line.push_str(&format!(", flagged: {}", e.flags.join("; ")));
            }
            println!("{line}");
        }
    }
    for event in &chat.declarations {
        let kind = serde_json::to_value(&event.kind).unwrap_or_default();
        println!("declaration in {} (item {}): {kind}", event.id, event.index);
    }
    let check = &chat.orphan_check;
    for (turn, keys) in &check.still_required {
        println!("still required: {turn} supports {}", keys.join(", "));
    }
    if check.ok {
        println!("orphaned facts: none");
    } else {
        println!("orphaned facts: {}", check.orphaned.join(", "));
    }
    if chat.validation.ok {
        println!(
            "output valid for the API ({} issue(s) already in the input, kept as they were)",
            chat.validation.input_violations.len()
        );
    } else {
        for v in &chat.validation.new_violations {
            println!("INVALID OUTPUT: message {}: {}", v.index, v.detail);
        }
    }
}

fn explain_code(code: &str) -> Result<(), Failure> {
    if code == "all" {
        for reason in Reason::ALL {
            let summary = ctxgc_core::passes::doc_for(reason).map_or("", |d| d.summary);
            println!("{:<18} {summary}", reason.code());
        }
        return Ok(());
    }
    let reason = Reason::from_code(code).ok_or_else(|| {
        Failure::Usage(format!(
            "unknown reason code {code:?}; `ctxgc explain --code all` lists them"
        ))
    })?;
    match ctxgc_core::passes::doc_for(reason) {
        Some(doc) => {
            // The doc is the pass module's opening comment.
            for line in doc.doc.lines().take_while(|l| l.starts_with("//!")) {
                println!(
                    "{}",
                    line.trim_start_matches("//!")
                        .strip_prefix(' ')
                        .unwrap_or(line.trim_start_matches("//!"))
                );
            }
            Ok(())
        }
        None => {
            println!("{}: no documentation", reason.code());
            Ok(())
        }
    }
}
