//! The telemetry report: which tools fill the context and with what, which fields the agent
//! never uses, what a projection would save on unseen runs, which calls fail, and what to
//! do about it. [`Report`] is plain data: serialise it for `report.json`, or render it as a
//! page with the `ctxgc-report` crate (the core renders no HTML).
//!
//! ```
//! use ctxgc_core::projection::{Run, report::Report, measure::MeasureOptions};
//! use serde_json::json;
//! let runs: Vec<Run> = (0..3).map(|i| {
//!     let mut run = Run::new(format!("r{i}"));
//!     run.push_call("lookup", json!({"q": "x"}), format!(r#"{{"id": "K{i}7", "body": "long text {i} nobody quotes again at all"}}"#), None);
//!     run.push_message("Found K07.", None);
//!     run
//! }).collect();
//! let report = Report::build("demo", &runs, &MeasureOptions::default());
//! assert_eq!(report.tools[0].tool, "lookup");
//! assert_eq!(report.runs, 3);
//! ```

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::counts::{Counts, ToolCounts};
use super::fields::OPAQUE_FIELD;
use super::learn::{FieldReason, Projection, is_identifying};
use super::measure::{Figures, MeasureOptions, Measurement, measure_observed, observe_all};
use super::trace::Run;
use crate::tokens::Tokenizer;

/// One failure message and how often it came back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureGroup {
    /// The message (digits folded to `#`).
    pub message: String,
    /// How many calls returned it.
    pub count: u64,
}

/// One field of a tool, as the report shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldReport {
    /// Generalised path.
    pub field: String,
    /// Calls that had it.
    pub seen: u64,
    /// Calls that used it.
    pub used: u64,
    /// Tokens it cost, over all calls.
    pub tokens: u64,
    /// Kept or dropped by the learned projection.
    pub dropped: bool,
    /// Why.
    pub reason: FieldReason,
}

/// One tool, as the report shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolReport {
    /// The tool.
    pub tool: String,
    /// Calls with an output.
    pub calls: u64,
    /// Runs that called it.
    pub runs: u64,
    /// Calls that failed.
    pub failed: u64,
    /// Failure messages, most frequent first (at most 5).
    pub failures: Vec<FailureGroup>,
    /// Tokens of its outputs as returned.
    pub tokens: u64,
    /// Its share of all tool-output tokens.
    pub token_share: f64,
    /// Average tokens per output.
    pub avg_tokens: u64,
    /// Tokens after compact re-serialisation alone.
    pub compact_tokens: u64,
    /// Fields, costliest first.
    pub fields: Vec<FieldReport>,
    /// Fields never used (identifying ones excluded), costliest first.
    pub never_used: Vec<String>,
    /// Tokens those never-used fields cost.
    pub never_used_tokens: u64,
    /// The output is plain text (one opaque field).
    pub plain_text: bool,
    /// Leave-one-out figures, when measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub projected: Option<Figures>,
    /// Set when automatic mode stopped trimming this tool, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled: Option<String>,
}

/// Whether a suggested action is applied by automatic mode or left to a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    /// Automatic mode applies it (the learned projection).
    Automatic,
    /// For a person to review.
    Manual,
}

/// A suggested action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SuggestedAction {
    /// Automatic or manual.
    pub kind: ActionKind,
    /// The tool it is about, if one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// What to do and why, in a sentence or two.
    pub text: String,
}

impl SuggestedAction {
    /// A manual action about `tool`.
    fn manual(tool: &str, text: String) -> Self {
        SuggestedAction {
            kind: ActionKind::Manual,
            tool: Some(tool.to_owned()),
            text,
        }
    }
}

/// The report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// A title (the traces' name).
    pub title: String,
    /// The vocabulary that counted tokens.
    pub tokenizer: Tokenizer,
    /// Runs read.
    pub runs: u64,
    /// Runs that ended with an agent message.
    pub runs_with_answer: u64,
    /// Tool calls with an output.
    pub calls: u64,
    /// Calls that failed.
    pub failed_calls: u64,
    /// Tokens of all tool outputs.
    pub tool_tokens: u64,
    /// Leave-one-out measurement, when there were runs to hold out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measurement: Option<Measurement>,
    /// Tools, most tokens first.
    pub tools: Vec<ToolReport>,
    /// What to do.
    pub actions: Vec<SuggestedAction>,
    /// Remarks about the input (calls left out, results without calls, ...).
    pub notes: Vec<String>,
}

/// `part / whole` rounded to four decimals (0 when `whole` is 0): how the report states shares.
///
/// ```
/// assert_eq!(ctxgc_core::projection::report::share(1, 3), 0.3333);
/// assert_eq!(ctxgc_core::projection::report::share(5, 0), 0.0);
/// ```
pub fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        ((part as f64 / whole as f64) * 10_000.0).round() / 10_000.0
    }
}

fn tool_report(
    name: &str,
    t: &ToolCounts,
    total_tokens: u64,
    projection: &Projection,
    projected: Option<&Figures>,
) -> ToolReport {
    let decisions: BTreeMap<&str, (bool, FieldReason)> = projection
        .tools
        .get(name)
        .map(|p| {
            p.keep
                .iter()
                .map(|d| (d.field.as_str(), (false, d.reason)))
                .chain(p.drop.iter().map(|d| (d.field.as_str(), (true, d.reason))))
                .collect()
        })
        .unwrap_or_default();
    let mut fields: Vec<FieldReport> = t
        .fields
        .iter()
        .map(|(path, f)| {
            let (dropped, reason) = decisions
                .get(path.as_str())
                .copied()
                .unwrap_or((false, FieldReason::TooFewObservations));
            FieldReport {
                field: path.clone(),
                seen: f.seen,
                used: f.used,
                tokens: f.tokens,
                dropped,
                reason,
            }
        })
        .collect();
    fields.sort_by(|a, b| b.tokens.cmp(&a.tokens).then_with(|| a.field.cmp(&b.field)));
    let never: Vec<&FieldReport> = fields
        .iter()
        .filter(|f| f.used == 0 && !is_identifying(&f.field, &t.fields[&f.field]))
        .collect();
    let mut failures: Vec<FailureGroup> = t
        .failures
        .iter()
        .map(|(m, c)| FailureGroup {
            message: m.clone(),
            count: *c,
        })
        .collect();
    failures.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.message.cmp(&b.message))
    });
    failures.truncate(5);
    ToolReport {
        tool: name.to_owned(),
        calls: t.calls,
        runs: t.runs,
        failed: t.failed,
        failures,
        tokens: t.tokens,
        token_share: share(t.tokens, total_tokens),
        avg_tokens: t.tokens.checked_div(t.calls).unwrap_or(0),
        compact_tokens: t.compact_tokens,
        never_used: never.iter().map(|f| f.field.clone()).collect(),
        never_used_tokens: never.iter().map(|f| f.tokens).sum(),
        plain_text: t.structured == 0,
        fields,
        projected: projected.cloned(),
        disabled: None,
    }
}

impl Report {
    /// Builds the report of a set of runs: counts, the projection learned from all of them,
    /// and a leave-one-out measurement.
    pub fn build(title: &str, runs: &[Run], options: &MeasureOptions) -> Report {
        let observed = observe_all(runs, options);
        let counts = Counts::sum(observed.iter().map(|o| &o.counts));
        let projection = Projection::learn(&counts, &options.learn, options.tokenizer);
        let measurement = (runs.len() >= 2).then(|| measure_observed(runs, &observed, options));
        let mut report = Report::from_counts(title, &counts, &projection, measurement);
        let user_calls: u64 = runs.iter().map(|r| r.user_calls).sum();
        let orphans: u64 = runs.iter().map(|r| r.orphan_results).sum();
        if user_calls > 0 {
            report.notes.push(format!(
                "{user_calls} tool calls made by the (simulated) user were left out: the agent never saw their outputs."
            ));
        }
        if orphans > 0 {
            report.notes.push(format!(
                "{orphans} tool results answer no call of the agent (dangling call ids) and were left out."
            ));
        }
        report
    }

    /// Builds the report from counts and a projection (what automatic mode has), with a
    /// measurement if one was made.
    pub fn from_counts(
        title: &str,
        counts: &Counts,
        projection: &Projection,
        measurement: Option<Measurement>,
    ) -> Report {
        let total: u64 = counts.tools.values().map(|t| t.tokens).sum();
        let mut tools: Vec<ToolReport> = counts
            .tools
            .iter()
            .map(|(name, t)| {
                let projected = measurement.as_ref().and_then(|m| m.per_tool.get(name));
                tool_report(name, t, total, projection, projected)
            })
            .collect();
        tools.sort_by(|a, b| b.tokens.cmp(&a.tokens).then_with(|| a.tool.cmp(&b.tool)));
        let mut report = Report {
            title: title.to_owned(),
            tokenizer: projection.tokenizer,
            runs: counts.runs,
            runs_with_answer: counts.runs_with_answer,
            calls: counts.tools.values().map(|t| t.calls).sum(),
            failed_calls: counts.tools.values().map(|t| t.failed).sum(),
            tool_tokens: total,
            measurement,
            tools,
            actions: Vec::new(),
            notes: Vec::new(),
        };
        report.actions = suggest(&report, projection);
        report
    }

    /// Marks a tool as no longer trimmed by automatic mode, with the reason, and says so in
    /// the actions.
    pub fn mark_disabled(&mut self, tool: &str, reason: &str) {
        if let Some(t) = self.tools.iter_mut().find(|t| t.tool == tool) {
            t.disabled = Some(reason.to_owned());
        }
        self.actions
            .retain(|a| !(a.kind == ActionKind::Automatic && a.tool.as_deref() == Some(tool)));
        let text = format!(
            "`{tool}` is no longer trimmed: {reason}. Review which of its fields the agent needs, then edit the projection."
        );
        self.actions.insert(0, SuggestedAction::manual(tool, text));
    }
}

fn list_fields(fields: &[String], max: usize) -> String {
    let mut s = fields
        .iter()
        .take(max)
        .map(|f| format!("`{f}`"))
        .collect::<Vec<_>>()
        .join(", ");
    if fields.len() > max {
        let _ = write!(s, " and {} more", fields.len() - max);
    }
    s
}

/// Automatic trims listed one by one; the rest are summed up in one line.
const LISTED_TRIMS: usize = 10;

fn suggest(report: &Report, projection: &Projection) -> Vec<SuggestedAction> {
    let mut actions = Vec::new();
    let mut trims = 0;
    let (mut more_tools, mut more_tokens) = (0, 0);
    for t in &report.tools {
        let dropped: Vec<String> = projection
            .tools
            .get(&t.tool)
            .map(|p| p.drop.iter().map(|d| d.field.clone()).collect())
            .unwrap_or_default();
        if let Some(f) = &t.projected
            && f.calls > 0
            && f.tool_tokens_after < f.tool_tokens_before
        {
            let saved = f.tool_tokens_before - f.tool_tokens_after;
            trims += 1;
            if trims > LISTED_TRIMS {
                more_tools += 1;
                more_tokens += saved;
            } else {
                actions.push(SuggestedAction {
                kind: ActionKind::Automatic,
                tool: Some(t.tool.clone()),
                text: format!(
                    "Trim `{}`: hide {} ({} fields). On unseen runs this removed {} of its {} tokens ({:.0}%), and a used field would have been hidden in {} of {} trimmed calls.",
                    t.tool,
                    list_fields(&dropped, 3),
                    dropped.len(),
                    saved,
                    f.tool_tokens_before,
                    f.removed_share * 100.0,
                    f.misses,
                    f.calls
                ),
            });
            }
        }
        if t.failed >= 2 && t.failed * 5 >= t.calls {
            let top = t
                .failures
                .first()
                .map(|g| format!(" Most often: “{}” ({}×).", g.message, g.count))
                .unwrap_or_default();
            let text = format!(
                "`{}` failed in {} of {} calls.{top} Check the arguments the agent sends, or make the tool's description clearer.",
                t.tool, t.failed, t.calls
            );
            actions.push(SuggestedAction::manual(&t.tool, text));
        }
        if t.plain_text
            && t.fields
                .iter()
                .any(|f| f.field == OPAQUE_FIELD && f.reason == FieldReason::WholeOutput)
            && t.avg_tokens >= 20
        {
            let text = format!(
                "`{}` returns plain text (about {} tokens a call) that the agent never visibly reused in {} calls. If it only confirms success, hide it: add `{OPAQUE_FIELD}` to its `drop` list.",
                t.tool, t.avg_tokens, t.calls
            );
            actions.push(SuggestedAction::manual(&t.tool, text));
        } else if t.plain_text && t.avg_tokens >= 1000 {
            let text = format!(
                "`{}` returns long plain text (about {} tokens a call). Ask the tool for less: filters, pagination, or a summary mode.",
                t.tool, t.avg_tokens
            );
            actions.push(SuggestedAction::manual(&t.tool, text));
        }
    }
    if more_tools > 0 {
        actions.push(SuggestedAction {
            kind: ActionKind::Automatic,
            tool: None,
            text: format!(
                "Trim {more_tools} more tools with smaller outputs: together {more_tokens} tokens fewer on unseen runs (see the table above)."
            ),
        });
    }
    if let Some(m) = &report.measurement {
        for mf in m.missed_fields.iter().take(5) {
            let text = format!(
                "`{}` of `{}` was used in {} held-out call(s) but would have been hidden. If the task needs it, move it to `keep`.",
                mf.field, mf.tool, mf.calls
            );
            actions.push(SuggestedAction::manual(&mf.tool, text));
        }
    }
    let unanswered = report.runs.saturating_sub(report.runs_with_answer);
    if unanswered > 0 {
        actions.push(SuggestedAction {
            kind: ActionKind::Manual,
            tool: None,
            text: format!(
                "{unanswered} of {} runs end without an agent message: record the final answer, or the learner cannot see what those runs used.",
                report.runs
            ),
        });
    }
    actions
}
