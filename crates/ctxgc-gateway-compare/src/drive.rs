//! The load driver: closed-loop workers, each replaying its own growing conversation, timing
//! every request end to end and to its first body byte.
//!
//! A case is measured twice with the same requests (same conversations, same steps): direct
//! to the provider, then through the gateway; "added" is the difference of the two phases'
//! percentiles, as in the gateway latency bench. Measuring the direct phase right before the
//! gateway's keeps both under the same machine conditions. Each worker keeps one client (one
//! pooled connection), as one tenant's agent does, and sends its own API key.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

use crate::conversation::{Api, Conversation, Template};
use crate::rss;
use crate::stats::{Sample, Summary, minus, round2};

/// Arguments of `gateway-compare drive`.
#[derive(Debug, Args)]
pub struct DriveArgs {
    /// The gateway's base URL (http://127.0.0.1:PORT; the API path is appended).
    #[arg(long)]
    pub base: String,
    /// The provider's base URL, for the direct phase that "added" is measured against.
    #[arg(long)]
    pub direct: Option<String>,
    /// The API the requests speak.
    #[arg(long, value_enum)]
    pub api: Api,
    /// Size of each conversation before it grows, in o200k_base tokens.
    #[arg(long, default_value_t = 10_000)]
    pub tokens: usize,
    /// Workers, each with its own conversation, each with one request in flight.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// Ask for streamed answers (server-sent events).
    #[arg(long)]
    pub stream: bool,
    /// Measured requests per phase, shared out among the workers.
    #[arg(long, default_value_t = 300)]
    pub requests: usize,
    /// Requests per worker before measuring (connections, the gateway's first compile of each
    /// conversation).
    #[arg(long, default_value_t = 3)]
    pub warmup: usize,
    /// Most seconds a phase may take (it ends early, with what it measured, past that).
    #[arg(long, default_value_t = 60)]
    pub duration: u64,
    /// Most seconds one request may take.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// Instead of one case: step through these concurrencies (comma separated) until p99
    /// added passes --limit-ms, and print the highest rate that stayed within it.
    #[arg(long, value_delimiter = ',')]
    pub sweep: Vec<usize>,
    /// The p99 added latency a sweep may reach, in milliseconds.
    #[arg(long, default_value_t = 5.0)]
    pub limit_ms: f64,
    /// Name of the gateway, for the JSON line.
    #[arg(long, default_value = "gateway")]
    pub gateway: String,
    /// A process whose resident memory (with its descendants') is read after the run.
    #[arg(long)]
    pub rss_pid: Option<u32>,
    /// Names this run's conversations (default: from the clock and the process id).
    #[arg(long)]
    pub run: Option<String>,
    /// The model named in each request.
    #[arg(long)]
    pub model: Option<String>,
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
}

/// One phase: C workers against one URL.
#[derive(Debug, Clone)]
pub struct Phase {
    pub url: String,
    pub api: Api,
    pub stream: bool,
    pub concurrency: usize,
    pub warmup: usize,
    pub per_worker: usize,
    pub limit: Duration,
    pub timeout: Duration,
    /// Start each conversation over after this many requests (long runs).
    pub cycle: Option<usize>,
    pub run: String,
    pub template: Arc<Template>,
}

/// What one phase measured.
#[derive(Debug, Default)]
pub struct PhaseResult {
    pub samples: Vec<Sample>,
    pub errors: usize,
    pub first_error: Option<String>,
}

impl PhaseResult {
    pub fn summary(&self) -> Summary {
        Summary::of(&self.samples, self.errors, self.first_error.clone())
    }
}

/// A worker gives up after this many failures in a row (a gateway that cannot serve the
/// case is reported, not hammered until the time limit).
const MAX_CONSECUTIVE_ERRORS: usize = 3;

/// A run id unlikely to repeat: the clock's nanoseconds and the process id.
pub fn fresh_run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{:x}{:x}", nanos & 0xffff_ffff_ffff, std::process::id())
}

/// The model name each API's requests carry by default (the names a LiteLLM config routes).
pub fn default_model(api: Api) -> &'static str {
    match api {
        Api::Openai => "compare-gpt",
        Api::Anthropic => "compare-claude",
    }
}

fn client(timeout: Duration) -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        // Loopback only: no proxy from the environment may take the traffic elsewhere.
        .no_proxy()
        .timeout(timeout)
        .pool_max_idle_per_host(1)
        .build()
        .context("building the HTTP client")
}

/// Sends one request and reads its answer to the end; the elapsed times, or why it failed.
async fn one(
    client: &reqwest::Client,
    phase: &Phase,
    key: &str,
    body: String,
) -> Result<(Duration, Duration), String> {
    let mut request = client
        .post(&phase.url)
        .header("content-type", "application/json");
    request = match phase.api {
        Api::Openai => request.header("authorization", format!("Bearer {key}")),
        Api::Anthropic => request
            .header("x-api-key", key)
            .header("anthropic-version", "2023-06-01"),
    };
    let started = Instant::now();
    let mut response = request
        .body(body)
        .send()
        .await
        .map_err(|e| format!("send: {e}"))?;
    let status = response.status();
    let mut first = None;
    let mut kept: Vec<u8> = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("read: {e}"))? {
        if first.is_none() && !chunk.is_empty() {
            first = Some(started.elapsed());
        }
        // Answers are small; keep at most 1 MiB for the checks below.
        if kept.len() < 1 << 20 {
            kept.extend_from_slice(&chunk);
        }
    }
    let total = started.elapsed();
    if !status.is_success() {
        let text = String::from_utf8_lossy(&kept[..kept.len().min(300)]).into_owned();
        return Err(format!("HTTP {status}: {text}"));
    }
    let complete = if phase.stream {
        memchr::memmem::find(&kept, phase.api.stream_end()).is_some()
    } else {
        memchr::memmem::find(&kept, b"\"usage\"").is_some()
    };
    if !complete {
        let text = String::from_utf8_lossy(&kept[..kept.len().min(300)]).into_owned();
        return Err(format!("incomplete answer: {text}"));
    }
    Ok((total, first.unwrap_or(total)))
}

/// Runs one phase to its end: every worker's requests sent, or the time limit reached.
pub async fn run_phase(phase: &Phase) -> anyhow::Result<PhaseResult> {
    let started = Instant::now();
    let deadline = started + phase.limit;
    let mut tasks = Vec::with_capacity(phase.concurrency);
    for worker in 0..phase.concurrency {
        let phase = phase.clone();
        let client = client(phase.timeout)?;
        tasks.push(tokio::spawn(async move {
            let key = format!("sk-compare-{}-{worker}", phase.run);
            let mut conversation =
                Conversation::new(phase.template.clone(), worker, &phase.run, phase.stream);
            let mut result = PhaseResult::default();
            let mut in_a_row = 0;
            for n in 0..phase.warmup + phase.per_worker {
                if Instant::now() >= deadline || in_a_row >= MAX_CONSECUTIVE_ERRORS {
                    break;
                }
                if let Some(cycle) = phase.cycle
                    && conversation.step >= cycle
                {
                    conversation.restart();
                }
                let body = conversation.body();
                let sent = started.elapsed();
                match one(&client, &phase, &key, body).await {
                    Ok((total, first_byte)) => {
                        in_a_row = 0;
                        if n >= phase.warmup {
                            result.samples.push(Sample {
                                sent,
                                total,
                                first_byte,
                            });
                        }
                    }
                    Err(e) => {
                        in_a_row += 1;
                        result.errors += 1;
                        result.first_error.get_or_insert(e);
                    }
                }
                // The conversation grows whether or not the answer came, as an agent retrying
                // with its next step would; the same requests go direct and through.
                conversation.advance();
            }
            result
        }));
    }
    let mut all = PhaseResult::default();
    for task in tasks {
        let r = task.await.context("a worker stopped")?;
        all.samples.extend(r.samples);
        all.errors += r.errors;
        if all.first_error.is_none() {
            all.first_error = r.first_error;
        }
    }
    Ok(all)
}

fn url(base: &str, api: Api) -> String {
    format!("{}{}", base.trim_end_matches('/'), api.path())
}

fn error_text(s: &Summary) -> Option<String> {
    s.first_error.as_ref().map(|e| {
        format!(
            "{} of {} requests failed; first: {e}",
            s.errors,
            s.errors + s.requests
        )
    })
}

/// Runs `drive`.
pub async fn run(args: DriveArgs) -> anyhow::Result<()> {
    if args.concurrency == 0 || args.sweep.contains(&0) {
        bail!("--concurrency and --sweep take 1 or more workers");
    }
    let model = args
        .model
        .clone()
        .unwrap_or_else(|| default_model(args.api).to_string());
    let template = Arc::new(Template::new(args.api, args.tokens, &model)?);
    let run = args.run.clone().unwrap_or_else(fresh_run_id);
    let phase = |base: &str, concurrency: usize, run: String| Phase {
        url: url(base, args.api),
        api: args.api,
        stream: args.stream,
        concurrency,
        warmup: args.warmup,
        per_worker: args.requests.div_ceil(concurrency).max(1),
        limit: Duration::from_secs(args.duration),
        timeout: Duration::from_secs(args.timeout),
        cycle: None,
        run,
        template: template.clone(),
    };
    if !args.sweep.is_empty() {
        return sweep(&args, &phase, &run).await;
    }
    let direct = match &args.direct {
        Some(d) => Some(
            run_phase(&phase(d, args.concurrency, run.clone()))
                .await?
                .summary(),
        ),
        None => None,
    };
    let through = run_phase(&phase(&args.base, args.concurrency, run))
        .await?
        .summary();
    let rss_mb = args.rss_pid.and_then(rss::tree_rss_mb);
    let d = direct.clone().unwrap_or_default();
    let body_kb = Conversation::new(template.clone(), 0, "0123456789abcdef", args.stream)
        .body()
        .len() as f64
        / 1024.0;
    let line = json!({
        "kind": "case",
        "gateway": args.gateway,
        "api": args.api.name(),
        "tokens": args.tokens,
        "concurrency": args.concurrency,
        "stream": args.stream,
        "p50_ms": round2(minus(through.p50_ms, d.p50_ms)),
        "p99_ms": round2(minus(through.p99_ms, d.p99_ms)),
        "ttfb_added_ms": if args.stream { round2(minus(through.ttfb_p50_ms, d.ttfb_p50_ms)) } else { None },
        "ttfb_added_p99_ms": if args.stream { round2(minus(through.ttfb_p99_ms, d.ttfb_p99_ms)) } else { None },
        "rss_mb": round2(rss_mb),
        "rps": round2(through.rps),
        "through_p50_ms": round2(through.p50_ms),
        "through_p99_ms": round2(through.p99_ms),
        "direct_p50_ms": round2(d.p50_ms),
        "direct_p99_ms": round2(d.p99_ms),
        "direct_rps": round2(d.rps),
        "ttfb_p50_ms": round2(through.ttfb_p50_ms),
        "requests": through.requests,
        "errors": through.errors,
        "error": error_text(&through),
        "direct_errors": d.errors,
        "tokens_counted": template.tokens,
        "messages": template.messages,
        "body_kb": round2(Some(body_kb)),
    });
    emit(&line, args.json);
    if direct.is_some_and(|d| d.errors > 0) {
        eprintln!(
            "gateway-compare: the direct phase had errors: {}",
            error_text(&d).unwrap_or_default()
        );
    }
    Ok(())
}

/// Steps the concurrency up until p99 added passes the limit (or a level has errors), and
/// reports the highest through-gateway rate of a level within it.
async fn sweep(
    args: &DriveArgs,
    phase: &dyn Fn(&str, usize, String) -> Phase,
    run: &str,
) -> anyhow::Result<()> {
    let Some(direct) = &args.direct else {
        bail!("--sweep measures added latency: give --direct");
    };
    let mut levels = Vec::new();
    let mut best: Option<(f64, usize)> = None;
    let mut stopped = None;
    for &c in &args.sweep {
        // Fresh conversations per level: a gateway must not see a conversation start over.
        let level_run = format!("{run}-c{c}");
        let d = run_phase(&phase(direct, c, level_run.clone()))
            .await?
            .summary();
        let t = run_phase(&phase(&args.base, c, level_run)).await?.summary();
        let added = minus(t.p99_ms, d.p99_ms);
        levels.push(
            json!({"concurrency": c, "rps": round2(t.rps), "direct_rps": round2(d.rps),
            "p99_added_ms": round2(added), "errors": t.errors}),
        );
        let within = t.errors == 0 && added.is_some_and(|a| a <= args.limit_ms);
        if !within {
            stopped = Some(if t.errors > 0 {
                format!("c={c}: {}", error_text(&t).unwrap_or_default())
            } else {
                format!("c={c}: p99 added {:.2} ms", added.unwrap_or(f64::NAN))
            });
            break;
        }
        if let Some(rps) = t.rps
            && best.is_none_or(|(b, _)| rps > b)
        {
            best = Some((rps, c));
        }
    }
    let line = json!({
        "kind": "capacity",
        "gateway": args.gateway,
        "api": args.api.name(),
        "tokens": args.tokens,
        "stream": args.stream,
        "limit_ms": args.limit_ms,
        "rps_within": round2(best.map(|b| b.0)),
        "concurrency_within": best.map(|b| b.1),
        "stopped": stopped,
        "levels": Value::Array(levels),
    });
    emit(&line, args.json);
    Ok(())
}

/// Prints a JSON line, or the same fields as `key=value` text.
pub fn emit(line: &Value, as_json: bool) {
    if as_json {
        println!("{line}");
        return;
    }
    if let Value::Object(map) = line {
        let fields: Vec<String> = map
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| match v {
                Value::String(s) => format!("{k}={s}"),
                other => format!("{k}={other}"),
            })
            .collect();
        println!("{}", fields.join("  "));
    }
}
