//! Leave-one-out measurement: every run is trimmed with a projection learned from all the
//! *other* runs, as if it were the next run of the agent, and we count
//!
//! - tool-output tokens before (as the tools returned them) and after (trimmed, footer
//!   included), exact BPE; and after re-serialising the JSON alone, removing nothing, to
//!   show how much of the reduction that part brings;
//! - **misses**: held-out calls in which a field the agent did use (in that run) would have
//!   been removed. The miss rate is over the held-out calls that were trimmed (a call left
//!   whole cannot miss anything); the rate over all held-out calls is given too.
//!
//! Usage is detected once per run and counts are learned once: each run's own counts are
//! subtracted from the total to get the projection of the others, so the cost is linear in
//! the number of runs.
//!
//! ```
//! use ctxgc_core::projection::{Run, measure::{measure, MeasureOptions}};
//! use serde_json::json;
//! let runs: Vec<Run> = (0..4).map(|i| {
//!     let mut run = Run::new(format!("r{i}"));
//!     let out = format!(r#"{{"order_id": "A{i}", "total": 1{i}5, "audit": {{"created_by": "system batch job", "note": "{}"}}}}"#, "checked by the nightly reconciliation run ".repeat(4));
//!     run.push_call("get_order", json!({}), out, None);
//!     run.push_message(format!("Your total is {}.", 105 + 10 * i), None);
//!     run
//! }).collect();
//! let m = measure(&runs, &MeasureOptions::default());
//! assert_eq!(m.overall.calls_total, 4);
//! assert_eq!(m.overall.misses, 0);
//! assert!(m.overall.tool_tokens_after < m.overall.tool_tokens_compact);
//! assert!(m.overall.tool_tokens_compact < m.overall.tool_tokens_before);
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::apply::Outcome;
use super::counts::{Counts, Observed, observe_run};
use super::learn::{LearnOptions, Projection};
use super::trace::Run;
use super::usage::UsageOptions;
use crate::tokens::Tokenizer;

/// What a measurement is run with.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MeasureOptions {
    /// Rules of the learner.
    pub learn: LearnOptions,
    /// How usage is detected.
    pub usage: UsageOptions,
    /// Vocabulary for exact counts.
    pub tokenizer: Tokenizer,
}

/// Figures over a set of held-out calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Tool-output tokens as the tools returned them.
    pub tool_tokens_before: u64,
    /// Tool-output tokens the agent would have received (trimmed, footers included).
    pub tool_tokens_after: u64,
    /// Tool-output tokens after compact re-serialisation alone (nothing removed).
    pub tool_tokens_compact: u64,
    /// Tool-output tokens after the lossless encoding alone (compact JSON, or tables when
    /// they are on), nothing removed.
    pub tool_tokens_lossless: u64,
    /// Share of tool-output tokens removed: `1 - after / before`.
    pub removed_share: f64,
    /// Share removed by re-serialisation alone: `1 - compact / before`.
    pub reserialisation_share: f64,
    /// Share removed by the lossless encoding alone: `1 - lossless / before`.
    pub lossless_share: f64,
    /// Held-out calls with an output.
    pub calls_total: u64,
    /// Held-out calls trimmed (some field hidden): the calls a miss can happen in.
    pub calls: u64,
    /// Trimmed held-out calls in which a field the agent used would have been removed.
    pub misses: u64,
    /// `misses / calls`.
    pub miss_rate: f64,
    /// `misses / calls_total`.
    pub miss_rate_all: f64,
}

impl Figures {
    fn add(&mut self, o: &Figures) {
        self.tool_tokens_before += o.tool_tokens_before;
        self.tool_tokens_after += o.tool_tokens_after;
        self.tool_tokens_compact += o.tool_tokens_compact;
        self.tool_tokens_lossless += o.tool_tokens_lossless;
        self.calls_total += o.calls_total;
        self.calls += o.calls;
        self.misses += o.misses;
    }

    fn finish(&mut self) {
        let share = |part: u64, whole: u64| {
            if whole == 0 {
                0.0
            } else {
                round4(part as f64 / whole as f64)
            }
        };
        self.removed_share = share(
            self.tool_tokens_before
                .saturating_sub(self.tool_tokens_after),
            self.tool_tokens_before,
        );
        self.reserialisation_share = share(
            self.tool_tokens_before
                .saturating_sub(self.tool_tokens_compact),
            self.tool_tokens_before,
        );
        self.lossless_share = share(
            self.tool_tokens_before
                .saturating_sub(self.tool_tokens_lossless),
            self.tool_tokens_before,
        );
        self.miss_rate = share(self.misses, self.calls);
        self.miss_rate_all = share(self.misses, self.calls_total);
    }
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// A field whose removal caused misses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissedField {
    /// The tool.
    pub tool: String,
    /// The field.
    pub field: String,
    /// Held-out calls in which it was used but removed.
    pub calls: u64,
}

/// The result of a leave-one-out measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Runs measured (each held out once).
    pub runs: u64,
    /// The vocabulary that counted.
    pub tokenizer: Tokenizer,
    /// The learner's rules.
    pub rules: LearnOptions,
    /// How usage was detected.
    pub usage: UsageOptions,
    /// Over every tool.
    pub overall: Figures,
    /// Per tool.
    pub per_tool: BTreeMap<String, Figures>,
    /// Fields behind the misses, most misses first.
    pub missed_fields: Vec<MissedField>,
}

/// Observes every run (usage and counts, once each).
pub fn observe_all(runs: &[Run], options: &MeasureOptions) -> Vec<Observed> {
    runs.iter()
        .map(|r| observe_run(r, &options.usage, options.tokenizer))
        .collect()
}

/// Leave-one-out over `runs`.
pub fn measure(runs: &[Run], options: &MeasureOptions) -> Measurement {
    let observed = observe_all(runs, options);
    measure_observed(runs, &observed, options)
}

/// Leave-one-out over runs already observed (`observed[i]` is `runs[i]`'s).
pub fn measure_observed(
    runs: &[Run],
    observed: &[Observed],
    options: &MeasureOptions,
) -> Measurement {
    let total = Counts::sum(observed.iter().map(|o| &o.counts));
    let mut per_tool: BTreeMap<String, Figures> = BTreeMap::new();
    let mut missed: BTreeMap<(String, String), u64> = BTreeMap::new();
    // Nothing dropped, the same encoding: what re-encoding alone gives.
    let mut lossless_only = Projection::empty(options.tokenizer);
    lossless_only.rules = options.learn.clone();
    let count = |text: &str| options.tokenizer.count(text) as u64;
    for (run, seen) in runs.iter().zip(observed) {
        // The other runs' counts: the total without this run, for this run's tools only.
        let mut others = Counts {
            runs: total.runs,
            runs_with_answer: total.runs_with_answer,
            tools: seen
                .counts
                .tools
                .keys()
                .filter_map(|t| total.tools.get(t).map(|c| (t.clone(), c.clone())))
                .collect(),
        };
        others.subtract(&seen.counts);
        let projection = Projection::learn(&others, &options.learn, options.tokenizer);
        for call_seen in &seen.calls {
            let call = &run.calls[call_seen.index];
            let Some(raw) = &call.output else {
                continue;
            };
            let trimmed = projection.apply_flagged(&call.tool, raw, call.is_error);
            let figures = per_tool.entry(call.tool.clone()).or_default();
            figures.calls_total += 1;
            figures.tool_tokens_before += call_seen.tokens;
            figures.tool_tokens_compact += call_seen.compact_tokens;
            let tables = options.learn.tables;
            figures.tool_tokens_lossless += if tables {
                let plain = lossless_only.apply_flagged(&call.tool, raw, call.is_error);
                match plain.outcome {
                    Outcome::AsIs => call_seen.tokens,
                    _ => count(&plain.text),
                }
            } else {
                call_seen.compact_tokens
            };
            match trimmed.outcome {
                Outcome::Trimmed => {
                    figures.calls += 1;
                    figures.tool_tokens_after += count(&trimmed.text);
                    let mut any = false;
                    for field in call_seen.usage.used.intersection(&trimmed.removed) {
                        any = true;
                        *missed
                            .entry((call.tool.clone(), field.clone()))
                            .or_default() += 1;
                    }
                    figures.misses += u64::from(any);
                }
                Outcome::Compacted if tables => figures.tool_tokens_after += count(&trimmed.text),
                Outcome::Compacted => figures.tool_tokens_after += call_seen.compact_tokens,
                Outcome::AsIs => figures.tool_tokens_after += call_seen.tokens,
            }
        }
    }
    let mut overall = Figures::default();
    for f in per_tool.values_mut() {
        overall.add(f);
        f.finish();
    }
    overall.finish();
    let mut missed_fields: Vec<MissedField> = missed
        .into_iter()
        .map(|((tool, field), calls)| MissedField { tool, field, calls })
        .collect();
    missed_fields.sort_by(|a, b| {
        b.calls
            .cmp(&a.calls)
            .then_with(|| (&a.tool, &a.field).cmp(&(&b.tool, &b.field)))
    });
    Measurement {
        runs: runs.len() as u64,
        tokenizer: options.tokenizer,
        rules: options.learn.clone(),
        usage: options.usage,
        overall,
        per_tool,
        missed_fields,
    }
}
