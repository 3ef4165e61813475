//! `ctxgc compile [FILE|-]`

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use ctxgc_core::Compiled;
use serde_json::{Value, json};

use crate::Failure;
use crate::input::{CompileOptions, read_input};

/// Arguments of `ctxgc compile`.
#[derive(Debug, Args)]
pub struct CompileArgs {
    /// The trace or transcript (stdin when absent or `-`).
    pub file: Option<PathBuf>,
    /// Print one JSON object: output, tokens, decisions, receipts (for chats also the
    /// register, declarations, orphan check and tokens per payload; for JSONL records one
    /// object per line).
    #[arg(long)]
    pub json: bool,
    /// Print the plan only (decisions), not the output.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub options: CompileOptions,
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<Value, Failure> {
    serde_json::to_value(value).map_err(|e| Failure::Input(e.to_string()))
}

/// A compiled chat as JSON, its output (a message list) as JSON rather than as a string.
pub fn chat_json(compiled: &Compiled) -> Result<Value, Failure> {
    let mut value = to_json(compiled)?;
    if compiled.format.wire().is_chat()
        && let Some(map) = value.as_object_mut()
        && let Ok(output) = serde_json::from_str::<Value>(&compiled.output)
    {
        map.insert("output".into(), output);
    }
    Ok(value)
}

/// Writes to stdout; a reader that went away (`| head`) ends the output quietly.
fn emit(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

fn print_pretty(value: &Value) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(value).map_err(|e| Failure::Input(e.to_string()))?;
    emit(&format!("{text}\n"))
}

/// Runs `ctxgc compile`.
pub fn run(args: CompileArgs) -> Result<(), Failure> {
    // Usage errors come before reading the input.
    let mut options = args.options.to_options()?;
    if !args.json && !args.dry_run {
        // Only the output is printed: nobody asked for counts, decisions or receipts.
        options.counting = ctxgc_core::Counting::Skip;
        options.detail = ctxgc_core::Detail::OutputOnly;
    }
    let text = read_input(args.file.as_ref())?;
    let compiled = ctxgc_core::compile(&text, &options)?;
    print_compiled(&compiled, args.json, args.dry_run)
}

/// Prints a compiled input the way `ctxgc compile` does: warnings on stderr, then the plan
/// (`dry_run`), the JSON report (`json`) or the output.
pub fn print_compiled(compiled: &Compiled, json: bool, dry_run: bool) -> Result<(), Failure> {
    for w in &compiled.warnings {
        eprintln!("ctxgc: warning: {w}");
    }
    if dry_run {
        let mut plan = json!({
            "format": compiled.format,
            "tokens_before": compiled.tokens_before,
            "tokens_after": compiled.tokens_after,
            "decisions": compiled.decisions,
        });
        // What lossy rewrites withheld for want of a recall tool would have saved: the plan
        // says it, as the JSON report does.
        if compiled.would_save_tokens > 0
            && let Some(map) = plan.as_object_mut()
        {
            map.insert(
                "would_save_tokens".into(),
                Value::from(compiled.would_save_tokens),
            );
        }
        print_pretty(&plan)?;
    } else if json && !compiled.records.is_empty() {
        // One report per record and line, like the input.
        for record in &compiled.records {
            let mut value = chat_json(&record.compiled)?;
            if let Some(map) = value.as_object_mut() {
                map.insert("id".into(), Value::String(record.id.clone()));
                map.insert("line".into(), Value::from(record.line));
            }
            emit(&format!("{value}\n"))?;
        }
    } else if json {
        print_pretty(&chat_json(compiled)?)?;
    } else if !compiled.format.wire().is_chat() || compiled.output.ends_with('\n') {
        emit(&compiled.output)?;
    } else {
        emit(&format!("{}\n", compiled.output))?;
    }
    Ok(())
}
