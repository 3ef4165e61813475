//! `ctxgc receipt FILE ID`

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use serde_json::json;

use crate::Failure;
use crate::input::{CompileOptions, read_input};

/// Arguments of `ctxgc receipt`.
#[derive(Debug, Args)]
pub struct ReceiptArgs {
    /// The trace or transcript (`-` for stdin).
    pub file: PathBuf,
    /// The item's id.
    pub id: String,
    /// Print one JSON object with the original (as text) and the decision.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub options: CompileOptions,
}

/// Runs `ctxgc receipt`.
pub fn run(args: ReceiptArgs) -> Result<(), Failure> {
    let options = args.options.to_options()?;
    let text = read_input(Some(&args.file))?;
    let (raw, decision) = ctxgc_core::receipt(&text, &options, &args.id)?;
    print_receipt(&args.id, &raw, &decision, args.json)
}

/// Prints an original as `ctxgc receipt` does: its exact bytes on stdout and the decision on
/// stderr, or one JSON object with both.
pub fn print_receipt(
    id: &str,
    raw: &str,
    decision: &ctxgc_core::Decision,
    json: bool,
) -> Result<(), Failure> {
    if json {
        let out = json!({"id": id, "original": raw, "decision": decision});
        println!(
            "{}",
            serde_json::to_string_pretty(&out).map_err(|e| Failure::Input(e.to_string()))?
        );
    } else {
        let mut stdout = std::io::stdout().lock();
        // The original's bytes exactly, nothing added: piping them to a file gives the item
        // back as it was.
        stdout.write_all(raw.as_bytes())?;
        stdout.flush()?;
        eprintln!(
            "{}",
            serde_json::to_string(&decision).map_err(|e| Failure::Input(e.to_string()))?
        );
    }
    Ok(())
}
