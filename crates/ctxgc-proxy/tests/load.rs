//! Load, run by `scripts/load-test.sh` (ignored in the normal suite): rounds of 200
//! concurrent tool calls over HTTP (20 agents, 10 calls each at once) through one proxy in
//! automatic mode (outputs observed, learned, trimmed, originals stored; each round ends its
//! run with the done tool), for
//! `CTXGC_LOAD_SECONDS` (default 20). Every answer must be its own call's; the process's
//! resident memory is sampled after every round and must not keep growing (the last sample
//! within twice the second round's).

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use ctxgc_core::projection::auto::AutoConfig;
use ctxgc_proxy::automatic::AutoShaper;
use serde_json::json;

const TOKEN: &str = "load-token-81c2aa";
const AIRPORTS: [&str; 6] = ["DUB", "LIS", "MAD", "OSL", "CPH", "VIE"];

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// An answer that uses a few fields of a flights output (trimmed or not).
fn answer_from(output: &str) -> String {
    let body = output.split("\n[hidden:").next().unwrap_or(output);
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
        return "no flights".to_owned();
    };
    let f = &v["flights"][0];
    format!(
        "Book {} from {} to {} with {}, departing {}.",
        f["id"].as_str().unwrap_or("?"),
        f["origin"].as_str().unwrap_or("?"),
        f["destination"].as_str().unwrap_or("?"),
        f["airline"].as_str().unwrap_or("?"),
        f["departure"].as_str().unwrap_or("?"),
    )
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "load: run by scripts/load-test.sh"]
async fn proxy_under_sustained_concurrent_calls() {
    let agents_n = env_number("CTXGC_LOAD_AGENTS", 20) as usize;
    let per_agent = env_number("CTXGC_LOAD_CALLS_PER_AGENT", 10) as usize;
    let seconds = env_number("CTXGC_LOAD_SECONDS", 20);
    let dir = tempfile::tempdir().unwrap();
    let shaper = Arc::new(
        AutoShaper::open(
            Path::new(&dir.path().join("work")),
            AutoConfig {
                min_runs: 3,
                ..AutoConfig::default()
            },
        )
        .unwrap(),
    );
    let servers = set_of(
        vec![stdio_server("travel", &["--tools", "search_flights,echo"])],
        &[],
    );
    let proxy = HttpProxy::start(
        core(&servers, shaper, Duration::from_secs(60)),
        security(TOKEN),
    )
    .await;
    let mut agents = Vec::new();
    for _ in 0..agents_n {
        agents.push(Arc::new(proxy.agent(TOKEN).await.0));
    }
    let started = Instant::now();
    let mut samples = Vec::new();
    let (mut total, mut trimmed) = (0usize, 0usize);
    let mut errors: Vec<String> = Vec::new();
    let mut round = 0usize;
    while round < 2 || started.elapsed() < Duration::from_secs(seconds) {
        let round_started = Instant::now();
        let mut tasks = Vec::new();
        for (a, agent) in agents.iter().enumerate() {
            for c in 0..per_agent {
                let agent = agent.clone();
                tasks.push(tokio::spawn(async move {
                    let n = a * 1000 + c;
                    if c % 2 == 0 {
                        let text = format!("agent {a} call {c} round {round}");
                        let (got, is_error) =
                            call_text(&agent, "echo", json!({"text": text})).await;
                        if is_error || got != text {
                            return Err(format!("{n}: echo answered {got:?}"));
                        }
                        Ok(None)
                    } else {
                        let (from, to) = (AIRPORTS[n % 6], AIRPORTS[(n + 1 + c) % 6]);
                        let (got, is_error) = call_text(
                            &agent,
                            "search_flights",
                            json!({"origin": from, "destination": to}),
                        )
                        .await;
                        if is_error || !got.contains(from) || !got.contains(to) {
                            return Err(format!("{n}: flights {from}-{to} answered {got:.200}"));
                        }
                        Ok(Some(got))
                    }
                }));
            }
        }
        let mut flights = None;
        for task in tasks {
            match task.await {
                Ok(Ok(None)) => {}
                Ok(Ok(Some(output))) => {
                    trimmed += usize::from(output.contains("expand"));
                    flights.get_or_insert(output);
                }
                Ok(Err(e)) => errors.push(e),
                Err(e) => errors.push(format!("task: {e}")),
            }
        }
        // Each round is one run: the agent answers with what it used, so automatic mode
        // learns after `min_runs` rounds and trims from then on, and the run in progress
        // (kept in memory until its answer) starts empty again.
        if let Some(output) = flights {
            let (receipt, is_error) = call_text(
                &agents[0],
                "ctxgc_done",
                json!({"answer": answer_from(&output)}),
            )
            .await;
            if is_error {
                errors.push(format!("ctxgc_done: {receipt}"));
            }
        }
        total += agents_n * per_agent;
        let rss = rss_kib();
        samples.push(rss);
        println!(
            "proxy round {round}: {} concurrent calls in {} ms, RSS {} MiB",
            agents_n * per_agent,
            round_started.elapsed().as_millis(),
            rss / 1024
        );
        round += 1;
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "proxy load: {total} calls in {elapsed:.0} s ({:.0}/s), {trimmed} trimmed, {} errors, RSS after round 1 {} MiB, max {} MiB, last {} MiB",
        total as f64 / elapsed,
        errors.len(),
        samples[1] / 1024,
        samples.iter().max().unwrap() / 1024,
        samples.last().unwrap() / 1024
    );
    assert!(
        errors.is_empty(),
        "{} errors, first: {:?}",
        errors.len(),
        &errors[..errors.len().min(3)]
    );
    assert!(trimmed > 0, "automatic mode never trimmed");
    assert!(
        *samples.last().unwrap() <= samples[1] * 2,
        "memory grew: {samples:?}"
    );
}
