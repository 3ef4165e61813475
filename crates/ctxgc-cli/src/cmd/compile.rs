//! `ctxgc compile [FILE|-]`

use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use crate::Failure;
use crate::input::{CompileOptions, read_input};

/// Arguments of `ctxgc compile`.
#[derive(Debug, Args)]
pub struct CompileArgs {
    /// The trace or transcript (stdin when absent or `-`).
    pub file: Option<PathBuf>,
    /// Print one JSON object: output, tokens, decisions, receipts.
    #[arg(long)]
    pub json: bool,
    /// Print the plan only (decisions), not the output.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub options: CompileOptions,
}

/// Runs `ctxgc compile`.
pub fn run(args: CompileArgs) -> Result<(), Failure> {
    let text = read_input(args.file.as_ref())?;
    let options = args.options.to_options()?;
    let compiled = ctxgc_core::compile(&text, &options)?;
    for w in &compiled.warnings {
        eprintln!("ctxgc: warning: {w}");
    }
    if args.dry_run {
        let plan = json!({
            "format": compiled.format,
            "tokens_before": compiled.tokens_before,
            "tokens_after": compiled.tokens_after,
            "decisions": compiled.decisions,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&plan).map_err(|e| Failure::Input(e.to_string()))?
        );
    } else if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&compiled).map_err(|e| Failure::Input(e.to_string()))?
        );
    } else {
        print!("{}", compiled.output);
    }
    Ok(())
}
