//! Automatic mode: observe the first runs unchanged, learn, then trim on its own, and stop
//! trimming a tool whose trimmed outputs the agent asks back too often.
//!
//! [`AutoTrim`] sits where tool results pass on their way to the model — an MCP proxy, or
//! the loop of an agent that runs its own tools — at three places:
//!
//! ```
//! use ctxgc_core::projection::auto::{AutoTrim, AutoConfig};
//! use serde_json::json;
//!
//! let mut tt = AutoTrim::new(AutoConfig { min_runs: 3, ..AutoConfig::default() });
//! // 1. offer the expand tool next to the agent's own tools
//! let expand_schema = AutoTrim::expand_tool();
//! assert_eq!(expand_schema.name, "expand");
//! for i in 0..4 {
//!     // 2. every tool result goes through `output` (and `expand` calls through `expand`)
//!     let raw = format!(r#"{{"order_id": "A{i}9", "total": 1{i}5, "warehouse_log": "picked at bay {i} by the morning crew, packed by the night shift, scanned twice at the loading dock and weighed again before the truck left the depot"}}"#);
//!     let shown = tt.output("get_order", r#"{"id": "A1"}"#, &raw);
//!     if i < 3 { assert_eq!(shown, raw) } else { assert!(shown.contains("[hidden: warehouse_log")) }
//!     // 3. the run ends with the agent's answer
//!     tt.done(&format!("Your order total is {}.", 105 + 10 * i));
//! }
//! // The state survives restarts: save it as JSON, load it back.
//! let saved = tt.to_json();
//! let tt = AutoTrim::from_json(&saved).unwrap();
//! assert_eq!(tt.runs_learned(), 4);
//! ```
//!
//! **Rules.** During the first [`AutoConfig::min_runs`] runs that end with an answer
//! ([`AutoTrim::done`]) outputs pass unchanged. After that, each output is trimmed with the
//! projection learned from every answered run so far (relearned after each run): identifying
//! fields kept, `expand` always able to give the rest back. A run that ends without an answer
//! ([`AutoTrim::end_without_answer`]) counts for the report, not for learning: without the
//! answer most of what the agent used is invisible. Fields the agent asks back count as used.
//! A tool whose trimmed outputs were expanded in more than
//! [`AutoConfig::max_expand_share`] of them (after at least
//! [`AutoConfig::min_trimmed_to_judge`]) is no longer trimmed, and the report says so.
//!
//! **Turns.** Calls that arrive one by one are each their own turn, so a later call's
//! arguments may count as using an earlier sibling's output. Callers that know the model's
//! turns pass them ([`AutoTrim::output_in_turn`]).
//!
//! **State.** The core does no I/O: [`AutoTrim::to_json`] and [`AutoTrim::from_json`] (or
//! [`AutoTrim::state`]) carry the learned counts, the run in progress and the per-tool
//! statistics; save them after each [`AutoTrim::done`] (and, to lose nothing, after each
//! call). The originals of trimmed outputs live in the [`ReceiptStore`], which a persistent
//! backend provides: start with [`AutoTrim::with_store`], resume with
//! `AutoTrim::from_state(AutoState::from_json(&saved)?, store)`.
//!
//! **For a proxy** (MCP or any other): offer [`AutoTrim::expand_tool`] and
//! [`AutoTrim::done_tool`] (`ctxgc_done`, whose `answer` argument goes to [`AutoTrim::done`])
//! next to the upstream tools; pass every upstream result through [`AutoTrim::output`];
//! answer `expand` with [`AutoTrim::expand`] (its error text is written for the agent);
//! show [`AutoTrim::report`] as a page with the `ctxgc-report` crate.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::apply::{
    EXPAND_TOOL, ExpandError, MemoryReceipts, Outcome, ReceiptStore, ToolSchema, expand_receipt,
    expand_request, expand_tool,
};
use super::counts::{Counts, observe_run};
use super::learn::{LearnOptions, Projection};
use super::report::Report;
use super::trace::{Run, parse_arguments};
use super::usage::UsageOptions;
use crate::tokens::Tokenizer;

/// The version of [`AutoState`]'s JSON.
pub const AUTO_STATE_FORMAT: u32 = 1;

/// The name of the tool an agent calls with its final answer (for proxies, which cannot
/// see the answer otherwise).
pub const DONE_TOOL: &str = "ctxgc_done";

/// How automatic mode behaves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AutoConfig {
    /// Runs with an answer to observe before trimming starts.
    pub min_runs: u64,
    /// A tool stops being trimmed when more than this share of its trimmed outputs were
    /// expanded.
    pub max_expand_share: f64,
    /// ... judged only after this many trimmed outputs.
    pub min_trimmed_to_judge: u64,
    /// The learner's rules.
    pub learn: LearnOptions,
    /// How usage is detected.
    pub usage: UsageOptions,
    /// Vocabulary for exact counts.
    pub tokenizer: Tokenizer,
}

impl Default for AutoConfig {
    fn default() -> Self {
        AutoConfig {
            min_runs: 5,
            max_expand_share: 0.25,
            min_trimmed_to_judge: 4,
            learn: LearnOptions::default(),
            usage: UsageOptions::default(),
            tokenizer: Tokenizer::default(),
        }
    }
}

/// Per-tool statistics of automatic mode.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolStats {
    /// Outputs seen.
    pub outputs: u64,
    /// Outputs trimmed.
    pub trimmed: u64,
    /// Trimmed outputs the agent expanded (each counted once).
    pub expanded: u64,
    /// Tokens the tool returned.
    pub tokens_in: u64,
    /// Tokens the agent received.
    pub tokens_out: u64,
    /// Set once the tool is no longer trimmed, with why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled: Option<String>,
}

/// Everything automatic mode remembers; serialisable so that it survives restarts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutoState {
    /// [`AUTO_STATE_FORMAT`].
    pub ctxgc_auto: u32,
    /// The configuration.
    pub config: AutoConfig,
    /// Counts of the runs that ended with an answer: what is learned from.
    pub learned: Counts,
    /// Counts of every finished run: what the report shows.
    pub telemetry: Counts,
    /// Per tool.
    pub tools: BTreeMap<String, ToolStats>,
    /// The projection in force (none while observing).
    pub projection: Option<Projection>,
    /// The run in progress.
    pub current: Run,
    /// References handed out in the run in progress → index of their call in it.
    pub current_refs: BTreeMap<String, usize>,
    /// References expanded in the run in progress.
    pub current_expanded: BTreeSet<String>,
    /// Runs finished so far (with or without an answer).
    pub runs_finished: u64,
}

impl AutoState {
    /// Reads state saved by [`AutoState::to_json`] (or [`AutoTrim::to_json`]), checking its
    /// version. Resume with [`AutoTrim::from_state`] over any receipt store.
    pub fn from_json(text: &str) -> Result<AutoState, AutoError> {
        let state: AutoState = serde_json::from_str(text).map_err(|e| AutoError::Json {
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
        if state.ctxgc_auto != AUTO_STATE_FORMAT {
            return Err(AutoError::Version(state.ctxgc_auto));
        }
        Ok(state)
    }

    /// The state as JSON.
    pub fn to_json(&self) -> String {
        // Plain data with string keys: serialising cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// What a finished run looked like.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The run's id.
    pub run: String,
    /// Tool outputs in it.
    pub outputs: u64,
    /// Of which trimmed.
    pub trimmed: u64,
    /// Expansions asked for.
    pub expansions: u64,
    /// Whether outputs are trimmed from the next run on.
    pub trimming: bool,
}

/// Automatic state could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum AutoError {
    /// Not JSON of the state's shape.
    #[error("automatic-mode state: line {line}, column {column}: {message}")]
    Json {
        /// One-based line.
        line: usize,
        /// One-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// Written by a version this build does not read.
    #[error(
        "automatic-mode state: format version {0} is not supported (this build reads version {AUTO_STATE_FORMAT})"
    )]
    Version(u32),
}

/// Call arguments as an SDK hands them over: parsed JSON, or JSON text.
#[derive(Debug, Clone, Copy)]
pub enum Arguments<'a> {
    /// Already parsed.
    Json(&'a Value),
    /// JSON text (kept as a string when it is not JSON).
    Text(&'a str),
}

impl<'a> From<&'a Value> for Arguments<'a> {
    fn from(v: &'a Value) -> Self {
        Arguments::Json(v)
    }
}

impl<'a> From<&'a str> for Arguments<'a> {
    fn from(s: &'a str) -> Self {
        Arguments::Text(s)
    }
}

impl<'a> From<&'a String> for Arguments<'a> {
    fn from(s: &'a String) -> Self {
        Arguments::Text(s)
    }
}

impl Arguments<'_> {
    fn to_value(self) -> Value {
        match self {
            Arguments::Json(v) => v.clone(),
            Arguments::Text(s) => parse_arguments(s),
        }
    }
}

/// Automatic mode over a receipt store (in memory by default).
#[derive(Debug, Clone)]
pub struct AutoTrim<S: ReceiptStore = MemoryReceipts> {
    state: AutoState,
    store: S,
}

/// Receipts kept by the default in-memory store.
const DEFAULT_RECEIPTS_KEPT: usize = 1024;

impl AutoTrim<MemoryReceipts> {
    /// The `expand` tool to offer the model (name, description, input schema); the same as
    /// [`expand_tool`] whatever the store.
    pub fn expand_tool() -> ToolSchema {
        expand_tool()
    }

    /// The tool an agent behind a proxy calls with its final answer ([`done_tool`]).
    pub fn done_tool() -> ToolSchema {
        done_tool()
    }

    /// Automatic mode with receipts kept in memory (the most recent 1024).
    pub fn new(config: AutoConfig) -> Self {
        AutoTrim::with_store(config, MemoryReceipts::with_capacity(DEFAULT_RECEIPTS_KEPT))
    }

    /// Reads saved state back, with receipts in memory (receipts from before the restart
    /// are gone; use [`AutoTrim::from_state`] with a persistent store to keep them).
    pub fn from_json(text: &str) -> Result<Self, AutoError> {
        let state = AutoState::from_json(text)?;
        Ok(AutoTrim::from_state(
            state,
            MemoryReceipts::with_capacity(DEFAULT_RECEIPTS_KEPT),
        ))
    }
}

impl<S: ReceiptStore> AutoTrim<S> {
    /// Automatic mode over a given receipt store.
    pub fn with_store(config: AutoConfig, store: S) -> Self {
        AutoTrim {
            state: AutoState {
                ctxgc_auto: AUTO_STATE_FORMAT,
                config,
                learned: Counts::default(),
                telemetry: Counts::default(),
                tools: BTreeMap::new(),
                projection: None,
                current: Run::new("run0"),
                current_refs: BTreeMap::new(),
                current_expanded: BTreeSet::new(),
                runs_finished: 0,
            },
            store,
        }
    }

    /// Resumes from saved state over a store.
    pub fn from_state(state: AutoState, store: S) -> Self {
        AutoTrim { state, store }
    }

    /// Parses saved state ([`AutoTrim::to_json`]); the same as [`AutoState::from_json`].
    pub fn parse_state(text: &str) -> Result<AutoState, AutoError> {
        AutoState::from_json(text)
    }

    /// The state, to save.
    pub fn state(&self) -> &AutoState {
        &self.state
    }

    /// The state as JSON, to save and give back to [`AutoTrim::from_json`].
    pub fn to_json(&self) -> String {
        self.state.to_json()
    }

    /// The receipt store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The receipt store, mutably.
    pub fn store_mut(&mut self) -> &mut S {
        &mut self.store
    }

    /// Runs with an answer learned from.
    pub fn runs_learned(&self) -> u64 {
        self.state.learned.runs
    }

    /// True once outputs are trimmed.
    pub fn is_trimming(&self) -> bool {
        self.state.projection.is_some()
    }

    /// The projection in force.
    pub fn projection(&self) -> Option<&Projection> {
        self.state.projection.as_ref()
    }

    /// Tools no longer trimmed, with why.
    pub fn disabled_tools(&self) -> BTreeMap<&str, &str> {
        self.state
            .tools
            .iter()
            .filter_map(|(t, s)| s.disabled.as_deref().map(|d| (t.as_str(), d)))
            .collect()
    }

    /// Per-tool statistics.
    pub fn tool_stats(&self) -> &BTreeMap<String, ToolStats> {
        &self.state.tools
    }

    /// Records the system prompt of the run in progress.
    pub fn prompt(&mut self, text: &str) {
        self.state.current.push_prompt(text);
    }

    /// Records a user turn of the run in progress (values in it are known to the agent).
    pub fn user(&mut self, text: &str) {
        self.state.current.push_user(text);
    }

    /// Records an agent message that is not the final answer.
    pub fn message(&mut self, text: &str) {
        self.state.current.push_message(text, None);
    }

    /// Records a tool call and returns what the model should receive: the raw output while
    /// observing, the trimmed one after. Never fails: whatever goes wrong (a store that
    /// cannot keep the original, say), the agent gets the output whole. Calls to `expand`
    /// go to [`AutoTrim::expand`] and the final answer to [`AutoTrim::done`]; given here by
    /// mistake, their text passes unchanged and unrecorded.
    ///
    /// `arguments` may be a `&serde_json::Value` or the JSON text most SDKs hand over.
    pub fn output<'a>(
        &mut self,
        tool: &str,
        arguments: impl Into<Arguments<'a>>,
        raw: &str,
    ) -> String {
        self.output_in_turn(tool, arguments, raw, None)
    }

    /// As [`AutoTrim::output`], with the model turn that emitted the call (calls of one turn
    /// never count as using each other's outputs).
    pub fn output_in_turn<'a>(
        &mut self,
        tool: &str,
        arguments: impl Into<Arguments<'a>>,
        raw: &str,
        turn: Option<i64>,
    ) -> String {
        if tool == EXPAND_TOOL || tool == DONE_TOOL {
            // Our own tools: what expand returns is never trimmed again (no loop), and
            // neither is recorded as a tool of the agent.
            return raw.to_owned();
        }
        let arguments = arguments.into().to_value();
        self.state.current.push_call(tool, arguments, raw, turn);
        let index = self.state.current.calls.len() - 1;
        let tokenizer = self.state.config.tokenizer;
        let stats = self.state.tools.entry(tool.to_owned()).or_default();
        stats.outputs += 1;
        stats.tokens_in += tokenizer.count(raw) as u64;
        let text = match (&self.state.projection, &stats.disabled) {
            (Some(p), None) => {
                let trimmed = p.apply(tool, raw);
                match (trimmed.outcome, trimmed.receipt) {
                    (Outcome::Trimmed, Some(receipt)) => {
                        let reference = receipt.reference.clone();
                        match self.store.put(receipt) {
                            Ok(()) => {
                                stats.trimmed += 1;
                                self.state.current_refs.insert(reference, index);
                                trimmed.text
                            }
                            // No receipt, no stub: a hidden field must always be redeemable.
                            Err(_) => raw.to_owned(),
                        }
                    }
                    _ => trimmed.text,
                }
            }
            _ => raw.to_owned(),
        };
        stats.tokens_out += tokenizer.count(&text) as u64;
        text
    }

    /// Answers an `expand` call (`{"ref": ..., "fields": [...]}`, as a value or JSON text).
    /// The fields asked back count as used; a tool expanded too often stops being trimmed.
    pub fn expand<'a>(
        &mut self,
        arguments: impl Into<Arguments<'a>>,
    ) -> Result<String, ExpandError> {
        let arguments = arguments.into().to_value();
        let (reference, wanted) = expand_request(&arguments)?;
        let receipt = self
            .store
            .get(&reference)?
            .ok_or_else(|| ExpandError::UnknownReference(reference.clone()))?;
        let answer = expand_receipt(&receipt, &wanted)?;
        let fields = if wanted.iter().any(|f| f.trim() == "*") {
            receipt.hidden.clone()
        } else {
            wanted
        };
        if let Some(&call) = self.state.current_refs.get(&reference) {
            self.state.current.push_expansion(call, fields);
        }
        if self.state.current_expanded.insert(reference) {
            let config = &self.state.config;
            let stats = self.state.tools.entry(receipt.tool.clone()).or_default();
            stats.expanded += 1;
            if stats.disabled.is_none()
                && stats.trimmed >= config.min_trimmed_to_judge
                && stats.expanded as f64 > config.max_expand_share * stats.trimmed as f64
            {
                stats.disabled = Some(format!(
                    "the agent asked back {} of its {} trimmed outputs (more than {:.0}%)",
                    stats.expanded,
                    stats.trimmed,
                    config.max_expand_share * 100.0
                ));
            }
        }
        Ok(answer)
    }

    /// Ends the run in progress with the agent's final answer: learns from it, and starts
    /// trimming once enough runs are in.
    pub fn done(&mut self, answer: &str) -> RunSummary {
        self.state.current.push_message(answer, None);
        self.finish(true)
    }

    /// Ends the run in progress without an answer: it counts for the report only.
    pub fn end_without_answer(&mut self) -> RunSummary {
        self.finish(false)
    }

    fn finish(&mut self, learn: bool) -> RunSummary {
        let run = std::mem::replace(
            &mut self.state.current,
            Run::new(format!("run{}", self.state.runs_finished + 1)),
        );
        let config = &self.state.config;
        let observed = observe_run(&run, &config.usage, config.tokenizer);
        self.state.telemetry.add(&observed.counts);
        if learn {
            self.state.learned.add(&observed.counts);
        }
        self.state.runs_finished += 1;
        if self.state.learned.runs >= config.min_runs {
            self.state.projection = Some(Projection::learn(
                &self.state.learned,
                &config.learn,
                config.tokenizer,
            ));
        }
        let summary = RunSummary {
            run: run.id.clone(),
            outputs: run.calls.len() as u64,
            trimmed: self.state.current_refs.len() as u64,
            expansions: run.expansions.len() as u64,
            trimming: self.state.projection.is_some(),
        };
        self.state.current_refs.clear();
        self.state.current_expanded.clear();
        summary
    }

    /// The report: telemetry of every finished run, the projection in force (or the one that
    /// would be, while observing), tools no longer trimmed and why.
    pub fn report(&self, title: &str) -> Report {
        let config = &self.state.config;
        let projection = self.state.projection.clone().unwrap_or_else(|| {
            Projection::learn(&self.state.learned, &config.learn, config.tokenizer)
        });
        let mut report = Report::from_counts(title, &self.state.telemetry, &projection, None);
        for (tool, stats) in &self.state.tools {
            if let Some(reason) = &stats.disabled {
                report.mark_disabled(tool, reason);
            }
        }
        let (tin, tout): (u64, u64) = self
            .state
            .tools
            .values()
            .fold((0, 0), |(a, b), s| (a + s.tokens_in, b + s.tokens_out));
        if self.state.projection.is_some() {
            report.notes.push(format!(
                "Automatic mode is trimming. Over every run so far, tools returned {tin} tokens and the agent received {tout}."
            ));
        } else {
            report.notes.push(format!(
                "Automatic mode is observing: {} of {} runs with an answer seen; outputs pass unchanged until then.",
                self.state.learned.runs, config.min_runs
            ));
        }
        report
    }
}

/// The tool an agent behind a proxy calls with its final answer; route its calls to
/// [`AutoTrim::done`] with the `answer` argument.
pub fn done_tool() -> ToolSchema {
    ToolSchema {
        name: DONE_TOOL.to_owned(),
        description: "Call this once, when your final answer is ready and before you show it, with the complete answer. Then show the same answer.".to_owned(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {"answer": {"type": "string", "description": "Your complete final answer."}},
            "required": ["answer"],
            "additionalProperties": false
        }),
    }
}

/// True when a call is to the expand tool of automatic mode (so callers can route it).
pub fn is_expand_call(tool: &str) -> bool {
    tool == EXPAND_TOOL
}
