//! `ctxgc learn TRACES... -o projection.json`, and what `learn`, `measure` and `report`
//! share: reading traces as runs, and the learner's options.

use std::path::{Path, PathBuf};

use clap::Args;
use ctxgc_core::projection::counts::observe_run;
use ctxgc_core::projection::measure::MeasureOptions;
use ctxgc_core::projection::{Counts, LearnOptions, Projection, Run, UsageOptions};
use ctxgc_core::{Format, Options, Tokenizer};

use crate::Failure;
use crate::input::read_input;

/// How traces are read and the learner judges fields (shared by learn, measure, report).
#[derive(Debug, Args, Clone)]
pub struct LearnFlags {
    /// Input format, instead of detecting it: openai-chat, anthropic, responses, tracetrim, events.
    #[arg(long, value_name = "FORMAT")]
    pub from: Option<String>,
    /// Tokenizer for exact counts: o200k_base (default) or cl100k_base.
    #[arg(long, default_value = "o200k_base")]
    pub tokenizer: String,
    /// A field is judged once seen in this many calls.
    #[arg(long, default_value_t = LearnOptions::default().min_calls)]
    pub min_calls: u64,
    /// ... over this many runs.
    #[arg(long, default_value_t = LearnOptions::default().min_runs)]
    pub min_runs: u64,
    /// Drop fields used in at most this share of their calls (0: only never-used fields;
    /// default 0, or 0.10 with --recallable).
    #[arg(long, value_name = "SHARE")]
    pub max_used_share: Option<f64>,
    /// Hide fields only when that saves at least this many tokens, footer included.
    #[arg(long, default_value_t = LearnOptions::default().min_saving_tokens)]
    pub min_saving_tokens: u64,
    /// Also drop unused identifying fields (ids, names, titles); by default they stay.
    #[arg(long)]
    pub drop_identifying: bool,
    /// The agent can recall hidden values (compile --expand-tool, the proxy's expand tool,
    /// the gateway's recall): also hide identifying fields no run used, fields used in at
    /// most 10% of their calls (unless --max-used-share says otherwise), and fields whose
    /// values another kept field of the same output always repeats.
    #[arg(long)]
    pub recallable: bool,
    /// Let a whole plain-text output be hidden when it is never used.
    #[arg(long)]
    pub drop_whole_text: bool,
    /// Re-encode lists of records as header + rows when smaller (lossless, another shape).
    #[arg(long)]
    pub tables: bool,
    /// Count a value as used even when the agent had it before the output arrived.
    #[arg(long)]
    pub count_known_values: bool,
}

impl LearnFlags {
    /// The tokenizer asked for.
    pub fn tokenizer(&self) -> Result<Tokenizer, Failure> {
        Tokenizer::from_name(&self.tokenizer).ok_or_else(|| {
            Failure::Usage(format!(
                "unknown tokenizer {:?}: use o200k_base or cl100k_base",
                self.tokenizer
            ))
        })
    }

    /// The learner's and the detector's options.
    pub fn measure_options(&self) -> Result<MeasureOptions, Failure> {
        let base = if self.recallable {
            LearnOptions::recallable()
        } else {
            LearnOptions::default()
        };
        let max_used_share = self.max_used_share.unwrap_or(base.max_used_share);
        if !(0.0..=1.0).contains(&max_used_share) {
            return Err(Failure::Usage(format!(
                "--max-used-share must be between 0 and 1, not {max_used_share}"
            )));
        }
        Ok(MeasureOptions {
            learn: LearnOptions {
                min_calls: self.min_calls,
                min_runs: self.min_runs,
                max_used_share,
                keep_identifying: !self.drop_identifying,
                min_saving_tokens: self.min_saving_tokens,
                tables: self.tables,
                drop_whole_text: self.drop_whole_text,
                recallable: self.recallable,
            },
            usage: UsageOptions {
                discount_known_values: !self.count_known_values,
            },
            tokenizer: self.tokenizer()?,
        })
    }

    fn lower_options(&self) -> Result<Options, Failure> {
        let mut options = Options::default();
        if let Some(from) = &self.from {
            options.from = Some(Format::from_name(from).ok_or_else(|| {
                Failure::Usage(format!(
                    "unknown format {from:?}: use openai-chat, anthropic, responses, tracetrim or events"
                ))
            })?);
        }
        options.tokenizer = self.tokenizer()?;
        Ok(options)
    }
}

/// Reads every trace file as runs: a file holding one conversation is one run (named after
/// the file), a JSONL file of records gives one run per record (named by its `id`).
pub fn load_runs(paths: &[PathBuf], flags: &LearnFlags) -> Result<Vec<Run>, Failure> {
    if paths.is_empty() {
        return Err(Failure::Usage("give at least one trace file".into()));
    }
    let options = flags.lower_options()?;
    let mut runs = Vec::new();
    for path in paths {
        let text = read_input(Some(path))?;
        let conversations = ctxgc_core::frontend::lower_conversations(&text, &options)
            .map_err(|e| Failure::Input(format!("{}: {e}", path.display())))?;
        let single = conversations.len() == 1;
        for c in conversations {
            let id = if single && c.id == "0" {
                file_name(path)
            } else {
                c.id.clone()
            };
            runs.push(Run::from_items(id, &c.items));
        }
    }
    if runs.is_empty() {
        return Err(Failure::Input("the traces hold no runs".into()));
    }
    Ok(runs)
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// A title for a set of trace files (for reports).
pub fn title_of(paths: &[PathBuf]) -> String {
    match paths {
        [one] => file_name(one),
        [first, rest @ ..] => format!("{} and {} more", file_name(first), rest.len()),
        [] => "traces".into(),
    }
}

/// Writes a file, naming it in the error.
pub fn write_file(path: &Path, text: &str) -> Result<(), Failure> {
    std::fs::write(path, text).map_err(|e| Failure::Input(format!("{}: {e}", path.display())))
}

/// Arguments of `ctxgc learn`.
#[derive(Debug, Args)]
pub struct LearnArgs {
    /// Trace files: transcripts in any format ctxgc reads (JSONL of records: one run per
    /// line), or tracetrim JSONL traces.
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// Where to write the projection (stdout when absent or `-`).
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub flags: LearnFlags,
}

/// Runs `ctxgc learn`.
pub fn run(args: LearnArgs) -> Result<(), Failure> {
    let options = args.flags.measure_options()?;
    let runs = load_runs(&args.traces, &args.flags)?;
    let mut counts = Counts::default();
    for run in &runs {
        counts.add(&observe_run(run, &options.usage, options.tokenizer).counts);
    }
    let projection = Projection::learn(&counts, &options.learn, options.tokenizer);
    let json = projection.to_json();
    match &args.output {
        Some(path) if path.as_os_str() != "-" => write_file(path, &json)?,
        _ => print!("{json}"),
    }
    let dropped: usize = projection.tools.values().map(|t| t.drop.len()).sum();
    let trimmed = projection
        .tools
        .values()
        .filter(|t| !t.drop.is_empty())
        .count();
    eprintln!(
        "ctxgc: learned from {} runs ({} with an answer), {} calls: {} of {} tools trimmed, {} fields dropped",
        projection.learned_from.runs,
        projection.learned_from.runs_with_answer,
        projection.learned_from.calls,
        trimmed,
        projection.tools.len(),
        dropped
    );
    Ok(())
}
