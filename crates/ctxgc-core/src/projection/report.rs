//! The telemetry report: which tools fill the context and with what, which fields the agent
//! never uses, what a projection would save on unseen runs, which calls fail, and what to
//! do about it. [`Report`] is plain data (serialise it for `report.json`); [`render_html`]
//! turns it into one self-contained page (inline CSS and SVG, no scripts, no external
//! assets) that is byte-identical for identical input.
//!
//! ```
//! use ctxgc_core::projection::{Run, report::{Report, render_html}, measure::MeasureOptions};
//! use serde_json::json;
//! let runs: Vec<Run> = (0..3).map(|i| {
//!     let mut run = Run::new(format!("r{i}"));
//!     run.push_call("lookup", json!({"q": "x"}), format!(r#"{{"id": "K{i}7", "body": "long text {i} nobody quotes again at all"}}"#), None);
//!     run.push_message("Found K07.", None);
//!     run
//! }).collect();
//! let report = Report::build("demo", &runs, &MeasureOptions::default());
//! assert_eq!(report.tools[0].tool, "lookup");
//! let html = render_html(&report);
//! assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<svg"));
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

fn share(part: u64, whole: u64) -> f64 {
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
        self.actions.insert(
            0,
            SuggestedAction {
                kind: ActionKind::Manual,
                tool: Some(tool.to_owned()),
                text: format!(
                    "`{tool}` is no longer trimmed: {reason}. Review which of its fields the agent needs, then edit the projection."
                ),
            },
        );
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
            actions.push(SuggestedAction {
                kind: ActionKind::Manual,
                tool: Some(t.tool.clone()),
                text: format!(
                    "`{}` failed in {} of {} calls.{top} Check the arguments the agent sends, or make the tool's description clearer.",
                    t.tool, t.failed, t.calls
                ),
            });
        }
        if t.plain_text
            && t.fields
                .iter()
                .any(|f| f.field == OPAQUE_FIELD && f.reason == FieldReason::WholeOutput)
            && t.avg_tokens >= 20
        {
            actions.push(SuggestedAction {
                kind: ActionKind::Manual,
                tool: Some(t.tool.clone()),
                text: format!(
                    "`{}` returns plain text (about {} tokens a call) that the agent never visibly reused in {} calls. If it only confirms success, hide it: add `{OPAQUE_FIELD}` to its `drop` list.",
                    t.tool, t.avg_tokens, t.calls
                ),
            });
        } else if t.plain_text && t.avg_tokens >= 1000 {
            actions.push(SuggestedAction {
                kind: ActionKind::Manual,
                tool: Some(t.tool.clone()),
                text: format!(
                    "`{}` returns long plain text (about {} tokens a call). Ask the tool for less: filters, pagination, or a summary mode.",
                    t.tool, t.avg_tokens
                ),
            });
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
            actions.push(SuggestedAction {
                kind: ActionKind::Manual,
                tool: Some(mf.tool.clone()),
                text: format!(
                    "`{}` of `{}` was used in {} held-out call(s) but would have been hidden. If the task needs it, move it to `keep`.",
                    mf.field, mf.tool, mf.calls
                ),
            });
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

// ------------------------------------------------------------------------------------------
// HTML.

fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Inline `code` spans of an action text, escaped.
fn rich(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in s.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{}</code>", esc(part));
        } else {
            out.push_str(&esc(part));
        }
    }
    out
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

const CSS: &str = r#"
:root{--ink:#1d2433;--muted:#5b6475;--line:#e3e7ee;--bg:#f6f7fb;--card:#fff;--kept:#3b6fd8;--cut:#e8833a;--ser:#9ab4ea;--ok:#2f9e6b;--bad:#c8453b}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);font:15px/1.5 -apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1100px;margin:0 auto;padding:32px 24px 64px}
h1{font-size:26px;margin:0 0 4px}
h2{font-size:19px;margin:36px 0 12px}
.sub{color:var(--muted);margin:0 0 24px}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(170px,1fr));gap:14px}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px 18px}
.card .k{color:var(--muted);font-size:13px}
.card .v{font-size:26px;font-weight:650;margin-top:2px}
.card .n{color:var(--muted);font-size:13px;margin-top:4px}
.panel{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:18px 20px}
table{width:100%;border-collapse:collapse;font-size:14px}
th,td{text-align:left;padding:7px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{color:var(--muted);font-weight:600;font-size:12.5px;text-transform:uppercase;letter-spacing:.03em}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
code{font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#eef1f7;padding:1px 5px;border-radius:4px}
ul.actions{list-style:none;padding:0;margin:0}
ul.actions li{padding:10px 0;border-bottom:1px solid var(--line);display:flex;gap:12px}
ul.actions li:last-child{border-bottom:0}
.tag{flex:none;font-size:11.5px;font-weight:650;border-radius:999px;padding:2px 9px;height:fit-content;text-transform:uppercase;letter-spacing:.03em}
.tag.auto{background:#e4f4ec;color:var(--ok)}
.tag.manual{background:#fdf0e6;color:#b5621f}
.chip{font-size:12px;border-radius:5px;padding:1px 7px;white-space:nowrap}
.chip.drop{background:#fde8e6;color:var(--bad)}
.chip.keep{background:#e6eefc;color:var(--kept)}
.bar{display:inline-block;height:8px;border-radius:4px;background:var(--line);width:90px;position:relative;vertical-align:middle}
.bar i{position:absolute;left:0;top:0;bottom:0;border-radius:4px;background:var(--kept)}
details{background:var(--card);border:1px solid var(--line);border-radius:10px;margin:10px 0;padding:0 18px}
details summary{cursor:pointer;padding:13px 0;font-weight:600;list-style-position:inside}
details[open] summary{border-bottom:1px solid var(--line);margin-bottom:8px}
.muted{color:var(--muted)}
.legend{display:flex;gap:18px;font-size:13px;color:var(--muted);margin:4px 0 10px}
.legend span::before{content:"";display:inline-block;width:11px;height:11px;border-radius:3px;margin-right:6px;vertical-align:-1px;background:var(--c)}
footer{margin-top:40px;color:var(--muted);font-size:13px}
"#;

/// The bar chart of tokens per tool: kept, removed by re-serialisation, removed by trimming.
fn chart(report: &Report) -> String {
    let tools: Vec<&ToolReport> = report.tools.iter().take(12).collect();
    let max = tools.iter().map(|t| t.tokens).max().unwrap_or(0).max(1);
    let (label_w, bar_w, row_h, right_w) = (230.0, 600.0, 30.0, 150.0);
    let width = label_w + bar_w + right_w;
    let height = row_h * tools.len() as f64 + 10.0;
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" role="img" aria-label="Tool-output tokens per tool">"#
    );
    for (i, t) in tools.iter().enumerate() {
        let y = 5.0 + row_h * i as f64;
        let scale = bar_w / max as f64;
        let (after, compact) = match &t.projected {
            Some(f) => (
                f.tool_tokens_after,
                f.tool_tokens_compact.max(f.tool_tokens_after),
            ),
            None => (t.compact_tokens, t.compact_tokens),
        };
        let kept = after.min(t.tokens) as f64 * scale;
        let trimmed = compact.saturating_sub(after).min(t.tokens) as f64 * scale;
        let reser = t.tokens.saturating_sub(compact.max(after)) as f64 * scale;
        let name = if t.tool.chars().count() > 30 {
            format!("{}…", t.tool.chars().take(29).collect::<String>())
        } else {
            t.tool.clone()
        };
        let _ = write!(
            svg,
            r##"<text x="{lx}" y="{ty}" text-anchor="end" font-size="13" fill="#1d2433">{name}</text><rect x="{x0}" y="{by}" width="{kept:.1}" height="18" rx="3" fill="#3b6fd8"/><rect x="{x1:.1}" y="{by}" width="{trimmed:.1}" height="18" fill="#e8833a"/><rect x="{x2:.1}" y="{by}" width="{reser:.1}" height="18" fill="#9ab4ea"/><text x="{rx:.1}" y="{ty}" font-size="12.5" fill="#5b6475">{tok} · {share}</text>"##,
            lx = label_w - 10.0,
            ty = y + 14.0,
            name = esc(&name),
            x0 = label_w,
            by = y + 1.0,
            x1 = label_w + kept,
            x2 = label_w + kept + trimmed,
            rx = label_w + kept + trimmed + reser + 8.0,
            tok = thousands(t.tokens),
            share = pct(t.token_share),
        );
    }
    svg.push_str("</svg>");
    svg
}

/// Renders the report as one self-contained HTML page.
pub fn render_html(report: &Report) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{} — tool-output report</title><style>{CSS}</style></head><body><main>",
        esc(&report.title)
    );
    let _ = write!(
        h,
        "<h1>Tool-output report</h1><p class=\"sub\">{} · {} runs ({} with a final answer) · {} tool calls · tokens counted with {}</p>",
        esc(&report.title),
        report.runs,
        report.runs_with_answer,
        thousands(report.calls),
        report.tokenizer.name()
    );
    // Headline figures.
    h.push_str("<div class=\"cards\">");
    let _ = write!(
        h,
        "<div class=\"card\"><div class=\"k\">Tool-output tokens</div><div class=\"v\">{}</div><div class=\"n\">{} tools, {} calls</div></div>",
        thousands(report.tool_tokens),
        report.tools.len(),
        thousands(report.calls)
    );
    if let Some(m) = &report.measurement {
        let f = &m.overall;
        let _ = write!(
            h,
            "<div class=\"card\"><div class=\"k\">Removed on unseen runs</div><div class=\"v\">{}</div><div class=\"n\">{} → {} tokens, leave-one-out</div></div>",
            pct(f.removed_share),
            thousands(f.tool_tokens_before),
            thousands(f.tool_tokens_after)
        );
        let _ = write!(
            h,
            "<div class=\"card\"><div class=\"k\">…of which re-serialising alone</div><div class=\"v\">{}</div><div class=\"n\">compact JSON, nothing removed</div></div>",
            pct(f.reserialisation_share)
        );
        let _ = write!(
            h,
            "<div class=\"card\"><div class=\"k\">Misses</div><div class=\"v\">{}</div><div class=\"n\">{} of {} trimmed held-out calls hid a field the agent used</div></div>",
            pct(f.miss_rate),
            f.misses,
            f.calls
        );
    }
    let _ = write!(
        h,
        "<div class=\"card\"><div class=\"k\">Failed calls</div><div class=\"v\">{}</div><div class=\"n\">{} of all calls</div></div>",
        thousands(report.failed_calls),
        pct(share(report.failed_calls, report.calls))
    );
    h.push_str("</div>");

    // Which tools fill the context.
    h.push_str("<h2>Which tools fill the context</h2><div class=\"panel\">");
    h.push_str("<div class=\"legend\"><span style=\"--c:#3b6fd8\">what the agent gets</span><span style=\"--c:#e8833a\">hidden by the projection</span><span style=\"--c:#9ab4ea\">saved by re-serialising</span></div>");
    h.push_str(&chart(report));
    h.push_str("<table><thead><tr><th>Tool</th><th class=\"num\">Calls</th><th class=\"num\">Tokens</th><th class=\"num\">Share</th><th class=\"num\">Avg / call</th><th class=\"num\">After (unseen)</th><th class=\"num\">Misses</th><th class=\"num\">Failed</th></tr></thead><tbody>");
    for t in &report.tools {
        let (after, misses) = match &t.projected {
            Some(f) => (
                if f.tool_tokens_after < f.tool_tokens_before {
                    format!(
                        "{} <span class=\"muted\">(−{})</span>",
                        thousands(f.tool_tokens_after),
                        pct(f.removed_share)
                    )
                } else {
                    format!(
                        "{} <span class=\"muted\">(same)</span>",
                        thousands(f.tool_tokens_after)
                    )
                },
                if f.calls == 0 {
                    "<span class=\"muted\">not trimmed</span>".to_owned()
                } else {
                    format!("{} / {}", f.misses, f.calls)
                },
            ),
            None => ("—".to_owned(), "—".to_owned()),
        };
        let disabled = t
            .disabled
            .as_ref()
            .map(|_| " <span class=\"chip drop\">not trimmed</span>")
            .unwrap_or_default();
        let _ = write!(
            h,
            "<tr><td><code>{}</code>{disabled}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{after}</td><td class=\"num\">{misses}</td><td class=\"num\">{}</td></tr>",
            esc(&t.tool),
            thousands(t.calls),
            thousands(t.tokens),
            pct(t.token_share),
            thousands(t.avg_tokens),
            t.failed
        );
    }
    h.push_str("</tbody></table></div>");

    // Actions.
    h.push_str("<h2>Suggested actions</h2><div class=\"panel\">");
    if report.actions.is_empty() {
        h.push_str("<p class=\"muted\">Nothing to suggest: no tool has fields that are never used, and no tool fails often.</p>");
    } else {
        h.push_str("<ul class=\"actions\">");
        for a in &report.actions {
            let (class, label) = match a.kind {
                ActionKind::Automatic => ("auto", "automatic"),
                ActionKind::Manual => ("manual", "review"),
            };
            let _ = write!(
                h,
                "<li><span class=\"tag {class}\">{label}</span><span>{}</span></li>",
                rich(&a.text)
            );
        }
        h.push_str("</ul>");
    }
    h.push_str("</div>");

    // Never-used fields.
    h.push_str("<h2>Fields the agent never used</h2><div class=\"panel\">");
    let mut never: Vec<(&str, &FieldReport)> = report
        .tools
        .iter()
        .flat_map(|t| {
            t.fields
                .iter()
                .filter(|f| t.never_used.contains(&f.field))
                .map(move |f| (t.tool.as_str(), f))
        })
        .collect();
    never.sort_by(|a, b| {
        b.1.tokens
            .cmp(&a.1.tokens)
            .then_with(|| (a.0, &a.1.field).cmp(&(b.0, &b.1.field)))
    });
    if never.is_empty() {
        h.push_str(
            "<p class=\"muted\">Every field was used at least once (or identifies a record).</p>",
        );
    } else {
        h.push_str("<p class=\"muted\">Not reused in any later call or message. Identifying fields (ids, names, titles) are left out of this list: they stay so the agent can refer to records.</p><table><thead><tr><th>Tool</th><th>Field</th><th class=\"num\">Seen in</th><th class=\"num\">Tokens</th><th>Decision</th></tr></thead><tbody>");
        for (tool, f) in never.iter().take(40) {
            let _ = write!(
                h,
                "<tr><td><code>{}</code></td><td><code>{}</code></td><td class=\"num\">{} calls</td><td class=\"num\">{}</td><td>{}</td></tr>",
                esc(tool),
                esc(&f.field),
                thousands(f.seen),
                thousands(f.tokens),
                decision_chip(f)
            );
        }
        h.push_str("</tbody></table>");
        if never.len() > 40 {
            let _ = write!(
                h,
                "<p class=\"muted\">…and {} more in report.json.</p>",
                never.len() - 40
            );
        }
    }
    h.push_str("</div>");

    // Failed calls.
    h.push_str("<h2>Failed calls</h2><div class=\"panel\">");
    let failing: Vec<&ToolReport> = report.tools.iter().filter(|t| t.failed > 0).collect();
    if failing.is_empty() {
        h.push_str("<p class=\"muted\">No call failed.</p>");
    } else {
        h.push_str("<table><thead><tr><th>Tool</th><th class=\"num\">Failed</th><th>Most frequent messages</th></tr></thead><tbody>");
        for t in failing {
            let msgs = t
                .failures
                .iter()
                .map(|g| {
                    format!(
                        "<div><code>{}</code> <span class=\"muted\">×{}</span></div>",
                        esc(&g.message),
                        g.count
                    )
                })
                .collect::<String>();
            let _ = write!(
                h,
                "<tr><td><code>{}</code></td><td class=\"num\">{} / {}</td><td>{msgs}</td></tr>",
                esc(&t.tool),
                t.failed,
                t.calls
            );
        }
        h.push_str("</tbody></table>");
    }
    h.push_str("</div>");

    // Per-tool fields.
    h.push_str("<h2>Fields, tool by tool</h2>");
    for t in &report.tools {
        let _ = write!(
            h,
            "<details><summary><code>{}</code> <span class=\"muted\">— {} fields, {} calls, {} tokens</span></summary>",
            esc(&t.tool),
            t.fields.len(),
            thousands(t.calls),
            thousands(t.tokens)
        );
        if let Some(reason) = &t.disabled {
            let _ = write!(
                h,
                "<p><span class=\"chip drop\">not trimmed</span> {}</p>",
                esc(reason)
            );
        }
        h.push_str("<table><thead><tr><th>Field</th><th>Used</th><th class=\"num\">Tokens</th><th>Decision</th></tr></thead><tbody>");
        for f in t.fields.iter().take(60) {
            let frac = if f.seen == 0 {
                0.0
            } else {
                f.used as f64 / f.seen as f64
            };
            let _ = write!(
                h,
                "<tr><td><code>{}</code></td><td><span class=\"bar\"><i style=\"width:{:.0}%\"></i></span> <span class=\"muted\">{} / {}</span></td><td class=\"num\">{}</td><td>{}</td></tr>",
                esc(&f.field),
                frac * 100.0,
                f.used,
                f.seen,
                thousands(f.tokens),
                decision_chip(f)
            );
        }
        h.push_str("</tbody></table>");
        if t.fields.len() > 60 {
            let _ = write!(
                h,
                "<p class=\"muted\">…and {} more fields in report.json.</p>",
                t.fields.len() - 60
            );
        }
        h.push_str("</details>");
    }

    if !report.notes.is_empty() {
        h.push_str("<h2>Notes</h2><div class=\"panel\"><ul>");
        for n in &report.notes {
            let _ = write!(h, "<li>{}</li>", esc(n));
        }
        h.push_str("</ul></div>");
    }
    h.push_str("<footer>A field is <em>used</em> when one of its values reappears, after the output, in a later tool call's arguments or in an agent message (case, number formats and dates normalised; values the agent already had do not count). <em>Unseen runs</em>: each run trimmed with a projection learned from the other runs. A <em>miss</em> is a trimmed call that hid a field the agent used. Generated by ctxgc.</footer>");
    h.push_str("</main></body></html>\n");
    h
}

fn decision_chip(f: &FieldReport) -> String {
    let reason = match f.reason {
        FieldReason::Identifying => "identifying",
        FieldReason::Used => "used",
        FieldReason::TooFewObservations => "too few calls to judge",
        FieldReason::NeverUsed => "never used",
        FieldReason::RarelyUsed => "rarely used",
        FieldReason::WholeOutput => "whole text output",
        FieldReason::HoldsFields => "holds fields",
        FieldReason::Reviewed => "reviewed",
    };
    if f.dropped {
        format!("<span class=\"chip drop\">hidden</span> <span class=\"muted\">{reason}</span>")
    } else {
        format!("<span class=\"chip keep\">kept</span> <span class=\"muted\">{reason}</span>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_is_escaped_and_numbers_grouped() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(rich("use `<b>` now"), "use <code>&lt;b&gt;</code> now");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(12), "12");
    }
}
