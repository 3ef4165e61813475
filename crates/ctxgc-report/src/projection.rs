//! The tool-output report page: which tools fill the context, what a projection would
//! save on unseen runs, suggested actions, never-used fields, failed calls and every tool's
//! fields, from a [`Report`] (see `ctxgc_core::projection::report`).

use std::fmt::Write as _;

use ctxgc_core::projection::learn::FieldReason;
use ctxgc_core::projection::report::{ActionKind, FieldReport, Report, ToolReport, share};

use crate::html::{code_spans, escape, percent, thousands};

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
            name = escape(&name),
            x0 = label_w,
            by = y + 1.0,
            x1 = label_w + kept,
            x2 = label_w + kept + trimmed,
            rx = label_w + kept + trimmed + reser + 8.0,
            tok = thousands(t.tokens),
            share = percent(t.token_share),
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
        escape(&report.title)
    );
    let _ = write!(
        h,
        "<h1>Tool-output report</h1><p class=\"sub\">{} · {} runs ({} with a final answer) · {} tool calls · tokens counted with {}</p>",
        escape(&report.title),
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
            percent(f.removed_share),
            thousands(f.tool_tokens_before),
            thousands(f.tool_tokens_after)
        );
        let _ = write!(
            h,
            "<div class=\"card\"><div class=\"k\">…of which re-serialising alone</div><div class=\"v\">{}</div><div class=\"n\">compact JSON, nothing removed</div></div>",
            percent(f.reserialisation_share)
        );
        let _ = write!(
            h,
            "<div class=\"card\"><div class=\"k\">Misses</div><div class=\"v\">{}</div><div class=\"n\">{} of {} trimmed held-out calls hid a field the agent used</div></div>",
            percent(f.miss_rate),
            f.misses,
            f.calls
        );
    }
    let _ = write!(
        h,
        "<div class=\"card\"><div class=\"k\">Failed calls</div><div class=\"v\">{}</div><div class=\"n\">{} of all calls</div></div>",
        thousands(report.failed_calls),
        percent(share(report.failed_calls, report.calls))
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
                        percent(f.removed_share)
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
            escape(&t.tool),
            thousands(t.calls),
            thousands(t.tokens),
            percent(t.token_share),
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
                code_spans(&a.text)
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
                escape(tool),
                escape(&f.field),
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
                        escape(&g.message),
                        g.count
                    )
                })
                .collect::<String>();
            let _ = write!(
                h,
                "<tr><td><code>{}</code></td><td class=\"num\">{} / {}</td><td>{msgs}</td></tr>",
                escape(&t.tool),
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
            escape(&t.tool),
            t.fields.len(),
            thousands(t.calls),
            thousands(t.tokens)
        );
        if let Some(reason) = &t.disabled {
            let _ = write!(
                h,
                "<p><span class=\"chip drop\">not trimmed</span> {}</p>",
                escape(reason)
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
                escape(&f.field),
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
            let _ = write!(h, "<li>{}</li>", escape(n));
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
        FieldReason::Echoed => "shown in another field",
    };
    if f.dropped {
        format!("<span class=\"chip drop\">hidden</span> <span class=\"muted\">{reason}</span>")
    } else {
        format!("<span class=\"chip keep\">kept</span> <span class=\"muted\">{reason}</span>")
    }
}
