//! `ctxgc trim --projection P --tool T [FILE|-]`: one tool output through a projection.

use std::path::PathBuf;

use clap::Args;
use ctxgc_core::projection::Projection;
use serde_json::json;

use crate::Failure;
use crate::input::read_input;

/// Arguments of `ctxgc trim`.
#[derive(Debug, Args)]
pub struct TrimArgs {
    /// The projection file (`ctxgc learn` writes one).
    #[arg(long, value_name = "FILE")]
    pub projection: PathBuf,
    /// The tool that produced the output.
    #[arg(long)]
    pub tool: String,
    /// The raw tool output (stdin when absent or `-`).
    pub file: Option<PathBuf>,
    /// The output is an error (it is then never trimmed).
    #[arg(long)]
    pub error: bool,
    /// Print one JSON object: the text, what was done, what was hidden, and the receipt
    /// (the original, under the reference the footer gives).
    #[arg(long)]
    pub json: bool,
}

/// Runs `ctxgc trim`.
pub fn run(args: TrimArgs) -> Result<(), Failure> {
    let projection_text = read_input(Some(&args.projection))?;
    let projection = Projection::from_json(&projection_text)
        .map_err(|e| Failure::Input(format!("{}: {e}", args.projection.display())))?;
    let output = read_input(args.file.as_ref())?;
    let trimmed = projection.apply_flagged(&args.tool, &output, args.error);
    if args.json {
        let value = json!({
            "tool": args.tool,
            "text": trimmed.text,
            "outcome": trimmed.outcome,
            "untrimmed": trimmed.untrimmed,
            "hidden": trimmed.hidden,
            "hidden_values": trimmed.hidden_values,
            "tokens_before": projection.tokenizer.count(&output),
            "tokens_after": projection.tokenizer.count(&trimmed.text),
            "receipt": trimmed.receipt,
        });
        let text =
            serde_json::to_string_pretty(&value).map_err(|e| Failure::Input(e.to_string()))?;
        println!("{text}");
    } else {
        println!("{}", trimmed.text);
        match &trimmed.receipt {
            Some(r) => eprintln!(
                "ctxgc: hid {} value(s) of {} field group(s), {} → {} tokens, reference {}",
                trimmed.hidden_values,
                trimmed.hidden.len(),
                projection.tokenizer.count(&output),
                projection.tokenizer.count(&trimmed.text),
                r.reference
            ),
            None => eprintln!(
                "ctxgc: nothing hidden ({})",
                match trimmed.untrimmed {
                    Some(why) => serde_json::to_value(why)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_owned))
                        .unwrap_or_default()
                        .replace('_', " "),
                    None => "no reason".into(),
                }
            ),
        }
    }
    Ok(())
}
