//! `ctxgc bench [INPUT...]`: every strategy on every conversation, scored the same way.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use ctxgc_bench::replay::CacheModel;
use ctxgc_bench::run::{BenchConfig, InputFile, Progress, run};
use ctxgc_bench::strategy::{BUILTIN, StrategyDefaults, default_specs, parse_spec};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use std::sync::Arc;

use ctxgc_bench::context::Context;
use ctxgc_bench::strategy::{Prefix, Strategy, StrategyError};

use crate::Failure;
use crate::cmd::bench_gateway;
use crate::input::CompileOptions;

/// Arguments of `ctxgc bench`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Trace or transcript files, any format the front-ends read (corpus JSONL: one
    /// conversation per line).
    pub inputs: Vec<PathBuf>,
    /// Bench the example inputs bundled with ctxgc (tracegc fixtures and corpus conversations).
    #[arg(long)]
    pub sample: bool,
    /// A strategy to run (repeatable; default: every built-in one). NAME, NAME:key=value,...
    /// or external:COMMAND. `--list-strategies` lists them.
    #[arg(long = "strategy", value_name = "SPEC")]
    pub strategies: Vec<String>,
    /// Also replay every chat conversation through `ctxgc gateway` (in process, on loopback,
    /// against a fake provider answering with the recorded turns): strategy `gateway`.
    #[arg(long)]
    pub through_gateway: bool,
    /// List the built-in strategies and exit.
    #[arg(long)]
    pub list_strategies: bool,
    /// Output: `table` (default), `json [FILE]`, or `html FILE` (a self-contained page).
    #[arg(long, num_args = 1..=2, value_names = ["FORMAT", "FILE"])]
    pub output: Vec<String>,
    /// List every miss (turn, value, where it came from), probe failure and error.
    #[arg(long)]
    pub explain: bool,
    /// Cache-read price multiplier for replayed cost.
    #[arg(long, value_name = "X", default_value_t = 0.1)]
    pub cache_read: f64,
    /// Cache-write price multiplier for replayed cost.
    #[arg(long, value_name = "X", default_value_t = 1.25)]
    pub cache_write: f64,
    /// clear-tool-results: input tokens above which old tool results are cleared.
    #[arg(long, value_name = "TOKENS", default_value_t = 100_000)]
    pub clear_trigger: usize,
    /// clear-tool-results: how many of the most recent tool results stay.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub clear_keep: usize,
    /// external:CMD: seconds one run of the command may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    pub external_timeout: f64,
    /// Bench at most this many conversations per input.
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Report every wall time as 0, so that the output is byte-reproducible.
    #[arg(long)]
    pub no_timing: bool,
    /// Concatenate each input's conversations, in order, into long sessions of at least this
    /// many tokens (later runs without their system prompt) and bench those instead: with
    /// `--strategy mask-observations`, prices masking old observations in cache-aware steps.
    #[arg(long, value_name = "TOKENS")]
    pub long_sessions: Option<usize>,
    #[command(flatten)]
    pub options: CompileOptions,
}

enum Output {
    Table,
    Json(Option<PathBuf>),
    Html(Option<PathBuf>),
}

fn output_of(args: &[String]) -> Result<Output, Failure> {
    let file = args.get(1).filter(|f| f.as_str() != "-").map(PathBuf::from);
    match args.first().map(String::as_str) {
        None | Some("table") if args.len() <= 1 => Ok(Output::Table),
        Some("json") => Ok(Output::Json(file)),
        Some("html") => Ok(Output::Html(file)),
        Some(other) => Err(Failure::Usage(format!(
            "--output {other:?}: use table, json [FILE] or html FILE"
        ))),
        None => Ok(Output::Table),
    }
}

fn positive(name: &str, value: f64) -> Result<f64, Failure> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(Failure::Usage(format!(
            "{name} must be a non-negative number, got {value}"
        )))
    }
}

/// Runs `ctxgc bench`.
pub fn run_bench(args: BenchArgs) -> Result<(), Failure> {
    if args.list_strategies {
        for info in BUILTIN {
            println!(
                "{:<20} {}{}",
                info.name,
                info.summary,
                if info.default {
                    ""
                } else {
                    " (not run by default)"
                }
            );
        }
        println!(
            "{:<20} {} (not run by default; --through-gateway)",
            crate::cmd::bench_gateway::NAME,
            crate::cmd::bench_gateway::SUMMARY
        );
        println!(
            "{:<20} any other compactor: COMMAND reads the history (JSON list) on stdin and prints the compacted list",
            "external:COMMAND"
        );
        return Ok(());
    }
    let output = output_of(&args.output)?;
    let timeout = positive("--external-timeout", args.external_timeout)?;
    let defaults = StrategyDefaults {
        clear_trigger: args.clear_trigger,
        clear_keep: args.clear_keep,
        external_timeout: Duration::from_secs_f64(timeout),
    };
    let mut specs: Vec<String> = if args.strategies.is_empty() {
        default_specs().into_iter().map(str::to_owned).collect()
    } else {
        args.strategies.clone()
    };
    if args.through_gateway && !specs.iter().any(|s| s.trim() == bench_gateway::NAME) {
        specs.push(bench_gateway::NAME.to_owned());
    }
    let options = args.options.to_options()?;
    // The gateway strategy is built here (it needs the gateway, which the bench crate does
    // not know), and kept at hand for its totals.
    let mut through: Option<Arc<bench_gateway::ThroughGateway>> = None;
    let strategies = specs
        .iter()
        .map(|s| {
            if s.trim() == bench_gateway::NAME {
                let gateway = match &through {
                    Some(g) => g.clone(),
                    None => {
                        let g = Arc::new(
                            bench_gateway::ThroughGateway::start(options.tokenizer)
                                .map_err(|e| Failure::Input(format!("--through-gateway: {e}")))?,
                        );
                        through = Some(g.clone());
                        g
                    }
                };
                Ok(Box::new(Shared(gateway)) as Box<dyn Strategy>)
            } else {
                parse_spec(s, &defaults).map_err(|e| Failure::Usage(e.to_string()))
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut files: Vec<InputFile> = Vec::new();
    if args.sample {
        files.extend(ctxgc_bench::samples::inputs());
    }
    for path in &args.inputs {
        let text = std::fs::read(path)
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                ctxgc_core::error::decode_utf8(&bytes)
                    .map(str::to_owned)
                    .map_err(|e| e.to_string())
            });
        files.push(InputFile {
            path: path.display().to_string(),
            text,
        });
    }
    if files.is_empty() {
        return Err(Failure::Usage(
            "nothing to bench: give input files or --sample".into(),
        ));
    }
    let config = BenchConfig {
        strategies,
        cache: CacheModel {
            cache_read: positive("--cache-read", args.cache_read)?,
            cache_write: positive("--cache-write", args.cache_write)?,
        },
        explain: args.explain,
        timing: !args.no_timing,
        limit: args.limit,
        options,
        long_sessions: args.long_sessions,
    };

    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} conversations {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut on_progress = |p: Progress<'_>| match p {
        Progress::Start { conversations } => bar.set_length(conversations as u64),
        Progress::Done { file, id } => {
            bar.set_message(format!("{} #{id}", file.rsplit('/').next().unwrap_or(file)));
            bar.inc(1);
        }
    };
    let report = run(&files, &config, &mut on_progress);
    bar.finish_and_clear();
    if let Some(gateway) = &through {
        eprintln!("ctxgc: {}", bench_gateway::summary(&gateway.totals()));
    }

    let write_to = |path: &Option<PathBuf>, text: String| -> Result<(), Failure> {
        match path {
            Some(p) => {
                std::fs::write(p, text).map_err(|e| Failure::Input(format!("{}: {e}", p.display())))
            }
            None => {
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes())?;
                Ok(())
            }
        }
    };
    match &output {
        Output::Table => write_to(&None, ctxgc_bench::table::render(&report, args.explain))?,
        Output::Json(path) => {
            let mut text =
                serde_json::to_string_pretty(&report).map_err(|e| Failure::Input(e.to_string()))?;
            text.push('\n');
            write_to(path, text)?;
        }
        Output::Html(path) => write_to(path, ctxgc_bench::html::render(&report))?,
    }
    if let Output::Json(Some(p)) | Output::Html(Some(p)) = &output {
        eprintln!("ctxgc: wrote {}", p.display());
    }
    let unreadable: Vec<&str> = report
        .files
        .iter()
        .filter(|f| f.error.is_some())
        .map(|f| f.path.as_str())
        .collect();
    if unreadable.is_empty() {
        Ok(())
    } else {
        Err(Failure::Input(format!(
            "{} input(s) could not be read: {}",
            unreadable.len(),
            unreadable.join(", ")
        )))
    }
}

/// The gateway strategy, shared with the caller that reports its totals.
struct Shared(Arc<bench_gateway::ThroughGateway>);

impl Strategy for Shared {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn description(&self) -> String {
        self.0.description()
    }
    fn compact(&self, prefix: Prefix<'_>) -> Result<Context, StrategyError> {
        self.0.compact(prefix)
    }
}
