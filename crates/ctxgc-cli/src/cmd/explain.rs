//! `ctxgc explain FILE` and `ctxgc explain --code CODE`

use std::path::PathBuf;

use clap::Args;
use ctxgc_core::{Action, Reason};

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
    let text = read_input(args.file.as_ref())?;
    let compiled = ctxgc_core::compile(&text, &args.options.to_options()?)?;
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
        if let Some(note) = &d.note {
            line.push_str(&format!(": {note}"));
        }
        println!("{line}");
    }
    for w in &compiled.warnings {
        println!("warning: {w}");
    }
    Ok(())
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
