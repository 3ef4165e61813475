//! Strategies: every way a user could manage an agent's context, behind one trait.
//!
//! A strategy is asked, for a prefix of a conversation (what the agent has at some turn), what
//! it would send to the model. The built-in ones are listed in [`BUILTIN`], one line each;
//! adding a strategy is adding a line there. A strategy is named on the command line by a
//! *spec*: its name, optionally followed by `:key=value,key=value` parameters
//! (`clear-tool-results:trigger=20000,keep=5`), or `external:COMMAND`.

use std::time::Duration;

use thiserror::Error;

use ctxgc_core::chat::Preset;

use crate::context::Context;
use crate::prepare::Prepared;

pub mod clear_tool_results;
pub mod ctxgc;
pub mod external;
pub mod full;
pub mod mask;
pub mod truncate;

/// Why a strategy could not give a context for one input.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{0}")]
pub struct StrategyError(pub String);

/// Why a strategy spec could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SpecError {
    /// No strategy has this name.
    #[error("unknown strategy {0:?} (known: {1})")]
    Unknown(String, String),
    /// A parameter is unknown or its value is wrong.
    #[error("strategy {strategy}: {message}")]
    Parameter {
        /// The strategy.
        strategy: String,
        /// What is wrong.
        message: String,
    },
}

/// One prefix of a conversation: the first `len` items of `input`.
#[derive(Debug, Clone, Copy)]
pub struct Prefix<'a> {
    /// The conversation, prepared.
    pub input: &'a Prepared,
    /// How many of its items the agent has.
    pub len: usize,
}

/// A way to manage context: full history, truncation, provider clearing, ctxgc, or any other
/// compactor.
pub trait Strategy: Send + Sync {
    /// The name it is reported under (its spec, parameters included).
    fn name(&self) -> &str;
    /// One line on what it does, with its parameters.
    fn description(&self) -> String;
    /// What it sends to the model for this prefix.
    fn compact(&self, prefix: Prefix<'_>) -> Result<Context, StrategyError>;
    /// True when it needs each conversation's leave-one-out projection
    /// ([`crate::prepare::Prepared::projection`]), which the runner then learns.
    fn wants_projection(&self) -> bool {
        false
    }
    /// A run over one conversation, asked for its prefixes in order of growing length: what a
    /// replay calls before each agent turn. By default each prefix is compacted on its own
    /// ([`Strategy::compact`]); a strategy that keeps a session between requests, as the
    /// surfaces a user runs in a loop do, feeds it only what was appended.
    fn run<'a>(&'a self, input: &'a Prepared) -> Box<dyn PrefixRun + 'a> {
        Box::new(EachPrefix {
            strategy: self,
            input,
        })
    }
}

/// A strategy's run over one conversation ([`Strategy::run`]).
pub trait PrefixRun {
    /// What the strategy sends for the first `len` items; `len` never shrinks from one call
    /// to the next.
    fn context(&mut self, len: usize) -> Result<Context, StrategyError>;
}

/// The run that compacts each prefix on its own.
struct EachPrefix<'a, S: ?Sized> {
    strategy: &'a S,
    input: &'a Prepared,
}

impl<S: Strategy + ?Sized> PrefixRun for EachPrefix<'_, S> {
    fn context(&mut self, len: usize) -> Result<Context, StrategyError> {
        self.strategy.compact(Prefix {
            input: self.input,
            len,
        })
    }
}

/// Settings strategies share, given on the command line.
#[derive(Debug, Clone, PartialEq)]
pub struct StrategyDefaults {
    /// `clear-tool-results`: input tokens above which clearing starts.
    pub clear_trigger: usize,
    /// `clear-tool-results`: how many of the most recent tool results stay.
    pub clear_keep: usize,
    /// `external:CMD`: how long one run of the command may take.
    pub external_timeout: Duration,
}

impl Default for StrategyDefaults {
    fn default() -> Self {
        StrategyDefaults {
            clear_trigger: 100_000,
            clear_keep: 3,
            external_timeout: Duration::from_secs(60),
        }
    }
}

/// Parameters given after a strategy's name.
#[derive(Debug, Clone, Default)]
pub struct Params {
    /// The strategy's name.
    pub strategy: String,
    /// `key=value` pairs, in order.
    pub pairs: Vec<(String, String)>,
    /// Shared settings.
    pub defaults: StrategyDefaults,
}

impl Params {
    /// Parameter `key` as a number, or `default`.
    pub fn number(&self, key: &str, default: usize) -> Result<usize, SpecError> {
        match self.pairs.iter().rev().find(|(k, _)| k == key) {
            None => Ok(default),
            Some((_, v)) => v
                .replace('_', "")
                .parse()
                .map_err(|_| SpecError::Parameter {
                    strategy: self.strategy.clone(),
                    message: format!("{key}={v:?}: expected a whole number"),
                }),
        }
    }

    /// Parameter `key` as text, or `default`.
    pub fn text(&self, key: &str, default: &str) -> String {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map_or_else(|| default.to_owned(), |(_, v)| v.clone())
    }

    /// Fails on any parameter not in `known`.
    pub fn only(&self, known: &[&str]) -> Result<(), SpecError> {
        match self
            .pairs
            .iter()
            .find(|(k, _)| !known.contains(&k.as_str()))
        {
            None => Ok(()),
            Some((k, _)) => Err(SpecError::Parameter {
                strategy: self.strategy.clone(),
                message: if known.is_empty() {
                    format!("takes no parameters, got {k:?}")
                } else {
                    format!("unknown parameter {k:?} (known: {})", known.join(", "))
                },
            }),
        }
    }
}

/// Builds a strategy from its spec and parameters.
pub type BuildFn = fn(&str, &Params) -> Result<Box<dyn Strategy>, SpecError>;

/// A built-in strategy: its name, what it is, whether it runs by default, how to build it.
pub struct StrategyInfo {
    /// The name in specs and reports.
    pub name: &'static str,
    /// One line on what it does.
    pub summary: &'static str,
    /// Runs when no `--strategy` is given.
    pub default: bool,
    /// Builds it from parameters (its full spec becomes its reported name).
    pub build: BuildFn,
}

/// Every built-in strategy, in report order. One line per strategy.
#[rustfmt::skip]
pub const BUILTIN: &[StrategyInfo] = &[
    StrategyInfo { name: "full", summary: "no compaction: the whole history every turn", default: true, build: full::build },
    StrategyInfo { name: "truncate-events", summary: "the system prompt plus the last N items, N = the items ctxgc keeps on that input (param n=)", default: true, build: truncate::build_events },
    StrategyInfo { name: "truncate-tokens", summary: "the system prompt plus the most recent items within N tokens, N = ctxgc's output tokens on that input (param n=)", default: true, build: truncate::build_tokens },
    StrategyInfo { name: "clear-tool-results", summary: "provider-side clearing: above `trigger` input tokens, all but the `keep` most recent tool results become a placeholder (params trigger=, keep=, clear-at-least=, placeholder=)", default: true, build: clear_tool_results::build },
    StrategyInfo { name: "ctxgc", summary: "ctxgc compile, default configuration", default: true, build: ctxgc::build_default },
    StrategyInfo { name: "ctxgc-recall", summary: "ctxgc compile --expand-tool ctxgc_recall: the default preset with a recall tool offered, so sampling and folding apply to outputs the agent has answered", default: true, build: ctxgc::build_recall },
    StrategyInfo { name: "ctxgc-projection", summary: "as ctxgc-recall, plus tool-output projections learned leave-one-out from the other conversations of the same file, applied on arrival", default: true, build: ctxgc::build_projection },
    StrategyInfo { name: "ctxgc-lossless", summary: "ctxgc compile --preset lossless: only rewrites that lose nothing and provably dead items", default: true, build: |_, p| ctxgc::configured(p, "ctxgc-lossless", "ctxgc compile --preset lossless", |o| o.chat.preset = Preset::Lossless) },
    StrategyInfo { name: "ctxgc-aggressive", summary: "ctxgc compile --preset aggressive: lower thresholds for sampling and folding", default: true, build: |_, p| ctxgc::configured(p, "ctxgc-aggressive", "ctxgc compile --preset aggressive", |o| o.chat.preset = Preset::Aggressive) },
    StrategyInfo { name: "mask-observations", summary: "tool outputs older than the last `keep` agent turns become a stub naming the recall tool, in steps taken only when they pay under the prompt cache (params keep=, eager=, min-reclaim=); for long sessions", default: false, build: mask::build },
    StrategyInfo { name: "ctxgc-cache", summary: "ctxgc compile --preset cache-stable: earlier output kept byte-stable, history compacted only in steps that pay for themselves under the prompt-cache cost model", default: true, build: |_, p| ctxgc::configured(p, "ctxgc-cache", "ctxgc compile --preset cache-stable", |o| o.chat.cache = Some(ctxgc_core::session::CacheModel::default())) },
    StrategyInfo { name: "ctxgc-cache-recall", summary: "ctxgc compile --preset cache-stable --expand-tool ctxgc_recall: what the gateway runs with --recall; answered outputs older than the last 3 agent turns are masked behind the recall tool in steps that pay (not run by default)", default: false, build: |_, p| ctxgc::configured(p, "ctxgc-cache-recall", "ctxgc compile --preset cache-stable --expand-tool ctxgc_recall", |o| { o.chat.expand_tool = Some(ctxgc::RECALL_TOOL.to_owned()); o.chat.cache = Some(ctxgc_core::session::CacheModel::default()); }) },
    StrategyInfo { name: "ctxgc-cache-projection", summary: "ctxgc compile --preset cache-stable with a recall tool and the leave-one-out projection: what the gateway runs with --recall and a projection", default: true, build: ctxgc::build_cache_projection },
];

/// Builds a strategy from its spec: `NAME`, `NAME:key=value,...` or `external:COMMAND`.
///
/// ```
/// use ctxgc_bench::strategy::{parse_spec, StrategyDefaults};
/// let s = parse_spec("clear-tool-results:trigger=20000,keep=5", &StrategyDefaults::default()).unwrap();
/// assert_eq!(s.name(), "clear-tool-results:trigger=20000,keep=5");
/// assert!(parse_spec("nope", &StrategyDefaults::default()).is_err());
/// ```
pub fn parse_spec(spec: &str, defaults: &StrategyDefaults) -> Result<Box<dyn Strategy>, SpecError> {
    let spec = spec.trim();
    if let Some(command) = spec.strip_prefix("external:") {
        return external::External::new(command, defaults.external_timeout)
            .map(|s| Box::new(s) as Box<dyn Strategy>);
    }
    let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
    let info = BUILTIN.iter().find(|i| i.name == name).ok_or_else(|| {
        let known: Vec<&str> = BUILTIN.iter().map(|i| i.name).collect();
        SpecError::Unknown(
            name.to_owned(),
            format!("{}, external:CMD", known.join(", ")),
        )
    })?;
    let mut pairs = Vec::new();
    for part in rest.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| SpecError::Parameter {
            strategy: name.to_owned(),
            message: format!("{part:?}: expected key=value"),
        })?;
        pairs.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let params = Params {
        strategy: name.to_owned(),
        pairs,
        defaults: defaults.clone(),
    };
    (info.build)(spec, &params)
}

/// The strategies that run when none is named.
pub fn default_specs() -> Vec<&'static str> {
    BUILTIN
        .iter()
        .filter(|i| i.default)
        .map(|i| i.name)
        .collect()
}
