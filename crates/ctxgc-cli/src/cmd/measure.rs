//! `ctxgc measure TRACES... [--per-tool] [--json]`: leave-one-out tokens removed and misses.

use std::path::PathBuf;

use clap::Args;
use ctxgc_core::projection::measure::{Figures, measure};

use super::learn::{LearnFlags, load_runs};
use crate::Failure;

/// Arguments of `ctxgc measure`.
#[derive(Debug, Args)]
pub struct MeasureArgs {
    /// Trace files (JSONL of records: one run per line).
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// Also show every tool.
    #[arg(long)]
    pub per_tool: bool,
    /// Print the measurement as JSON (overall and per tool).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub flags: LearnFlags,
}

fn line(name: &str, f: &Figures) -> String {
    format!(
        "{name:<34} {:>10} {:>10} {:>8} {:>8} {:>7} {:>7} {:>6} {:>7}",
        f.tool_tokens_before,
        f.tool_tokens_after,
        format!("{:.1}%", f.removed_share * 100.0),
        format!("{:.1}%", f.reserialisation_share * 100.0),
        f.calls_total,
        f.calls,
        f.misses,
        format!("{:.1}%", f.miss_rate * 100.0),
    )
}

/// Runs `ctxgc measure`.
pub fn run(args: MeasureArgs) -> Result<(), Failure> {
    let options = args.flags.measure_options()?;
    let runs = load_runs(&args.traces, &args.flags)?;
    let m = measure(&runs, &options);
    if args.json {
        let text = serde_json::to_string_pretty(&m).map_err(|e| Failure::Input(e.to_string()))?;
        println!("{text}");
        return Ok(());
    }
    println!(
        "leave-one-out over {} runs ({}): each run trimmed with a projection learned from the others",
        m.runs,
        m.tokenizer.name()
    );
    println!(
        "{:<34} {:>10} {:>10} {:>8} {:>8} {:>7} {:>7} {:>6} {:>7}",
        "tool", "before", "after", "removed", "reser.", "calls", "trimmed", "misses", "miss %"
    );
    if args.per_tool {
        let mut tools: Vec<_> = m.per_tool.iter().collect();
        tools.sort_by(|a, b| {
            b.1.tool_tokens_before
                .cmp(&a.1.tool_tokens_before)
                .then_with(|| a.0.cmp(b.0))
        });
        for (name, f) in tools {
            println!("{}", line(name, f));
        }
    }
    println!("{}", line("all tools", &m.overall));
    println!(
        "removed {:.1}% of tool-output tokens ({:.1}% by re-serialising alone); a used field was hidden in {} of {} trimmed held-out calls ({:.1}%; {:.1}% of all {} held-out calls)",
        m.overall.removed_share * 100.0,
        m.overall.reserialisation_share * 100.0,
        m.overall.misses,
        m.overall.calls,
        m.overall.miss_rate * 100.0,
        m.overall.miss_rate_all * 100.0,
        m.overall.calls_total
    );
    if options.learn.recallable {
        println!(
            "(recall-backed rules: a hidden field the agent uses costs a recall, not a loss, where the agent can recall it)"
        );
    }
    if args.per_tool && !m.missed_fields.is_empty() {
        println!("fields behind the misses:");
        for f in m.missed_fields.iter().take(20) {
            println!("  {} {} ({} calls)", f.tool, f.field, f.calls);
        }
    }
    Ok(())
}
