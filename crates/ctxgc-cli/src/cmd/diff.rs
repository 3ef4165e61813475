//! `ctxgc diff FILE`

use std::path::PathBuf;

use clap::Args;

use crate::Failure;
use crate::input::{CompileOptions, read_input};

/// Arguments of `ctxgc diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The trace or transcript (stdin when absent or `-`).
    pub file: Option<PathBuf>,
    /// Lines of context around each change.
    #[arg(long, default_value_t = 3)]
    pub context: usize,
    #[command(flatten)]
    pub options: CompileOptions,
}

/// Runs `ctxgc diff`.
pub fn run(args: DiffArgs) -> Result<(), Failure> {
    // Usage errors come before reading the input.
    let options = args.options.to_options()?;
    let text = read_input(args.file.as_ref())?;
    let (before, after) = ctxgc_core::compile::before_after(&text, &options)?;
    let diff = similar::TextDiff::from_lines(&before, &after);
    print!(
        "{}",
        diff.unified_diff()
            .context_radius(args.context)
            .header("before", "after")
    );
    Ok(())
}
