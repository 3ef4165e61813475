//! Merges the JSON lines of one run (`case`, `capacity`, `idle` and `memory` lines, in any
//! order) into one line per gateway and case, or into the Markdown tables of docs/gateway.md.
//!
//! Each case line gains what was measured of its gateway as a whole (idle memory, memory after
//! the soak, the leak rate) and of its workload at every concurrency (the rate within the p99
//! limit), and, where the run measured a reference gateway too (`--against`, LiteLLM by
//! default), the ratio of each latency figure to the reference's for the same case.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Map, Value, json};

/// Arguments of `gateway-compare report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Files of JSON lines (none: standard input).
    pub files: Vec<PathBuf>,
    /// The gateway the others' figures are divided by.
    #[arg(long, default_value = "litellm")]
    pub against: String,
    /// One merged JSON object per line instead of Markdown tables.
    #[arg(long)]
    pub json: bool,
}

/// The latency figures compared with the reference gateway's.
const RATIOS: [&str; 3] = ["p50_ms", "p99_ms", "ttfb_added_ms"];

/// Identifies a workload regardless of concurrency (for capacity lines).
fn workload(line: &Value) -> (String, String, u64, bool) {
    (
        line["gateway"].as_str().unwrap_or_default().to_string(),
        line["api"].as_str().unwrap_or_default().to_string(),
        line["tokens"].as_u64().unwrap_or_default(),
        line["stream"].as_bool().unwrap_or_default(),
    )
}

/// Identifies a case of a reference gateway.
fn case_of(line: &Value) -> (String, u64, bool, u64) {
    (
        line["api"].as_str().unwrap_or_default().to_string(),
        line["tokens"].as_u64().unwrap_or_default(),
        line["stream"].as_bool().unwrap_or_default(),
        line["concurrency"].as_u64().unwrap_or_default(),
    )
}

/// Reads every line; a line that is not a JSON object is an error naming its place.
fn read_lines(args: &ReportArgs) -> anyhow::Result<Vec<Value>> {
    let mut texts: Vec<(String, String)> = Vec::new();
    if args.files.is_empty() {
        for (n, line) in std::io::stdin().lock().lines().enumerate() {
            texts.push((format!("stdin line {}", n + 1), line?));
        }
    } else {
        for file in &args.files {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            for (n, line) in text.lines().enumerate() {
                texts.push((
                    format!("{} line {}", file.display(), n + 1),
                    line.to_string(),
                ));
            }
        }
    }
    let mut lines = Vec::new();
    for (place, text) in texts {
        if text.trim().is_empty() {
            continue;
        }
        let value: Value =
            serde_json::from_str(&text).with_context(|| format!("{place}: not JSON"))?;
        if !value.is_object() || !value["kind"].is_string() {
            bail!("{place}: expected an object with a \"kind\" field");
        }
        lines.push(value);
    }
    Ok(lines)
}

/// The merged case lines, in the order the cases were measured.
pub fn merge(lines: &[Value], against: &str) -> Vec<Value> {
    let mut idle: BTreeMap<String, Value> = BTreeMap::new();
    let mut memory: BTreeMap<String, Value> = BTreeMap::new();
    let mut capacity: BTreeMap<(String, String, u64, bool), Value> = BTreeMap::new();
    let mut reference: BTreeMap<(String, u64, bool, u64), Value> = BTreeMap::new();
    for line in lines {
        let gateway = line["gateway"].as_str().unwrap_or_default().to_string();
        match line["kind"].as_str() {
            Some("idle") => {
                idle.insert(gateway, line["rss_mb"].clone());
            }
            Some("memory") => {
                memory.insert(gateway, line.clone());
            }
            Some("capacity") => {
                capacity.insert(workload(line), line["rps_within"].clone());
            }
            Some("case") if gateway == against => {
                reference.insert(case_of(line), line.clone());
            }
            _ => {}
        }
    }
    let mut merged = Vec::new();
    for line in lines.iter().filter(|l| l["kind"] == "case") {
        let mut out: Map<String, Value> = line.as_object().cloned().unwrap_or_default();
        let gateway = line["gateway"].as_str().unwrap_or_default();
        out.insert(
            "rss_idle_mb".into(),
            idle.get(gateway).cloned().unwrap_or(Value::Null),
        );
        let soak = memory.get(gateway);
        for (to, from) in [
            ("rss_after_load_mb", "rss_after_mb"),
            ("leak_mb_per_min", "leak_mb_per_min"),
            ("soak_s", "soak_s"),
        ] {
            out.insert(
                to.into(),
                soak.map(|m| m[from].clone()).unwrap_or(Value::Null),
            );
        }
        out.insert(
            "rps_within_limit".into(),
            capacity
                .get(&workload(line))
                .cloned()
                .unwrap_or(Value::Null),
        );
        if gateway != against
            && let Some(r) = reference.get(&case_of(line))
        {
            for key in RATIOS {
                let ratio = match (line[key].as_f64(), r[key].as_f64()) {
                    (Some(ours), Some(theirs)) if theirs > 0.0 => {
                        json!((ours / theirs * 1000.0).round() / 1000.0)
                    }
                    _ => Value::Null,
                };
                out.insert(format!("{key}_vs_{against}"), ratio);
            }
        }
        merged.push(Value::Object(out));
    }
    merged
}

fn cell(v: &Value) -> String {
    match v {
        Value::Null => "–".to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The Markdown tables: latency per case, then memory per gateway.
pub fn tables(merged: &[Value], against: &str) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "| gateway | api | tokens | stream | conc. | p50 added ms | p99 added ms | TTFB added ms | req/s (p99 ≤ limit) | p99 ÷ {against} | errors |\n"
    ));
    out.push_str("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for line in merged {
        let row = [
            cell(&line["gateway"]),
            cell(&line["api"]),
            cell(&line["tokens"]),
            cell(&line["stream"]),
            cell(&line["concurrency"]),
            cell(&line["p50_ms"]),
            cell(&line["p99_ms"]),
            cell(&line["ttfb_added_ms"]),
            cell(&line["rps_within_limit"]),
            cell(&line[format!("p99_ms_vs_{against}")]),
            cell(&line["errors"]),
        ];
        out.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    out.push_str("\n| gateway | RSS idle MB | RSS after load MB | leak MB/min | load s |\n");
    out.push_str("|---|---:|---:|---:|---:|\n");
    let mut seen: Vec<&str> = Vec::new();
    for line in merged {
        let gateway = line["gateway"].as_str().unwrap_or_default();
        if seen.contains(&gateway) {
            continue;
        }
        seen.push(gateway);
        out.push_str(&format!(
            "| {gateway} | {} | {} | {} | {} |\n",
            cell(&line["rss_idle_mb"]),
            cell(&line["rss_after_load_mb"]),
            cell(&line["leak_mb_per_min"]),
            cell(&line["soak_s"]),
        ));
    }
    out
}

/// Runs `report`.
pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    let lines = read_lines(&args)?;
    let merged = merge(&lines, &args.against);
    let mut stdout = std::io::stdout().lock();
    if args.json {
        for line in &merged {
            writeln!(stdout, "{line}")?;
        }
    } else {
        write!(stdout, "{}", tables(&merged, &args.against))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(gateway: &str, c: u64, p99: f64) -> Value {
        json!({"kind": "case", "gateway": gateway, "api": "openai", "tokens": 10000,
            "stream": false, "concurrency": c, "p50_ms": p99 / 2.0, "p99_ms": p99,
            "ttfb_added_ms": null, "rss_mb": 40.0, "errors": 0})
    }

    #[test]
    fn cases_gain_memory_capacity_and_ratios() {
        let lines = vec![
            case("litellm", 1, 8.0),
            case("ctxgc", 1, 1.0),
            case("ctxgc", 64, 2.0),
            json!({"kind": "idle", "gateway": "ctxgc", "rss_mb": 12.5}),
            json!({"kind": "memory", "gateway": "ctxgc", "rss_after_mb": 30.0,
                "leak_mb_per_min": 0.01, "soak_s": 600.0}),
            json!({"kind": "capacity", "gateway": "ctxgc", "api": "openai", "tokens": 10000,
                "stream": false, "rps_within": 900.0}),
        ];
        let merged = merge(&lines, "litellm");
        assert_eq!(merged.len(), 3);
        let ours = &merged[1];
        assert_eq!(ours["rss_idle_mb"], json!(12.5));
        assert_eq!(ours["rss_after_load_mb"], json!(30.0));
        assert_eq!(ours["rps_within_limit"], json!(900.0));
        assert_eq!(ours["p99_ms_vs_litellm"], json!(0.125));
        // No reference case at concurrency 64: no ratio rather than a wrong one.
        assert!(merged[2].get("p99_ms_vs_litellm").is_none());
        assert!(merged[0].get("p99_ms_vs_litellm").is_none());
        let table = tables(&merged, "litellm");
        assert!(
            table.contains("| ctxgc | openai | 10000 | false | 1 | 0.5 | 1.0 |"),
            "{table}"
        );
        assert!(
            table.contains("| ctxgc | 12.5 | 30.0 | 0.01 | 600.0 |"),
            "{table}"
        );
    }
}
