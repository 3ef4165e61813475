//! The HTML report: one self-contained page (inline CSS and SVG, no script, no external
//! asset) with the totals table, one table per input, and bar charts of token reduction,
//! used-value misses and replayed cost per strategy.

use std::fmt::Write as _;

use ctxgc_report::html::escape;

use crate::report::{BenchReport, Summary};
use crate::table::thousands;

/// One colour per strategy, in report order (colour-blind-safe palette).
const PALETTE: [&str; 8] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#9c755f",
];

const STYLE: &str = "
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1f2328;margin:0;background:#f6f8fa}
main{max-width:1320px;margin:0 auto;padding:24px 32px 48px;background:#fff;min-height:100vh}
h1{font-size:24px;margin:0 0 4px}h2{font-size:18px;margin:32px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{font-size:15px;margin:20px 0 6px;word-break:break-all}
p.meta{color:#57606a;margin:0 0 16px}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;margin:6px 0 12px;font-size:13px;font-variant-numeric:tabular-nums}
th,td{padding:5px 7px;border-bottom:1px solid #eaeef2;text-align:right;white-space:nowrap}
th{background:#f6f8fa;font-weight:600;font-size:12px;color:#57606a;white-space:normal;vertical-align:bottom}
th:first-child,td:first-child{text-align:left}
td.err{color:#cf222e}
.swatch{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;vertical-align:baseline}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(330px,1fr));gap:16px}
.wide{display:grid;grid-template-columns:1fr;gap:16px}
figure{margin:0;padding:12px;border:1px solid #d0d7de;border-radius:6px}
figcaption{font-weight:600;margin-bottom:2px}
figure p{margin:0 0 6px;color:#57606a;font-size:12px}
svg text{font:12px system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;fill:#1f2328}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:8px 0}
dt{font-weight:600}dd{margin:0;color:#57606a}
";

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

fn summary_table(out: &mut String, summaries: &[Summary]) {
    out.push_str(
        "<div class=\"scroll\"><table><thead><tr><th>strategy</th><th>convs</th>\
         <th>tokens after / before</th><th>reduction</th><th>tool-output reduction</th>\
         <th>values missed / used</th><th>found via receipt</th><th>turns with a miss</th><th>probes passed</th>\
         <th>determ&shy;inistic</th><th>replayed cost vs full (read from cache)</th>\
         <th>ms / compile</th></tr></thead><tbody>",
    );
    for (i, s) in summaries.iter().enumerate() {
        let probes = if s.probes.is_empty() {
            "–".to_owned()
        } else {
            s.probes
                .iter()
                .map(|p| {
                    let initial = p.name.chars().next().unwrap_or('?').to_ascii_uppercase();
                    format!(
                        "<span title=\"{}: passed {} of {} ({} ignoring excludes)\">{initial}&nbsp;{}/{}</span>",
                        escape(&p.name),
                        p.passed,
                        p.total,
                        p.passed_without_excludes,
                        p.passed,
                        p.total
                    )
                })
                .collect::<Vec<_>>()
                .join(" · ")
        };
        let convs = if s.errors > 0 {
            format!(
                "{} <span class=\"err\">({} failed)</span>",
                s.conversations, s.errors
            )
        } else {
            s.conversations.to_string()
        };
        let _ = write!(
            out,
            "<tr><td><span class=\"swatch\" style=\"background:{}\"></span>{}</td><td>{convs}</td>\
             <td>{}&nbsp;/&nbsp;{}</td><td>{}</td><td>{}</td><td>{}&nbsp;/&nbsp;{} ({})</td><td>{}</td><td>{}&nbsp;/&nbsp;{}</td>\
             <td>{probes}</td><td>{}</td><td>{} ({})</td><td>{}</td></tr>",
            colour(i),
            escape(&s.strategy),
            thousands(s.tokens_after),
            thousands(s.tokens_before),
            pct(s.reduction),
            pct(s.tool_output_reduction),
            thousands(s.missed_values as u64),
            thousands(s.used_values as u64),
            pct(s.miss_rate),
            thousands(s.recovered_values as u64),
            thousands(s.turns_with_miss as u64),
            thousands(s.turns as u64),
            if s.conversations == 0 {
                "–".to_owned()
            } else if s.nondeterministic == 0 {
                "yes".to_owned()
            } else {
                format!("no ({})", s.nondeterministic)
            },
            s.replay_relative
                .map_or_else(|| "–".to_owned(), |r| format!("{r:.3}")),
            pct(s.cached_share),
            s.wall_ms_mean
                .map_or_else(|| "–".to_owned(), |m| format!("{m:.2}")),
        );
    }
    out.push_str("</tbody></table></div>");
}

/// One metric plotted: title, note, how to read it from a summary, how to label a value,
/// and an optional reference line.
type Metric = (
    &'static str,
    &'static str,
    fn(&Summary) -> Option<f64>,
    fn(f64) -> String,
    Option<f64>,
);

/// A horizontal bar chart: one group per input (or one for the totals), one bar per strategy.
struct Chart<'a> {
    title: &'a str,
    note: &'a str,
    /// `(group label, values per strategy)`.
    groups: Vec<(String, Vec<Option<f64>>)>,
    /// Formats a value for its label.
    label: fn(f64) -> String,
    /// A reference line (e.g. 1.0 for cost relative to full).
    reference: Option<f64>,
    /// Width of the drawing, in CSS pixels at full size.
    width: f64,
}

fn chart(out: &mut String, c: &Chart<'_>, strategies: &[String]) {
    let bar = 13.0;
    let gap = 3.0;
    let group_gap = 10.0;
    let left = 130.0;
    let width = c.width;
    let plot = width - left - 60.0;
    let max = c
        .groups
        .iter()
        .flat_map(|(_, v)| v.iter().flatten().copied())
        .chain(c.reference)
        .fold(0.0_f64, f64::max)
        .max(1e-9);
    let mut y: f64 = 6.0;
    let mut body = String::new();
    for (label, values) in &c.groups {
        if c.groups.len() > 1 {
            let _ = write!(
                body,
                "<text x=\"0\" y=\"{:.1}\" font-weight=\"600\">{}</text>",
                y + 11.0,
                escape(label)
            );
            y += 16.0;
        }
        for (i, v) in values.iter().enumerate() {
            let name = strategies.get(i).map_or("", String::as_str);
            let short: String = if name.chars().count() > 18 {
                name.chars().take(17).chain(['…']).collect()
            } else {
                name.to_owned()
            };
            let _ = write!(
                body,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                left - 6.0,
                y + bar - 3.0,
                escape(&short)
            );
            match v {
                Some(v) => {
                    let w = (v.max(0.0) / max * plot).max(1.0);
                    let _ = write!(
                        body,
                        "<rect x=\"{left:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{bar:.1}\" rx=\"2\" fill=\"{}\"><title>{}: {}</title></rect>\
                         <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
                        colour(i),
                        escape(name),
                        (c.label)(*v),
                        left + w + 4.0,
                        y + bar - 3.0,
                        (c.label)(*v)
                    );
                }
                None => {
                    let _ = write!(
                        body,
                        "<text x=\"{:.1}\" y=\"{:.1}\" fill=\"#57606a\">n/a</text>",
                        left + 4.0,
                        y + bar - 3.0
                    );
                }
            }
            y += bar + gap;
        }
        y += group_gap;
    }
    if let Some(r) = c.reference {
        // Drawn first so that bars and labels sit on top of it.
        let x = left + r / max * plot;
        body.insert_str(
            0,
            &format!(
                "<line x1=\"{x:.1}\" y1=\"0\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#8c959f\" stroke-dasharray=\"3 3\"/>",
                y - group_gap
            ),
        );
    }
    let _ = write!(
        out,
        "<figure><figcaption>{}</figcaption><p>{}</p>\
         <svg xmlns=\"http://www.w3.org/2000/svg\" width=\"100%\" viewBox=\"0 0 {width:.0} {:.0}\" role=\"img\" aria-label=\"{}\">{body}</svg></figure>",
        escape(c.title),
        escape(c.note),
        y.max(20.0),
        escape(c.title)
    );
}

/// The report as a self-contained HTML page.
///
/// ```
/// use ctxgc_bench::run::{run, BenchConfig, InputFile};
/// let trace = r#"[{"id": "e1", "type": "set_var", "timestamp": 1, "key": "x", "value": 1}]"#;
/// let config = BenchConfig { timing: false, ..BenchConfig::default() };
/// let report = run(&[InputFile { path: "a<b>.json".into(), text: Ok(trace.into()) }], &config, &mut |_| {});
/// let page = ctxgc_bench::html::render(&report);
/// assert!(page.starts_with("<!DOCTYPE html>"));
/// assert!(page.contains("a&lt;b&gt;.json"));
/// assert!(!page.contains("<script"));
/// ```
pub fn render(report: &BenchReport) -> String {
    let strategies: Vec<String> = report.strategies.iter().map(|s| s.name.clone()).collect();
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>ctxgc bench</title><style>{STYLE}</style></head><body><main>\
         <h1>ctxgc bench</h1><p class=\"meta\">{} conversation(s) in {} input(s) · tokens counted with {} · \
         replayed cost with cache reads at {}× and cache writes at {}× the input price</p>",
        report.conversations.len(),
        report.files.len(),
        escape(report.tokenizer),
        report.cache.cache_read,
        report.cache.cache_write
    );

    let per_file = |f: fn(&Summary) -> Option<f64>| -> Vec<(String, Vec<Option<f64>>)> {
        report
            .files
            .iter()
            .filter(|file| file.error.is_none())
            .map(|file| {
                let name = file
                    .path
                    .rsplit('/')
                    .next()
                    .unwrap_or(&file.path)
                    .to_owned();
                (name, file.summaries.iter().map(f).collect())
            })
            .collect()
    };
    let totals = |f: fn(&Summary) -> Option<f64>| -> Vec<(String, Vec<Option<f64>>)> {
        vec![(
            "all inputs".to_owned(),
            report.totals.iter().map(f).collect(),
        )]
    };
    let metrics: [Metric; 3] = [
        (
            "Token reduction",
            "1 − tokens after / tokens before, on the whole conversation. Higher is smaller.",
            |s| s.reduction,
            |v| format!("{:.1}%", v * 100.0),
            None,
        ),
        (
            "Used values missed",
            "Share of the values the agent went on to use that were gone from the context before the turn that used them. Lower is better.",
            |s| s.miss_rate,
            |v| format!("{:.2}%", v * 100.0),
            None,
        ),
        (
            "Replayed cost vs full",
            "Input cost of every turn's request through a prefix cache, relative to sending the full history (dashed line = 1.0). Lower is cheaper.",
            |s| s.replay_relative,
            |v| format!("{v:.3}"),
            Some(1.0),
        ),
    ];
    out.push_str("<h2>At a glance: all inputs</h2><div class=\"charts\">");
    for (title, note, f, label, reference) in metrics {
        chart(
            &mut out,
            &Chart {
                title,
                note,
                groups: totals(f),
                label,
                reference,
                width: 360.0,
            },
            &strategies,
        );
    }
    out.push_str("</div>");
    let per_input_charts = |out: &mut String| {
        out.push_str("<h2>Per input</h2><div class=\"wide\">");
        for (title, note, f, label, reference) in metrics {
            chart(
                out,
                &Chart {
                    title,
                    note,
                    groups: per_file(f),
                    label,
                    reference,
                    width: 1100.0,
                },
                &strategies,
            );
        }
        out.push_str("</div>");
    };

    out.push_str("<h2>All inputs</h2>");
    summary_table(&mut out, &report.totals);
    let probe_names: Vec<&str> = report
        .totals
        .iter()
        .flat_map(|s| s.probes.iter().map(|p| p.name.as_str()))
        .fold(Vec::new(), |mut names, n| {
            if !names.contains(&n) {
                names.push(n);
            }
            names
        });
    if !probe_names.is_empty() {
        let legend: Vec<String> = probe_names
            .iter()
            .map(|n| {
                let initial = n.chars().next().unwrap_or('?').to_ascii_uppercase();
                format!("{initial} {}", escape(n))
            })
            .collect();
        let _ = write!(
            out,
            "<p class=\"meta\">Probes (tracegc fixtures, passed / fixtures): {}. Hover a score for \
             the count that ignores <code>excludes</code>.</p>",
            legend.join(", ")
        );
    }

    if report.files.iter().filter(|f| f.error.is_none()).count() > 1 {
        per_input_charts(&mut out);
    } else {
        out.push_str("<h2>Per input</h2>");
    }
    for file in &report.files {
        let _ = write!(out, "<h3>{}</h3>", escape(&file.path));
        match &file.error {
            Some(e) => {
                let _ = write!(out, "<p class=\"err\">could not be read: {}</p>", escape(e));
            }
            None => {
                let _ = write!(
                    out,
                    "<p class=\"meta\">{} conversation(s), {}</p>",
                    file.conversations,
                    escape(file.format.as_deref().unwrap_or("–"))
                );
                summary_table(&mut out, &file.summaries);
            }
        }
    }

    out.push_str("<h2>Strategies</h2><dl>");
    for s in &report.strategies {
        let _ = write!(
            out,
            "<dt>{}</dt><dd>{}</dd>",
            escape(&s.name),
            escape(&s.description)
        );
    }
    out.push_str(
        "</dl><p class=\"meta\">Definitions of every metric: docs/bench.md in the ctxgc repository.</p>\
         </main></body></html>\n",
    );
    out
}
