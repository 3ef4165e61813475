//! A long load run with the gateway's resident memory sampled throughout, for a leak rate.
//!
//! Half the workers speak OpenAI Chat Completions (answers not streamed), half Anthropic
//! Messages (streamed), so both paths are exercised. Each conversation starts over after
//! `--cycle` requests: the number and size of live conversations stay bounded, so a gateway
//! that keeps what it needs and no more has flat memory once warm, and a slope is a leak. The
//! rate is the least-squares slope of the samples taken after the warm-up fraction.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::json;

use crate::conversation::{Api, Template};
use crate::drive::{Phase, default_model, emit, fresh_run_id, run_phase};
use crate::rss;
use crate::stats::{Summary, round2};

/// Arguments of `gateway-compare soak`.
#[derive(Debug, Args)]
pub struct SoakArgs {
    /// The gateway's base URL.
    #[arg(long)]
    pub base: String,
    /// The gateway's process (its descendants are counted too).
    #[arg(long)]
    pub pid: u32,
    /// Name of the gateway, for the JSON line.
    #[arg(long, default_value = "gateway")]
    pub gateway: String,
    /// Seconds of load.
    #[arg(long, default_value_t = 600)]
    pub duration: u64,
    /// Size of each conversation before it grows, in tokens.
    #[arg(long, default_value_t = 10_000)]
    pub tokens: usize,
    /// Workers per API.
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Requests after which a conversation starts over.
    #[arg(long, default_value_t = 100)]
    pub cycle: usize,
    /// Memory samples over the run.
    #[arg(long, default_value_t = 20)]
    pub samples: u32,
    /// Fraction of the run counted as warm-up, left out of the slope.
    #[arg(long, default_value_t = 0.2)]
    pub warm: f64,
    /// Most seconds one request may take.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Least-squares slope of `(t, y)` points, per unit of t.
fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let n = points.len() as f64;
    let (mt, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (t, y)| (a + t / n, b + y / n));
    let (num, den) = points.iter().fold((0.0, 0.0), |(num, den), (t, y)| {
        (num + (t - mt) * (y - my), den + (t - mt) * (t - mt))
    });
    (den > 0.0).then(|| num / den)
}

/// Runs `soak`.
pub async fn run(args: SoakArgs) -> anyhow::Result<()> {
    let run = fresh_run_id();
    let limit = Duration::from_secs(args.duration);
    let phase = |api: Api, stream: bool| -> anyhow::Result<Phase> {
        Ok(Phase {
            url: format!("{}{}", args.base.trim_end_matches('/'), api.path()),
            api,
            stream,
            concurrency: args.concurrency.max(1),
            warmup: 0,
            // Bounded by the time limit; this count is never reached in practice.
            per_worker: 100_000_000,
            limit,
            timeout: Duration::from_secs(args.timeout),
            cycle: Some(args.cycle.max(1)),
            run: format!("{run}-{}", api.name()),
            template: Arc::new(Template::new(api, args.tokens, default_model(api))?),
        })
    };
    let openai = phase(Api::Openai, false)?;
    let anthropic = phase(Api::Anthropic, true)?;
    let started = Instant::now();
    let pid = args.pid;
    let every = limit / args.samples.max(1);
    let sampler = tokio::spawn(async move {
        let mut points = Vec::new();
        for _ in 0..args.samples.max(1) {
            tokio::time::sleep(every).await;
            if let Some(mb) = rss::tree_rss_mb(pid) {
                points.push((started.elapsed().as_secs_f64(), mb));
            }
        }
        points
    });
    let (a, b) = tokio::join!(run_phase(&openai), run_phase(&anthropic));
    let (a, b) = (a?, b?);
    let mut points = sampler.await.unwrap_or_default();
    let elapsed = started.elapsed().as_secs_f64();
    let after = rss::tree_rss_mb(pid);
    if let Some(mb) = after {
        points.push((elapsed, mb));
    }
    let warm_from = elapsed * args.warm;
    let warm: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(t, _)| *t >= warm_from)
        .collect();
    let leak_per_min = slope(&warm).map(|s| s * 60.0);
    let peak = points.iter().map(|p| p.1).reduce(f64::max);
    let mut samples = a.samples;
    samples.extend(b.samples);
    let summary = Summary::of(
        &samples,
        a.errors + b.errors,
        a.first_error.or(b.first_error),
    );
    let line = json!({
        "kind": "memory",
        "gateway": args.gateway,
        "soak_s": round2(Some(elapsed)),
        "soak_concurrency": args.concurrency * 2,
        "soak_requests": summary.requests,
        "soak_errors": summary.errors,
        "soak_error": summary.first_error,
        "soak_rps": round2(summary.rps),
        "soak_p50_ms": round2(summary.p50_ms),
        "soak_p99_ms": round2(summary.p99_ms),
        "rss_soak_start_mb": round2(warm.first().map(|p| p.1)),
        "rss_after_mb": round2(after),
        "rss_peak_mb": round2(peak),
        "leak_mb_per_min": round2(leak_per_min),
        "rss_samples": points.iter().map(|(t, mb)| json!([round2(Some(*t)), round2(Some(*mb))])).collect::<Vec<_>>(),
    });
    emit(&line, args.json);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::slope;

    #[test]
    fn slope_of_a_line() {
        let points: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 3.0 + 2.0 * i as f64)).collect();
        let s = slope(&points).unwrap_or_default();
        assert!((s - 2.0).abs() < 1e-9, "{s}");
        assert_eq!(slope(&points[..1]), None);
    }
}
