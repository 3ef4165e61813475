//! The runner: loads inputs through the front-ends, runs every strategy on every
//! conversation, turn by turn, and builds the report.

use std::time::Instant;

use ctxgc_core::Options;
use ctxgc_core::frontend::lower_conversations;

use crate::context::{Context, SegmentKind};
use crate::prepare::{Calibration, Prepared};
use crate::probes::{Probes, score};
use crate::replay::{CacheModel, Replay, Replayer, TokenCache};
use crate::report::{
    BenchReport, ConversationReport, FileReport, Metrics, SCHEMA, StrategyEntry, StrategyResult,
    Wall, summarize,
};
use crate::strategy::ctxgc::Ctxgc;
use crate::strategy::full::Full;
use crate::strategy::{Prefix, Strategy};
use crate::survival::{SegmentValues, Survival, check_turn};

/// One input: a name and its text (or why it could not be read).
#[derive(Debug, Clone)]
pub struct InputFile {
    /// The path as given, or `sample:NAME`.
    pub path: String,
    /// Its text, or the reading error.
    pub text: Result<String, String>,
}

/// How the bench runs.
pub struct BenchConfig {
    /// The strategies, in report order.
    pub strategies: Vec<Box<dyn Strategy>>,
    /// Cache prices for replayed cost.
    pub cache: CacheModel,
    /// Keep every miss in the report.
    pub explain: bool,
    /// Measure wall time (off: all timings are 0, so reports are byte-reproducible).
    pub timing: bool,
    /// Bench at most this many conversations per file.
    pub limit: Option<usize>,
    /// How inputs are read (format, unknown events, tokenizer).
    pub options: Options,
    /// Concatenate each input's conversations into sessions of at least this many tokens
    /// ([`crate::long`]).
    pub long_sessions: Option<usize>,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            strategies: crate::strategy::default_specs()
                .into_iter()
                .filter_map(|s| crate::strategy::parse_spec(s, &Default::default()).ok())
                .collect(),
            cache: CacheModel::default(),
            explain: false,
            timing: true,
            limit: None,
            options: Options::default(),
            long_sessions: None,
        }
    }
}

/// What the runner tells its caller as it goes.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// Every input is loaded: this many conversations will be benched.
    Start {
        /// Conversations in all.
        conversations: usize,
    },
    /// One conversation is done.
    Done {
        /// Its file.
        file: &'a str,
        /// Its id.
        id: &'a str,
    },
}

/// Loads one input: its conversations, prepared, or why it could not be read.
pub fn load(file: &InputFile, config: &BenchConfig) -> Result<Vec<Prepared>, String> {
    let text = file.text.as_ref().map_err(Clone::clone)?;
    let mut conversations =
        lower_conversations(text, &config.options).map_err(|e| e.to_string())?;
    if let Some(target) = config.long_sessions {
        conversations = crate::long::concatenate(&conversations, target, &config.options)?;
    }
    let take = config.limit.unwrap_or(usize::MAX);
    conversations
        .into_iter()
        .take(take)
        .map(|c| {
            let probes = Probes::from_document(&c.raw)
                .map_err(|e| format!("conversation {:?}: {e}", c.id))?;
            Ok(Prepared::new(
                file.path.clone(),
                c,
                config.options.clone(),
                probes,
            ))
        })
        .collect()
}

/// Runs the bench on every input.
///
/// ```
/// use ctxgc_bench::run::{run, BenchConfig, InputFile};
/// let trace = r#"[
///   {"id": "e1", "type": "set_var", "timestamp": 1, "key": "db", "value": "postgres://db-primary-01.internal:5432/orders?sslmode=require"},
///   {"id": "e2", "type": "set_var", "timestamp": 2, "key": "db", "value": "postgres://db-replica-02.internal:5432/orders?sslmode=require"},
///   {"id": "e3", "type": "tool_call", "timestamp": 3, "tool_name": "query", "arguments": {"table": "orders_2024"}}
/// ]"#;
/// let config = BenchConfig { timing: false, ..BenchConfig::default() };
/// let report = run(&[InputFile { path: "t.json".into(), text: Ok(trace.into()) }], &config, &mut |_| {});
/// let ctxgc = report.totals.iter().find(|s| s.strategy == "ctxgc").unwrap();
/// assert!(ctxgc.tokens_after < ctxgc.tokens_before);
/// assert_eq!(ctxgc.missed_values, 0);
/// ```
pub fn run(
    files: &[InputFile],
    config: &BenchConfig,
    progress: &mut dyn FnMut(Progress<'_>),
) -> BenchReport {
    let loaded: Vec<(FileReport, Vec<Prepared>)> = files
        .iter()
        .map(|file| match load(file, config) {
            Ok(prepared) => (
                FileReport {
                    path: file.path.clone(),
                    format: prepared
                        .first()
                        .map(|p| p.conversation.format.name().to_owned()),
                    conversations: prepared.len(),
                    error: None,
                    summaries: Vec::new(),
                },
                prepared,
            ),
            Err(error) => (
                FileReport {
                    path: file.path.clone(),
                    format: None,
                    conversations: 0,
                    error: Some(error),
                    summaries: Vec::new(),
                },
                Vec::new(),
            ),
        })
        .collect();
    run_loaded(loaded, config, progress)
}

/// Runs the bench on conversations already prepared (built by hand, or from another source),
/// grouped under the name of the file they are reported for.
pub fn run_prepared(
    groups: Vec<(String, Vec<Prepared>)>,
    config: &BenchConfig,
    progress: &mut dyn FnMut(Progress<'_>),
) -> BenchReport {
    let loaded = groups
        .into_iter()
        .map(|(path, prepared)| {
            (
                FileReport {
                    path,
                    format: prepared
                        .first()
                        .map(|p| p.conversation.format.name().to_owned()),
                    conversations: prepared.len(),
                    error: None,
                    summaries: Vec::new(),
                },
                prepared,
            )
        })
        .collect();
    run_loaded(loaded, config, progress)
}

fn run_loaded(
    mut loaded: Vec<(FileReport, Vec<Prepared>)>,
    config: &BenchConfig,
    progress: &mut dyn FnMut(Progress<'_>),
) -> BenchReport {
    progress(Progress::Start {
        conversations: loaded.iter().map(|(_, p)| p.len()).sum(),
    });
    let mut tokens = TokenCache::new(config.options.tokenizer);
    let calibrator = Ctxgc::default_configuration();
    let baseline = Full;
    if config.strategies.iter().any(|s| s.wants_projection()) {
        for (_, prepared) in &mut loaded {
            crate::prepare::learn_leave_one_out(prepared);
        }
    }
    let mut conversations = Vec::new();
    for (file, prepared) in &mut loaded {
        for input in prepared.iter_mut() {
            input.calibration = calibrate(input, &calibrator, &mut tokens);
            let report = bench_conversation(&file.path, input, &baseline, config, &mut tokens);
            progress(Progress::Done {
                file: &file.path,
                id: &report.id,
            });
            conversations.push(report);
        }
    }
    let names: Vec<String> = config
        .strategies
        .iter()
        .map(|s| s.name().to_owned())
        .collect();
    let files: Vec<FileReport> = loaded
        .into_iter()
        .map(|(mut file, _)| {
            file.summaries = names
                .iter()
                .map(|n| summarize(n, conversations.iter().filter(|c| c.file == file.path)))
                .collect();
            file
        })
        .collect();
    let totals = names
        .iter()
        .map(|n| summarize(n, conversations.iter()))
        .collect();
    BenchReport {
        schema: SCHEMA,
        tokenizer: config.options.tokenizer.name(),
        cache: config.cache,
        timing: config.timing,
        strategies: config
            .strategies
            .iter()
            .map(|s| StrategyEntry {
                name: s.name().to_owned(),
                description: s.description(),
            })
            .collect(),
        files,
        conversations,
        totals,
    }
}

/// ctxgc's size on the whole conversation, which truncation matches.
fn calibrate(
    input: &Prepared,
    ctxgc: &Ctxgc,
    tokens: &mut TokenCache,
) -> Result<Calibration, String> {
    let whole = Prefix {
        input,
        len: input.conversation.items.len(),
    };
    let context = ctxgc.compact(whole).map_err(|e| e.to_string())?;
    Ok(Calibration {
        items: context.items_kept.saturating_sub(input.system_items()),
        tokens: tokens.context_tokens(&context),
    })
}

/// What one strategy did on one conversation, before comparison with `full`.
#[derive(Clone)]
struct Outcome {
    final_context: Context,
    survival: Survival,
    replay: Replay,
    deterministic: bool,
    wall: Wall,
}

fn millis(start: Instant, timing: bool) -> f64 {
    if timing {
        start.elapsed().as_secs_f64() * 1000.0
    } else {
        0.0
    }
}

/// Replays one strategy over a conversation: one request before each agent turn, then the
/// whole conversation, twice.
fn replay_strategy(
    strategy: &dyn Strategy,
    input: &Prepared,
    config: &BenchConfig,
    tokens: &mut TokenCache,
    values: &mut SegmentValues,
) -> Result<Outcome, String> {
    let mut survival = Survival::default();
    let mut replayer = Replayer::default();
    let mut request_ms = 0.0;
    let mut run = strategy.run(input);
    for (k, &t) in input.turns.iter().enumerate() {
        if t == 0 {
            continue; // nothing before it: no request carries history
        }
        let start = Instant::now();
        let context = run
            .context(t)
            .map_err(|e| format!("before turn {t} ({}): {e}", input.conversation.items[t].id))?;
        request_ms += millis(start, config.timing);
        let recalled = check_turn(input, k, &context, values, &mut survival, config.explain);
        replayer.send(&context, tokens, config.cache);
        for i in recalled {
            replayer.recall(input.tokens[i], config.cache);
        }
    }
    let whole = Prefix {
        input,
        len: input.conversation.items.len(),
    };
    let start = Instant::now();
    let final_context = strategy
        .compact(whole)
        .map_err(|e| format!("on the whole conversation: {e}"))?;
    let final_compile = millis(start, config.timing);
    let again = strategy
        .compact(whole)
        .map_err(|e| format!("on the whole conversation, second run: {e}"))?;
    let requests = replayer.bill.requests;
    Ok(Outcome {
        deterministic: again == final_context,
        final_context,
        survival,
        replay: replayer.bill,
        wall: Wall {
            final_compile,
            per_request_mean: if requests > 0 {
                request_ms / requests as f64
            } else {
                0.0
            },
        },
    })
}

fn tool_output_tokens(context: &Context, tokens: &mut TokenCache) -> usize {
    context
        .segments
        .iter()
        .filter(|s| s.kind == SegmentKind::ToolOutput)
        .map(|s| tokens.count(&s.text).1)
        .sum()
}

fn bench_conversation(
    file: &str,
    input: &Prepared,
    baseline: &Full,
    config: &BenchConfig,
    tokens: &mut TokenCache,
) -> ConversationReport {
    let mut values = SegmentValues::default();
    let base = replay_strategy(baseline, input, config, tokens, &mut values);
    let (before, tool_before, full_cost) = match &base {
        Ok(o) => (
            tokens.context_tokens(&o.final_context),
            tool_output_tokens(&o.final_context, tokens),
            o.replay.cost,
        ),
        Err(_) => (0, 0, 0.0),
    };
    let results = config
        .strategies
        .iter()
        .map(|strategy| {
            let outcome = if strategy.name() == baseline.name() {
                base.clone()
            } else {
                replay_strategy(strategy.as_ref(), input, config, tokens, &mut values)
            };
            match outcome {
                Err(error) => StrategyResult {
                    strategy: strategy.name().to_owned(),
                    error: Some(error),
                    metrics: None,
                },
                Ok(o) => {
                    let after = tokens.context_tokens(&o.final_context);
                    let mut replay = o.replay;
                    replay.full_cost = full_cost;
                    replay.relative_to_full = (full_cost > 0.0).then(|| replay.cost / full_cost);
                    StrategyResult {
                        strategy: strategy.name().to_owned(),
                        error: None,
                        metrics: Some(Metrics {
                            tokens_before: before,
                            tokens_after: after,
                            reduction: if before > 0 {
                                1.0 - after as f64 / before as f64
                            } else {
                                0.0
                            },
                            tool_output_tokens_before: tool_before,
                            tool_output_tokens_after: tool_output_tokens(&o.final_context, tokens),
                            items_kept: o.final_context.items_kept,
                            survival: o.survival,
                            probes: input
                                .probes
                                .as_ref()
                                .map(|p| score(input, p, &o.final_context)),
                            deterministic: o.deterministic,
                            replay,
                            wall_ms: o.wall,
                        }),
                    }
                }
            }
        })
        .collect();
    ConversationReport {
        file: file.to_owned(),
        id: input.conversation.id.clone(),
        format: input.conversation.format.name().to_owned(),
        items: input.conversation.items.len(),
        turns: input.turns.len(),
        results,
    }
}
