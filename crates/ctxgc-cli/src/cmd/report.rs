//! `ctxgc report TRACES... -o report.html`: the telemetry report, as a page and as JSON
//! (`report.json` beside the page).

use std::path::PathBuf;

use clap::Args;
use ctxgc_core::projection::Report;
use ctxgc_report::projection::render_html;

use super::learn::{LearnFlags, load_runs, title_of, write_file};
use crate::Failure;

/// Arguments of `ctxgc report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Trace files (JSONL of records: one run per line).
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// The page to write; the JSON goes beside it with the extension `.json`.
    #[arg(short, long, value_name = "FILE", default_value = "report.html")]
    pub output: PathBuf,
    /// The report's title (default: the trace file names).
    #[arg(long)]
    pub title: Option<String>,
    #[command(flatten)]
    pub flags: LearnFlags,
}

/// Runs `ctxgc report`.
pub fn run(args: ReportArgs) -> Result<(), Failure> {
    let options = args.flags.measure_options()?;
    let runs = load_runs(&args.traces, &args.flags)?;
    let title = args.title.clone().unwrap_or_else(|| title_of(&args.traces));
    let report = Report::build(&title, &runs, &options);
    let json_path = args.output.with_extension("json");
    if json_path == args.output {
        return Err(Failure::Usage(format!(
            "{}: the page needs another extension than .json (report.json goes beside it)",
            args.output.display()
        )));
    }
    write_file(&args.output, &render_html(&report))?;
    let mut json =
        serde_json::to_string_pretty(&report).map_err(|e| Failure::Input(e.to_string()))?;
    json.push('\n');
    write_file(&json_path, &json)?;
    eprintln!(
        "ctxgc: wrote {} and {} ({} runs, {} tools, {} suggested actions)",
        args.output.display(),
        json_path.display(),
        report.runs,
        report.tools.len(),
        report.actions.len()
    );
    Ok(())
}
