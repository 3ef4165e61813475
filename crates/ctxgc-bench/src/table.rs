//! The terminal table: one block per input file, one row per strategy, then the totals.
//!
//! Columns: conversations benched (and failed), tokens after / before, reduction, tool-output
//! reduction, used values lost beyond recall (of used), used values recalled through a receipt
//! stub and the recall tool with the recall requests that took (and their share of requests),
//! turns with a loss, probe passes per probe,
//! determinism, replayed cost relative to `full` and the share of it read from the cache, the
//! highest replayed cost of one conversation relative to `full`, and mean milliseconds per
//! whole-conversation compile.

use std::fmt::Write as _;

pub use ctxgc_report::thousands;

use crate::report::{BenchReport, Summary};

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{:.1}%", v * 100.0))
}

const HEADER: [&str; 13] = [
    "strategy",
    "convs",
    "tokens after / before",
    "reduction",
    "tool-out red.",
    "lost / used",
    "recalled (recalls)",
    "turns w/ loss",
    "probes",
    "determ.",
    "replay vs full (cached)",
    "worst conv.",
    "ms/compile",
];

fn row(s: &Summary) -> [String; 13] {
    let convs = if s.errors > 0 {
        format!("{} ({} failed)", s.conversations, s.errors)
    } else {
        s.conversations.to_string()
    };
    let probes = if s.probes.is_empty() {
        "-".to_owned()
    } else {
        s.probes
            .iter()
            .map(|p| {
                let initial = p.name.chars().next().unwrap_or('?').to_ascii_uppercase();
                format!("{initial}{}/{}", p.passed, p.total)
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let determ = if s.conversations == 0 {
        "-".to_owned()
    } else if s.nondeterministic == 0 {
        "yes".to_owned()
    } else {
        format!("no ({})", s.nondeterministic)
    };
    let replay = match s.replay_relative {
        Some(r) => format!("{r:.3} ({})", pct(s.cached_share)),
        None => "-".to_owned(),
    };
    [
        s.strategy.clone(),
        convs,
        format!(
            "{} / {}",
            thousands(s.tokens_after),
            thousands(s.tokens_before)
        ),
        pct(s.reduction),
        pct(s.tool_output_reduction),
        format!(
            "{} / {} ({})",
            thousands(s.missed_values as u64),
            thousands(s.used_values as u64),
            pct(s.miss_rate)
        ),
        if s.recalls == 0 {
            thousands(s.recovered_values as u64)
        } else {
            format!(
                "{} ({}, {})",
                thousands(s.recovered_values as u64),
                thousands(s.recalls as u64),
                pct(s.recall_share)
            )
        },
        format!("{} / {}", s.turns_with_miss, s.turns),
        probes,
        determ,
        replay,
        s.worst_replay_relative
            .map_or_else(|| "-".to_owned(), |w| format!("{w:.3}")),
        s.wall_ms_mean
            .map_or_else(|| "-".to_owned(), |m| format!("{m:.2}")),
    ]
}

fn write_block(out: &mut String, title: &str, summaries: &[Summary]) {
    let rows: Vec<[String; 13]> = summaries.iter().map(row).collect();
    let mut widths = HEADER.map(|h| h.chars().count());
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let _ = writeln!(out, "{title}");
    let line = |cells: &[String]| -> String {
        cells
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(n, (c, w))| {
                let pad = w - c.chars().count();
                if n == 0 {
                    format!("{c}{}", " ".repeat(pad))
                } else {
                    format!("{}{c}", " ".repeat(pad))
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_owned()
    };
    let header: Vec<String> = HEADER.iter().map(|h| (*h).to_owned()).collect();
    let _ = writeln!(out, "  {}", line(&header));
    for r in &rows {
        let _ = writeln!(out, "  {}", line(r));
    }
}

/// The report as a table; with `explain`, every miss, probe failure and error follows it.
pub fn render(report: &BenchReport, explain: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ctxgc bench: {} conversation(s) in {} input(s); tokens {}; cache read {}x, write {}x",
        report.conversations.len(),
        report.files.len(),
        report.tokenizer,
        report.cache.cache_read,
        report.cache.cache_write
    );
    for file in &report.files {
        out.push('\n');
        match &file.error {
            Some(error) => {
                let _ = writeln!(out, "{}: could not be read: {error}", file.path);
            }
            None => {
                let title = format!(
                    "{} ({} conversation(s), {})",
                    file.path,
                    file.conversations,
                    file.format.as_deref().unwrap_or("-")
                );
                write_block(&mut out, &title, &file.summaries);
            }
        }
    }
    if report.files.len() > 1 {
        out.push('\n');
        write_block(&mut out, "all inputs", &report.totals);
    }
    let mut errors = Vec::new();
    for c in &report.conversations {
        for r in &c.results {
            if let Some(e) = &r.error {
                errors.push(format!("  {} #{} {}: {e}", c.file, c.id, r.strategy));
            }
        }
    }
    if !errors.is_empty() {
        let _ = writeln!(out, "\nerrors ({}):", errors.len());
        let shown = if explain { errors.len() } else { 10 };
        for e in errors.iter().take(shown) {
            let _ = writeln!(out, "{e}");
        }
        if errors.len() > shown {
            let _ = writeln!(
                out,
                "  … {} more (all of them with --explain or --output json)",
                errors.len() - shown
            );
        }
    }
    if explain {
        write_explain(&mut out, report);
    }
    out
}

fn write_explain(out: &mut String, report: &BenchReport) {
    for c in &report.conversations {
        for r in &c.results {
            let Some(m) = &r.metrics else { continue };
            let failed: Vec<_> = m.probes.iter().flatten().filter(|p| !p.passed).collect();
            if m.survival.misses.is_empty() && failed.is_empty() {
                continue;
            }
            let _ = writeln!(out, "\n{} #{} — {}:", c.file, c.id, r.strategy);
            for miss in &m.survival.misses {
                let _ = writeln!(
                    out,
                    "  miss before turn {} ({}): {:?} from {} (item {})",
                    miss.turn, miss.turn_id, miss.value, miss.source_id, miss.source
                );
            }
            for p in failed {
                let mut why = Vec::new();
                if !p.missing.is_empty() {
                    why.push(format!("missing {:?}", p.missing));
                }
                if !p.present.is_empty() {
                    why.push(format!("still present {:?}", p.present));
                }
                if p.recovered == Some(false) {
                    why.push("recovered value not recoverable".to_owned());
                }
                let _ = writeln!(out, "  probe {} failed: {}", p.name, why.join("; "));
            }
        }
    }
}
